"""Stand-in of SGLang's base_grammar_backend.py at 99e1c516 (its
interface only; see ../../../README.md)."""
import logging
import time
from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger(__name__)


class BaseGrammarObject:
    def __init__(self):
        self._finished = False
        self.grammar_stats = None
        self.current_token = None

    def accept_token(self, token):
        raise NotImplementedError()

    def rollback(self, k):
        raise NotImplementedError()

    def is_terminated(self):
        return False

    def allocate_vocab_mask(self, vocab_size, batch_size, device):
        raise NotImplementedError()

    def fill_vocab_mask(self, vocab_mask, idx):
        raise NotImplementedError()

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        raise NotImplementedError()

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask):
        raise NotImplementedError()

    def copy(self):
        return self

    @property
    def finished(self):
        return self._finished

    @finished.setter
    def finished(self, value):
        self._finished = value

    def try_jump_forward(self, tokenizer):
        raise NotImplementedError()


INVALID_GRAMMAR_OBJ = BaseGrammarObject()


class BaseGrammarBackend:
    def __init__(self):
        self.executor = ThreadPoolExecutor()
        self.cache = {}

    def _not_supported(self, key_type, key_string):
        logger.warning("Skip unsupported %s", key_type)

    def dispatch_json(self, key_string):
        return self._not_supported("json", key_string)

    def dispatch_regex(self, key_string):
        return self._not_supported("regex", key_string)

    def dispatch_ebnf(self, key_string):
        return self._not_supported("ebnf", key_string)

    def dispatch_structural_tag(self, key_string):
        return self._not_supported("structural_tag", key_string)

    def _init_value_dispatch(self, key):
        start = time.perf_counter()
        key_type, key_string = key
        fn = {"json": self.dispatch_json, "regex": self.dispatch_regex,
              "ebnf": self.dispatch_ebnf,
              "structural_tag": self.dispatch_structural_tag}.get(key_type)
        if fn is None:
            raise ValueError("Invalid key_type: %s" % key_type)
        grammar = fn(key_string)
        if grammar is not None and grammar.grammar_stats is not None:
            grammar.grammar_stats.compilation_time = time.perf_counter() - start
        return grammar

    def get_cached_or_future_value(self, key):
        value = self.cache.get(key)
        if value:
            return value.copy(), True
        return self.executor.submit(self._init_value_dispatch, key), False

    def set_cache(self, key, value):
        self.cache[key] = value

    def reset(self):
        self.cache.clear()


GRAMMAR_BACKEND_REGISTRY = {}


def register_grammar_backend(name, init_func):
    GRAMMAR_BACKEND_REGISTRY[name] = init_func


def create_grammar_backend(server_args, tokenizer, vocab_size, eos_token_ids=None):
    name = server_args.grammar_backend
    if name in GRAMMAR_BACKEND_REGISTRY:
        return GRAMMAR_BACKEND_REGISTRY[name](server_args, tokenizer, vocab_size, eos_token_ids)
    raise ValueError("Invalid grammar backend: %s" % name)
