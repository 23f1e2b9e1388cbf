"""sift.Grammar: the C type plus the dict forms of JSON Schema and of
structural tags."""
import json

from . import _sift


def _text(x):
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).decode("utf-8")
    return x


def _tag_field(tag, name):
    if isinstance(tag, dict):
        return tag.get(name)
    return getattr(tag, name, None)


def _tag_tuple(tag):
    """(begin, schema, grammar, end) from a tuple, a dict or an object
    with those attributes (xgrammar's StructuralTagItem: begin, schema,
    end); a schema that is not text is serialised with json.dumps."""
    if isinstance(tag, tuple):
        return tag
    schema = _tag_field(tag, "schema")
    if schema is not None and not isinstance(schema, (str, bytes, bytearray)):
        schema = json.dumps(schema)
    return (_text(_tag_field(tag, "begin")), _text(schema), _text(_tag_field(tag, "grammar")),
            _text(_tag_field(tag, "end")))


class Grammar(_sift.Grammar):
    __slots__ = ()
    __doc__ = _sift.Grammar.__doc__

    @classmethod
    def from_json_schema(cls, schema, vocab=None, **kw):
        """A grammar from a JSON Schema: JSON text (str or bytes) or a
        dict/list/bool, which is serialised with json.dumps first (errors
        then name places in that text). Keywords as the C call's:
        whitespace='flexible'|'compact', max_whitespace, strict,
        unsupported='error'|'ignore', name, max_rollback_tokens."""
        if not isinstance(schema, (str, bytes, bytearray)):
            schema = json.dumps(schema)
        return super().from_json_schema(schema, vocab, **kw)

    @classmethod
    def from_structural_tags(cls, tags, triggers=None, vocab=None, **kw):
        """A lazy grammar of tool calls (sift_grammar_from_structural_tags).

        `tags`: a list of dicts or objects with `begin`, `schema` (JSON
        text or a dict) or `grammar` (GBNF), and `end` (xgrammar's
        StructuralTagItem list), or of tuples (begin, schema, grammar,
        end). xgrammar's legacy JSON form is taken too: a dict (or its
        JSON text) {"structures": [...], "triggers": [...]}, with
        `triggers` then left None. Keywords: whitespace, max_whitespace,
        strict, unsupported (for the schema bodies), max_rollback_tokens."""
        if isinstance(tags, (str, bytes, bytearray)):
            tags = json.loads(tags)
        if isinstance(tags, dict):
            if triggers is None:
                triggers = tags.get("triggers")
            tags = tags.get("structures", [])
        if triggers is None:
            raise TypeError("from_structural_tags needs triggers")
        return super().from_structural_tags([_tag_tuple(t) for t in tags],
                                            [_text(t) for t in triggers], vocab, **kw)

    def __repr__(self):
        return "<sift.Grammar V=%d%s>" % (self.vocab_size, "" if self.is_triggered()
                                          else " lazy, untriggered")
