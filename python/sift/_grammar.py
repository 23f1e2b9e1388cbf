"""sift.Grammar: the C type plus the dict form of JSON Schema."""
import json

from . import _sift


class Grammar(_sift.Grammar):
    __slots__ = ()
    __doc__ = _sift.Grammar.__doc__

    @classmethod
    def from_json_schema(cls, schema, vocab=None, **kw):
        """A grammar from a JSON Schema: JSON text (str or bytes) or a
        dict/list/bool, which is serialised with json.dumps first (errors
        then name places in that text). Keywords as the C call's:
        whitespace='flexible'|'compact', max_whitespace, strict,
        unsupported='error'|'ignore', name."""
        if not isinstance(schema, (str, bytes, bytearray)):
            schema = json.dumps(schema)
        return super().from_json_schema(schema, vocab, **kw)

    def __repr__(self):
        return "<sift.Grammar V=%d%s>" % (self.vocab_size, "" if self.is_triggered()
                                          else " lazy, untriggered")
