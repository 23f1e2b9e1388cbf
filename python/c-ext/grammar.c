/*
 * grammar.c - sift.Grammar: one request's compiled grammar and matching
 * state (sift_grammar), with the method names of xgrammar's
 * GrammarMatcher where sift has the call (accept_token, accept_string,
 * fill_next_token_bitmask, is_completed, is_terminated, rollback,
 * find_jump_forward_string, reset, copy) and of vLLM's structured-output
 * grammar (validate_tokens); fill_next_token_bitmasks_draft and
 * find_jump_forward_bytes are sift's own names.
 *
 * Compiling (GBNF, JSON Schema, regex, choices, structural tags),
 * filling masks, validating drafts and finding forced bytes run with the
 * GIL released: SGLang and vLLM compile on thread pools and fill masks on
 * several threads. While the GIL is released the object is marked busy,
 * so a second thread gets SiftError(SIFT_E_STATE) instead of a data race.
 */
#include "sift_py.h"

#include <string.h>

#define GRAMMAR_ACQUIRE(self)                   \
    do {                                        \
        if ((self)->busy)                       \
            return siftpy_busy("this grammar"); \
        (self)->busy = 1;                       \
    } while (0)
#define GRAMMAR_RELEASE(self) ((self)->busy = 0)

static void grammar_dealloc(SiftPyGrammar *self)
{
    sift_grammar_free(self->grammar);
    Py_XDECREF(self->vocab);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *wrap(PyTypeObject *type, sift_grammar *g, PyObject *vocab)
{
    SiftPyGrammar *self = (SiftPyGrammar *)type->tp_alloc(type, 0);
    if (!self) {
        sift_grammar_free(g);
        return NULL;
    }
    self->grammar = g;
    self->vocab = vocab ? vocab : Py_None;
    Py_INCREF(self->vocab);
    self->n_vocab = vocab && vocab != Py_None ? sift_vocab_size(((SiftPyVocab *)vocab)->vocab) : 0;
    return (PyObject *)self;
}

static int get_vocab(PyObject *obj, const sift_vocab **out)
{
    *out = NULL;
    if (!obj || obj == Py_None)
        return 0;
    if (!PyObject_TypeCheck(obj, &SiftPyVocab_Type)) {
        PyErr_Format(PyExc_TypeError, "vocab must be a sift.Vocab, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = ((SiftPyVocab *)obj)->vocab;
    return 0;
}

static PyObject *grammar_from_gbnf(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"text", "vocab", "root", "name", "max_rollback_tokens", NULL};
    Py_buffer text;
    PyObject *vocab_obj = NULL;
    const char *root = NULL, *name = NULL;
    int max_rb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|O$zzi:from_gbnf", kwlist, &text, &vocab_obj,
                                     &root, &name, &max_rb))
        return NULL;
    const sift_vocab *vocab;
    if (get_vocab(vocab_obj, &vocab) < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.root = root;
    gp.source_name = name;
    gp.max_rollback_tokens = max_rb;
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_new(&g, text.buf, (size_t)text.len, vocab, &gp, &err);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return wrap((PyTypeObject *)cls, g, vocab_obj);
}

static int schema_params(sift_json_schema_params *sp, const char *whitespace, int max_ws,
                         int strict, const char *unsupported, const char *name)
{
    sift_json_schema_params_init(sp);
    sp->source_name = name;
    sp->strict = strict;
    if (max_ws >= 0)
        sp->max_whitespace = max_ws;
    if (!strcmp(whitespace, "compact"))
        sp->whitespace = SIFT_JSON_WS_COMPACT;
    else if (!strcmp(whitespace, "flexible"))
        sp->whitespace = SIFT_JSON_WS_FLEXIBLE;
    else {
        siftpy_raise_msg(SIFT_E_ARG, -1, "whitespace must be 'flexible' or 'compact', not '%s'",
                         whitespace);
        return -1;
    }
    if (!strcmp(unsupported, "error"))
        sp->unsupported = SIFT_JSON_UNSUPPORTED_ERROR;
    else if (!strcmp(unsupported, "ignore"))
        sp->unsupported = SIFT_JSON_UNSUPPORTED_IGNORE;
    else {
        siftpy_raise_msg(SIFT_E_ARG, -1, "unsupported must be 'error' or 'ignore', not '%s'",
                         unsupported);
        return -1;
    }
    return 0;
}

static PyObject *grammar_from_json_schema(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"schema", "vocab",       "whitespace", "max_whitespace",
                             "strict", "unsupported", "name",       "max_rollback_tokens",
                             NULL};
    Py_buffer text;
    PyObject *vocab_obj = NULL;
    const char *ws = "flexible", *unsup = "error", *name = NULL;
    int max_ws = -1, strict = 0, max_rb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|O$sipszi:from_json_schema", kwlist, &text,
                                     &vocab_obj, &ws, &max_ws, &strict, &unsup, &name, &max_rb))
        return NULL;
    const sift_vocab *vocab;
    sift_json_schema_params sp;
    if (get_vocab(vocab_obj, &vocab) < 0 ||
        schema_params(&sp, ws, max_ws, strict, unsup, name) < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    sift_grammar_params gp;
    sift_grammar_params_init(&gp);
    gp.max_rollback_tokens = max_rb;
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_from_json_schema(&g, text.buf, (size_t)text.len, vocab, &sp, &gp, &err);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return wrap((PyTypeObject *)cls, g, vocab_obj);
}

static PyObject *json_schema_to_gbnf(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"schema", "whitespace", "max_whitespace", "strict", "unsupported",
                             "name",   NULL};
    Py_buffer text;
    const char *ws = "flexible", *unsup = "error", *name = NULL;
    int max_ws = -1, strict = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|$sipsz:json_schema_to_gbnf", kwlist, &text, &ws,
                                     &max_ws, &strict, &unsup, &name))
        return NULL;
    sift_json_schema_params sp;
    if (schema_params(&sp, ws, max_ws, strict, unsup, name) < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    char *out = NULL;
    size_t len = 0;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_json_schema_to_gbnf(&out, &len, text.buf, (size_t)text.len, &sp, &err);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    PyObject *res = PyUnicode_DecodeUTF8(out, (Py_ssize_t)len, "strict");
    sift_json_schema_free_gbnf(out, &sp);
    return res;
}

/* A list of str/bytes as pointers and lengths borrowed from `keep`. */
static int byte_strings(PyObject *seq, PyObject **keep, const char ***ptrs, size_t **lens,
                        size_t *n)
{
    *keep = NULL;
    *ptrs = NULL;
    *lens = NULL;
    *n = 0;
    if (!seq || seq == Py_None)
        return 0;
    *keep = PySequence_Fast(seq, "expected a sequence of str or bytes");
    if (!*keep)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(*keep);
    *ptrs = PyMem_Calloc((size_t)(m ? m : 1), sizeof **ptrs);
    *lens = PyMem_Calloc((size_t)(m ? m : 1), sizeof **lens);
    if (!*ptrs || !*lens) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(*keep, i);
        char *b;
        Py_ssize_t l;
        if (PyUnicode_Check(o)) {
            b = (char *)PyUnicode_AsUTF8AndSize(o, &l);
            if (!b)
                return -1;
        } else if (PyBytes_AsStringAndSize(o, &b, &l) < 0) {
            return -1;
        }
        (*ptrs)[i] = b;
        (*lens)[i] = (size_t)l;
    }
    *n = (size_t)m;
    return 0;
}

/* The keywords every grammar source shares: the vocabulary and the
 * rollback history (sift_grammar_params.max_rollback_tokens). */
static int vocab_and_params(PyObject *vocab_obj, int max_rb, const sift_vocab **vocab,
                            sift_grammar_params *gp)
{
    if (get_vocab(vocab_obj, vocab) < 0)
        return -1;
    sift_grammar_params_init(gp);
    gp->max_rollback_tokens = max_rb;
    return 0;
}

static PyObject *grammar_from_regex(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"regex", "vocab", "max_rollback_tokens", NULL};
    Py_buffer text;
    PyObject *vocab_obj = NULL;
    int max_rb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|O$i:from_regex", kwlist, &text, &vocab_obj,
                                     &max_rb))
        return NULL;
    const sift_vocab *vocab;
    sift_grammar_params gp;
    if (vocab_and_params(vocab_obj, max_rb, &vocab, &gp) < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_from_regex(&g, text.buf, (size_t)text.len, vocab, &gp, &err);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return wrap((PyTypeObject *)cls, g, vocab_obj);
}

static PyObject *grammar_from_choices(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"choices", "vocab", "max_rollback_tokens", NULL};
    PyObject *seq, *vocab_obj = NULL;
    int max_rb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$i:from_choices", kwlist, &seq, &vocab_obj,
                                     &max_rb))
        return NULL;
    if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "choices must be a sequence of str or bytes, not one");
        return NULL;
    }
    const sift_vocab *vocab;
    sift_grammar_params gp;
    if (vocab_and_params(vocab_obj, max_rb, &vocab, &gp) < 0)
        return NULL;
    PyObject *keep = NULL, *res = NULL;
    const char **ptrs = NULL;
    size_t *lens = NULL, n = 0;
    if (byte_strings(seq, &keep, &ptrs, &lens, &n) < 0)
        goto done;
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st;
    /* `keep` holds the strings; no other thread can change a tuple/list's
     * str and bytes items (immutable) while the GIL is released. */
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_from_choices(&g, ptrs, lens, n, vocab, &gp, &err);
    Py_END_ALLOW_THREADS;
    if (st != SIFT_OK)
        siftpy_raise(st, &err);
    else
        res = wrap((PyTypeObject *)cls, g, vocab_obj);
done:
    Py_XDECREF(keep);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    return res;
}

/* A str or None as a NUL-terminated UTF-8 pointer owned by the str. */
static int opt_utf8(PyObject *o, const char **out, const char *what, Py_ssize_t i)
{
    *out = NULL;
    if (o == Py_None)
        return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "tags[%zd]: %s must be a str or None, not %.100s", i, what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t len;
    *out = PyUnicode_AsUTF8AndSize(o, &len);
    if (!*out)
        return -1;
    if ((size_t)len != strlen(*out)) {
        siftpy_raise_msg(SIFT_E_ARG, i, "tags[%zd].%s: contains a NUL character", i, what);
        return -1;
    }
    return 0;
}

static PyObject *grammar_from_structural_tags(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"tags",
                             "triggers",
                             "vocab",
                             "whitespace",
                             "max_whitespace",
                             "strict",
                             "unsupported",
                             "max_rollback_tokens",
                             NULL};
    PyObject *tags_obj, *trig_obj, *vocab_obj = NULL;
    const char *ws = "flexible", *unsup = "error";
    int max_ws = -1, strict = 0, max_rb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O$sipsi:from_structural_tags", kwlist, &tags_obj,
                                     &trig_obj, &vocab_obj, &ws, &max_ws, &strict, &unsup, &max_rb))
        return NULL;
    const sift_vocab *vocab;
    sift_grammar_params gp;
    sift_json_schema_params sp;
    if (vocab_and_params(vocab_obj, max_rb, &vocab, &gp) < 0 ||
        schema_params(&sp, ws, max_ws, strict, unsup, NULL) < 0)
        return NULL;
    PyObject *tags = NULL, *trigs = NULL, *res = NULL;
    sift_structural_tag *ct = NULL;
    const char **cg = NULL;
    tags = PySequence_Fast(tags_obj, "tags must be a sequence of (begin, schema, grammar, end)");
    if (!tags)
        goto done;
    trigs = PySequence_Fast(trig_obj, "triggers must be a sequence of str");
    if (!trigs)
        goto done;
    Py_ssize_t nt = PySequence_Fast_GET_SIZE(tags), ng = PySequence_Fast_GET_SIZE(trigs);
    ct = PyMem_Calloc((size_t)(nt ? nt : 1), sizeof *ct);
    cg = PyMem_Calloc((size_t)(ng ? ng : 1), sizeof *cg);
    if (!ct || !cg) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(tags, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
            PyErr_Format(PyExc_TypeError,
                         "tags[%zd] must be a tuple (begin, schema, grammar, end); "
                         "sift.Grammar.from_structural_tags also takes dicts",
                         i);
            goto done;
        }
        if (opt_utf8(PyTuple_GET_ITEM(t, 0), &ct[i].begin, "begin", i) < 0 ||
            opt_utf8(PyTuple_GET_ITEM(t, 1), &ct[i].schema, "schema", i) < 0 ||
            opt_utf8(PyTuple_GET_ITEM(t, 2), &ct[i].grammar, "grammar", i) < 0 ||
            opt_utf8(PyTuple_GET_ITEM(t, 3), &ct[i].end, "end", i) < 0)
            goto done;
    }
    for (Py_ssize_t i = 0; i < ng; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(trigs, i);
        if (!PyUnicode_Check(t)) {
            PyErr_Format(PyExc_TypeError, "triggers[%zd] must be a str, not %.100s", i,
                         Py_TYPE(t)->tp_name);
            goto done;
        }
        Py_ssize_t len;
        if (!(cg[i] = PyUnicode_AsUTF8AndSize(t, &len)))
            goto done;
        if ((size_t)len != strlen(cg[i])) {
            siftpy_raise_msg(SIFT_E_ARG, i, "triggers[%zd]: contains a NUL character", i);
            goto done;
        }
    }
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_from_structural_tags(&g, ct, (size_t)nt, cg, (size_t)ng, vocab, &sp, &gp,
                                           &err);
    Py_END_ALLOW_THREADS;
    if (st != SIFT_OK)
        siftpy_raise(st, &err);
    else
        res = wrap((PyTypeObject *)cls, g, vocab_obj);
done:
    Py_XDECREF(tags);
    Py_XDECREF(trigs);
    PyMem_Free(ct);
    PyMem_Free(cg);
    return res;
}

static PyObject *grammar_rollback(SiftPyGrammar *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "rollback(num_tokens=1)");
        return NULL;
    }
    long long n = 1;
    if (nargs == 1) {
        n = PyLong_AsLongLong(args[0]);
        if (n == -1 && PyErr_Occurred())
            return NULL;
    }
    if (n < 0)
        return siftpy_raise_msg(SIFT_E_ARG, -1, "num_tokens %lld is negative", n);
    GRAMMAR_ACQUIRE(self);
    sift_error err;
    sift_status st = sift_grammar_rollback(self->grammar, (size_t)n, &err);
    GRAMMAR_RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *grammar_is_terminated(SiftPyGrammar *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sift_grammar_is_terminated(self->grammar));
}

static PyObject *grammar_rollback_depth(SiftPyGrammar *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(sift_grammar_rollback_depth(self->grammar));
}

static PyObject *grammar_validate_tokens(SiftPyGrammar *self, PyObject *arg)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (siftpy_int32_list(arg, &ids, &n, "ids") < 0)
        return NULL;
    if (self->busy) {
        PyMem_Free(ids);
        return siftpy_busy("this grammar");
    }
    self->busy = 1;
    size_t ok = 0;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_validate_tokens(self->grammar, ids, n, &ok, &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    PyMem_Free(ids);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyLong_FromSize_t(ok);
}

static PyObject *grammar_fill_draft(SiftPyGrammar *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"bitmask", "ids", "start_index", NULL};
    PyObject *mask, *ids_obj;
    Py_ssize_t start = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|n:fill_next_token_bitmasks_draft", kwlist, &mask,
                                     &ids_obj, &start))
        return NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (siftpy_int32_list(ids_obj, &ids, &n, "ids") < 0)
        return NULL;
    siftpy_view mv;
    if (siftpy_view_get(&mv, mask, SIFTPY_I32 | SIFTPY_U32, 2, 1, "bitmask") < 0) {
        PyMem_Free(ids);
        return NULL;
    }
    PyObject *res = NULL;
    Py_ssize_t rows = mv.shape[0], w = mv.shape[1];
    if (start < 0 || start > rows || (size_t)(rows - start) < n + 1) {
        siftpy_raise_msg(SIFT_E_ARG, start,
                         "rows %zd..%zd (start_index and a draft of %zu tokens) are outside the "
                         "bitmask's %zd rows",
                         start, start + (Py_ssize_t)n, n, rows);
        goto done;
    }
    if (self->busy) {
        siftpy_busy("this grammar");
        goto done;
    }
    self->busy = 1;
    size_t ok = 0;
    sift_error err;
    sift_status st;
    uint32_t *base = (uint32_t *)mv.data + start * w;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_fill_bitmask_draft(self->grammar, ids, n, base, (size_t)w, &ok, &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    if (st != SIFT_OK)
        siftpy_raise(st, &err);
    else
        res = PyLong_FromSize_t(ok);
done:
    siftpy_view_release(&mv);
    PyMem_Free(ids);
    return res;
}

/* The forced bytes and, with ids_cap > 0, the tokens that spell them. */
static int forced(SiftPyGrammar *self, char *buf, size_t *nb, int32_t *ids, size_t ids_cap,
                  size_t *nids)
{
    if (self->busy) {
        siftpy_busy("this grammar");
        return -1;
    }
    self->busy = 1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_forced_bytes(self->grammar, buf, SIFT_GRAMMAR_MAX_FORCED_BYTES, nb,
                                   ids_cap ? ids : NULL, ids_cap, ids_cap ? nids : NULL, &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    if (st != SIFT_OK) {
        siftpy_raise(st, &err);
        return -1;
    }
    return 0;
}

/* Length of the longest prefix of s[0..n) made of whole UTF-8
 * characters: the forced bytes may start inside a character (the text so
 * far ended inside one) or end inside one; those bytes are not text. The
 * grammar only forces valid UTF-8, so checking each lead byte's count of
 * continuation bytes is enough. */
static size_t utf8_whole_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (len == 0 || i + len > n)
            break;
        for (size_t k = 1; k < len; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80)
                return i;
        i += len;
    }
    return i;
}

static PyObject *grammar_jump_forward_string(SiftPyGrammar *self, PyObject *unused)
{
    (void)unused;
    char buf[SIFT_GRAMMAR_MAX_FORCED_BYTES];
    size_t nb = 0;
    if (forced(self, buf, &nb, NULL, 0, NULL) < 0)
        return NULL;
    return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)utf8_whole_prefix(buf, nb), "replace");
}

static PyObject *grammar_jump_forward_bytes(SiftPyGrammar *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"max_tokens", NULL};
    Py_ssize_t max_tokens = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|n:find_jump_forward_bytes", kwlist, &max_tokens))
        return NULL;
    if (max_tokens < 0)
        return siftpy_raise_msg(SIFT_E_ARG, -1, "max_tokens %zd is negative", max_tokens);
    if (max_tokens > SIFT_GRAMMAR_MAX_FORCED_BYTES)
        max_tokens = SIFT_GRAMMAR_MAX_FORCED_BYTES; /* a token spells at least one byte */
    char buf[SIFT_GRAMMAR_MAX_FORCED_BYTES];
    int32_t ids[SIFT_GRAMMAR_MAX_FORCED_BYTES];
    size_t nb = 0, nids = 0;
    if (forced(self, buf, &nb, ids, (size_t)max_tokens, &nids) < 0)
        return NULL;
    PyObject *list = PyList_New((Py_ssize_t)nids);
    if (!list)
        return NULL;
    for (size_t i = 0; i < nids; i++) {
        PyObject *x = PyLong_FromLong(ids[i]);
        if (!x) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, x);
    }
    return Py_BuildValue("(y#N)", buf, (Py_ssize_t)nb, list);
}

static PyObject *grammar_set_lazy(SiftPyGrammar *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"words", "patterns", "full_patterns", "tokens", NULL};
    PyObject *w = NULL, *p = NULL, *f = NULL, *t = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:set_lazy", kwlist, &w, &p, &f, &t))
        return NULL;
    PyObject *kw_ = NULL, *kp = NULL, *kf = NULL, *res = NULL;
    const char **pw = NULL, **pp = NULL, **pf = NULL;
    size_t *lw = NULL, *lp = NULL, *lf = NULL, nw = 0, np_ = 0, nf = 0, nt = 0;
    int32_t *toks = NULL;
    if (byte_strings(w, &kw_, &pw, &lw, &nw) < 0 || byte_strings(p, &kp, &pp, &lp, &np_) < 0 ||
        byte_strings(f, &kf, &pf, &lf, &nf) < 0 || siftpy_int32_list(t, &toks, &nt, "tokens") < 0)
        goto done;
    if (self->busy) {
        siftpy_busy("this grammar");
        goto done;
    }
    sift_lazy_params lp_;
    sift_lazy_params_init(&lp_);
    lp_.words = pw;
    lp_.word_lens = lw;
    lp_.n_words = nw;
    lp_.patterns = pp;
    lp_.pattern_lens = lp;
    lp_.n_patterns = np_;
    lp_.full_patterns = pf;
    lp_.full_pattern_lens = lf;
    lp_.n_full_patterns = nf;
    lp_.tokens = toks;
    lp_.n_tokens = nt;
    sift_error err;
    sift_status st = sift_grammar_set_lazy(self->grammar, &lp_, &err);
    if (st != SIFT_OK)
        siftpy_raise(st, &err);
    else
        res = Py_NewRef(Py_None);
done:
    Py_XDECREF(kw_);
    Py_XDECREF(kp);
    Py_XDECREF(kf);
    PyMem_Free(pw);
    PyMem_Free(pp);
    PyMem_Free(pf);
    PyMem_Free(lw);
    PyMem_Free(lp);
    PyMem_Free(lf);
    PyMem_Free(toks);
    return res;
}

static int token_arg(PyObject *arg, int32_t *tok)
{
    long long x = PyLong_AsLongLong(arg);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x < INT32_MIN || x > INT32_MAX) {
        siftpy_raise_msg(SIFT_E_TOKEN, x, "token %lld is not a token id", x);
        return -1;
    }
    *tok = (int32_t)x;
    return 0;
}

static PyObject *grammar_accept_token(SiftPyGrammar *self, PyObject *arg)
{
    int32_t tok;
    if (token_arg(arg, &tok) < 0)
        return NULL;
    GRAMMAR_ACQUIRE(self);
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_accept_token(self->grammar, tok, &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    if (st == SIFT_E_GRAMMAR_REJECT)
        Py_RETURN_FALSE;
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_TRUE;
}

static PyObject *grammar_accepts_token(SiftPyGrammar *self, PyObject *arg)
{
    int32_t tok;
    if (token_arg(arg, &tok) < 0)
        return NULL;
    GRAMMAR_ACQUIRE(self);
    sift_error err;
    int ok = 0;
    sift_status st = sift_grammar_accepts_token(self->grammar, tok, &ok, &err);
    GRAMMAR_RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyBool_FromLong(ok);
}

static PyObject *grammar_accept_string(SiftPyGrammar *self, PyObject *arg)
{
    Py_buffer b;
    const char *s;
    Py_ssize_t n;
    int have_buf = 0;
    if (PyUnicode_Check(arg)) {
        s = PyUnicode_AsUTF8AndSize(arg, &n);
        if (!s)
            return NULL;
    } else {
        if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
            return NULL;
        have_buf = 1;
        s = b.buf;
        n = b.len;
    }
    if (self->busy) {
        if (have_buf)
            PyBuffer_Release(&b);
        return siftpy_busy("this grammar");
    }
    self->busy = 1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_accept_bytes(self->grammar, s, (size_t)n, &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    if (have_buf)
        PyBuffer_Release(&b);
    if (st == SIFT_E_GRAMMAR_REJECT)
        Py_RETURN_FALSE;
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_TRUE;
}

static PyObject *grammar_is_completed(SiftPyGrammar *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sift_grammar_is_complete(self->grammar));
}

static PyObject *grammar_is_triggered(SiftPyGrammar *self, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(sift_grammar_is_triggered(self->grammar));
}

static PyObject *grammar_reset(SiftPyGrammar *self, PyObject *unused)
{
    (void)unused;
    GRAMMAR_ACQUIRE(self);
    sift_grammar_reset(self->grammar);
    GRAMMAR_RELEASE(self);
    Py_RETURN_NONE;
}

static PyObject *grammar_copy(SiftPyGrammar *self, PyObject *unused)
{
    (void)unused;
    GRAMMAR_ACQUIRE(self);
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st = sift_grammar_clone(self->grammar, &g, &err);
    GRAMMAR_RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return wrap(Py_TYPE(self), g, self->vocab);
}

/* One mask row for `g`: the row of a [batch, W] or [W] int32 array. */
static int mask_row(siftpy_view *mv, PyObject *mask, Py_ssize_t index, int32_t n_vocab,
                    uint32_t **row, size_t *words)
{
    if (siftpy_view_get(mv, mask, SIFTPY_I32 | SIFTPY_U32, -1, 1, "bitmask") < 0)
        return -1;
    Py_ssize_t rows = mv->ndim == 2 ? mv->shape[0] : 1;
    Py_ssize_t w = mv->ndim == 2 ? mv->shape[1] : mv->shape[0];
    if (index < 0 || index >= rows) {
        siftpy_view_release(mv);
        siftpy_raise_msg(SIFT_E_ARG, index, "index %zd is outside the bitmask's %zd rows", index,
                         rows);
        return -1;
    }
    Py_ssize_t need = ((Py_ssize_t)n_vocab + 31) / 32;
    if (w < need) {
        siftpy_view_release(mv);
        siftpy_raise_msg(SIFT_E_ARG, -1,
                         "bitmask rows have %zd words; a vocabulary of %d tokens needs %zd "
                         "(ceil(V/32))",
                         w, (int)n_vocab, need);
        return -1;
    }
    *row = (uint32_t *)mv->data + index * w;
    *words = (size_t)w;
    return 0;
}

static PyObject *grammar_fill(SiftPyGrammar *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "fill_next_token_bitmask(bitmask, index=0)");
        return NULL;
    }
    Py_ssize_t index = 0;
    if (nargs == 2) {
        index = PyLong_AsSsize_t(args[1]);
        if (index == -1 && PyErr_Occurred())
            return NULL;
    }
    siftpy_view mv;
    uint32_t *row;
    size_t words;
    if (mask_row(&mv, args[0], index, self->n_vocab, &row, &words) < 0)
        return NULL;
    if (self->busy) {
        siftpy_view_release(&mv);
        return siftpy_busy("this grammar");
    }
    self->busy = 1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_fill_bitmask(self->grammar, row, words, &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    siftpy_view_release(&mv);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    /* need_apply: an untriggered lazy grammar allows every token. */
    return PyBool_FromLong(sift_grammar_is_triggered(self->grammar));
}

static PyObject *grammar_ban(SiftPyGrammar *self, PyObject *arg)
{
    siftpy_view v;
    if (siftpy_view_get(&v, arg, SIFTPY_F32, 1, 1, "logits") < 0)
        return NULL;
    if (v.shape[0] > INT32_MAX) {
        siftpy_view_release(&v);
        return siftpy_raise_msg(SIFT_E_LIMIT, -1, "row too long");
    }
    if (self->busy) {
        siftpy_view_release(&v);
        return siftpy_busy("this grammar");
    }
    self->busy = 1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_grammar_ban(self->grammar, v.data, (int32_t)v.shape[0], &err);
    Py_END_ALLOW_THREADS;
    GRAMMAR_RELEASE(self);
    siftpy_view_release(&v);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *grammar_vocab_size(SiftPyGrammar *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->n_vocab);
}

static PyObject *grammar_vocab(SiftPyGrammar *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->vocab);
}

/* sift.fill_next_token_bitmasks(grammars, bitmask): one C call for the
 * whole batch, the GIL released; grammar i fills row i, None = all ones. */
static PyObject *fill_bitmasks(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"grammars", "bitmask", "indices", NULL};
    PyObject *seq, *mask, *indices = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:fill_next_token_bitmasks", kwlist, &seq, &mask,
                                     &indices))
        return NULL;
    int32_t *rows = NULL;
    size_t n_rows = 0;
    if (indices != Py_None && siftpy_int32_list(indices, &rows, &n_rows, "indices") < 0)
        return NULL;
    PyObject *fast = PySequence_Fast(seq, "grammars must be a sequence");
    if (!fast) {
        PyMem_Free(rows);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    sift_grammar **gs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *gs);
    SiftPyGrammar **objs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *objs);
    PyObject *res = NULL;
    siftpy_view mv;
    int have_view = 0;
    Py_ssize_t acquired = 0;
    if (!gs || !objs) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t maxv = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        if (o == Py_None)
            continue;
        if (!PyObject_TypeCheck(o, &SiftPyGrammar_Type)) {
            PyErr_Format(PyExc_TypeError, "grammars[%zd] must be a sift.Grammar or None", i);
            goto done;
        }
        objs[i] = (SiftPyGrammar *)o;
        gs[i] = objs[i]->grammar;
        if (objs[i]->n_vocab > maxv)
            maxv = objs[i]->n_vocab;
    }
    if (siftpy_view_get(&mv, mask, SIFTPY_I32 | SIFTPY_U32, 2, 1, "bitmask") < 0)
        goto done;
    have_view = 1;
    if (rows && n_rows != (size_t)n) {
        siftpy_raise_msg(SIFT_E_ARG, -1, "%zu indices for %zd grammars", n_rows, n);
        goto done;
    }
    if (!rows && mv.shape[0] < n) {
        siftpy_raise_msg(SIFT_E_ARG, -1, "bitmask has %zd rows for %zd grammars", mv.shape[0], n);
        goto done;
    }
    for (; acquired < n; acquired++) {
        if (objs[acquired] && objs[acquired]->busy) {
            /* The same grammar in two rows is fine (C fills them in turn);
             * busy for another reason is not. */
            int mine = 0;
            for (Py_ssize_t j = 0; j < acquired && !mine; j++)
                mine = objs[j] == objs[acquired];
            if (!mine) {
                siftpy_busy("a grammar of the batch");
                goto done;
            }
            objs[acquired] = NULL; /* released through its first row */
            continue;
        }
        if (objs[acquired])
            objs[acquired]->busy = 1;
    }
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    if (rows)
        st = sift_grammars_fill_bitmask_rows(gs, (size_t)n, rows, mv.data, (size_t)mv.shape[0],
                                             (size_t)mv.shape[1], &err);
    else
        st = sift_grammars_fill_bitmasks(gs, (size_t)n, mv.data, (size_t)mv.shape[1], &err);
    Py_END_ALLOW_THREADS;
    if (st != SIFT_OK)
        siftpy_raise(st, &err);
    else
        res = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < acquired; i++)
        if (objs[i])
            objs[i]->busy = 0;
    if (have_view)
        siftpy_view_release(&mv);
    PyMem_Free(gs);
    PyMem_Free(objs);
    PyMem_Free(rows);
    Py_DECREF(fast);
    return res;
}

static PyMethodDef grammar_methods[] = {
    {"from_gbnf", (PyCFunction)(void (*)(void))grammar_from_gbnf,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_gbnf(text, vocab=None, *, root=None, name=None) -> Grammar\n\n"
     "Compiles GBNF (str or bytes) over a Vocab (sift_grammar_new); the GIL is\n"
     "released. Errors name 'name:line:col'."},
    {"from_json_schema", (PyCFunction)(void (*)(void))grammar_from_json_schema,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_json_schema(schema, vocab=None, *, whitespace='flexible', max_whitespace=20,\n"
     "                 strict=False, unsupported='error', name=None) -> Grammar\n\n"
     "Compiles a JSON Schema given as JSON text (sift_grammar_from_json_schema);\n"
     "sift.Grammar.from_json_schema also takes a dict."},
    {"from_regex", (PyCFunction)(void (*)(void))grammar_from_regex,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_regex(regex, vocab=None, *, max_rollback_tokens=0) -> Grammar\n\n"
     "A grammar of the texts the regex matches as a whole (sift_grammar_from_regex);\n"
     "the GIL is released. Errors name 'regex:COL'."},
    {"from_choices", (PyCFunction)(void (*)(void))grammar_from_choices,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_choices(choices, vocab=None, *, max_rollback_tokens=0) -> Grammar\n\n"
     "A grammar of exactly the given strings (str or bytes; sift_grammar_from_choices)."},
    {"from_structural_tags", (PyCFunction)(void (*)(void))grammar_from_structural_tags,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_structural_tags(tags, triggers, vocab=None, *, whitespace='flexible', ...,\n"
     "                     max_rollback_tokens=0) -> Grammar\n\n"
     "A lazy grammar of tool calls (sift_grammar_from_structural_tags); here each tag\n"
     "is a tuple (begin, schema, grammar, end); sift.Grammar also takes dicts."},
    {"rollback", (PyCFunction)(void (*)(void))grammar_rollback, METH_FASTCALL,
     "rollback(num_tokens=1)\n\nTakes back the last num_tokens accepts (sift_grammar_rollback);\n"
     "SiftError(SIFT_E_STATE) beyond rollback_depth, with nothing changed."},
    {"is_terminated", (PyCFunction)grammar_is_terminated, METH_NOARGS,
     "is_terminated() -> bool\n\nAn end-of-generation token was accepted; nothing more is\n"
     "accepted until a rollback or reset."},
    {"validate_tokens", (PyCFunction)grammar_validate_tokens, METH_O,
     "validate_tokens(ids) -> int\n\nThe length of the longest prefix of the draft the grammar\n"
     "accepts from here; no change (sift_grammar_validate_tokens). The GIL is released."},
    {"fill_next_token_bitmasks_draft", (PyCFunction)(void (*)(void))grammar_fill_draft,
     METH_VARARGS | METH_KEYWORDS,
     "fill_next_token_bitmasks_draft(bitmask, ids, start_index=0) -> int\n\n"
     "Rows start_index .. start_index + len(ids) of an int32 [batch, W] bitmask get\n"
     "the allowed sets after 0, 1, ..., len(ids) draft tokens (zero rows after a\n"
     "rejected one); returns the accepted prefix's length. No change to the\n"
     "grammar (sift_grammar_fill_bitmask_draft). The GIL is released."},
    {"find_jump_forward_string", (PyCFunction)grammar_jump_forward_string, METH_NOARGS,
     "find_jump_forward_string() -> str\n\nThe text every continuation starts with\n"
     "(sift_grammar_forced_bytes): the forced bytes up to the first one that does not\n"
     "complete a whole UTF-8 character ('' when the text so far ends inside one)."},
    {"find_jump_forward_bytes", (PyCFunction)(void (*)(void))grammar_jump_forward_bytes,
     METH_VARARGS | METH_KEYWORDS,
     "find_jump_forward_bytes(max_tokens=0) -> (bytes, list[int])\n\n"
     "The forced bytes, and up to max_tokens ids spelling a prefix of them (the\n"
     "longest ordinary token at each byte; sift_grammar_forced_bytes)."},
    {"set_lazy", (PyCFunction)(void (*)(void))grammar_set_lazy, METH_VARARGS | METH_KEYWORDS,
     "set_lazy(*, words=(), patterns=(), full_patterns=(), tokens=())\n\n"
     "Makes the grammar lazy: it constrains nothing until a trigger fires\n"
     "(sift_grammar_set_lazy); resets it."},
    {"accept_token", (PyCFunction)grammar_accept_token, METH_O,
     "accept_token(token) -> bool\n\nAdvances by a token; False (state unchanged) when "
     "the grammar rejects it."},
    {"accepts_token", (PyCFunction)grammar_accepts_token, METH_O,
     "accepts_token(token) -> bool\n\nWhether the token would be accepted now; no change."},
    {"accept_string", (PyCFunction)grammar_accept_string, METH_O,
     "accept_string(text) -> bool\n\nFeeds text (str as UTF-8, or bytes); False "
     "(state unchanged) when rejected."},
    {"is_completed", (PyCFunction)grammar_is_completed, METH_NOARGS,
     "is_completed() -> bool\n\nThe text so far is a complete sentence (an EOG token "
     "would be accepted)."},
    {"is_triggered", (PyCFunction)grammar_is_triggered, METH_NOARGS,
     "is_triggered() -> bool\n\nFalse for a lazy grammar no trigger has fired yet."},
    {"reset", (PyCFunction)grammar_reset, METH_NOARGS, "reset()\n\nBack to the initial state."},
    {"copy", (PyCFunction)grammar_copy, METH_NOARGS,
     "copy() -> Grammar\n\nAn independent copy in the current state (the compiled form "
     "is shared)."},
    {"fill_next_token_bitmask", (PyCFunction)(void (*)(void))grammar_fill, METH_FASTCALL,
     "fill_next_token_bitmask(bitmask, index=0) -> bool\n\n"
     "Writes the allowed set into row `index` of an int32 [batch, ceil(V/32)]\n"
     "bitmask (numpy or CPU torch; bit t%32 of word t/32 = token t allowed;\n"
     "bits past V are 0). Returns xgrammar's need_apply: False when every\n"
     "token is allowed (an untriggered lazy grammar). The GIL is released."},
    {"ban", (PyCFunction)grammar_ban, METH_O,
     "ban(logits)\n\nSets -inf on every rejected token of a float32 [V] row, in place."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef grammar_getset[] = {
    {"vocab_size", (getter)grammar_vocab_size, NULL, "V, the vocabulary's size (0 without one).",
     NULL},
    {"vocab", (getter)grammar_vocab, NULL, "The Vocab the grammar was built over, or None.", NULL},
    {"rollback_depth", (getter)grammar_rollback_depth, NULL,
     "How many accepts rollback can take back now (sift_grammar_rollback_depth).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject SiftPyGrammar_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sift._sift.Grammar",
    .tp_basicsize = sizeof(SiftPyGrammar),
    .tp_dealloc = (destructor)grammar_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A compiled grammar with its matching state (sift_grammar): one request.",
    .tp_methods = grammar_methods,
    .tp_getset = grammar_getset,
};

static PyMethodDef module_methods[] = {
    {"json_schema_to_gbnf", (PyCFunction)(void (*)(void))json_schema_to_gbnf,
     METH_VARARGS | METH_KEYWORDS,
     "json_schema_to_gbnf(schema, *, whitespace='flexible', ...) -> str\n\nThe GBNF of a "
     "JSON Schema (sift_json_schema_to_gbnf)."},
    {"fill_next_token_bitmasks", (PyCFunction)(void (*)(void))fill_bitmasks,
     METH_VARARGS | METH_KEYWORDS,
     "fill_next_token_bitmasks(grammars, bitmask, indices=None)\n\nRow i of an int32 [>= n, W] "
     "bitmask gets grammars[i]'s allowed set (None = every token), in one call with the GIL "
     "released; with indices, row indices[i] does and no other row is written "
     "(sift_grammars_fill_bitmask_rows)."},
    {NULL, NULL, 0, NULL}};

int siftpy_grammar_init(PyObject *module)
{
    if (PyType_Ready(&SiftPyGrammar_Type) < 0)
        return -1;
    Py_INCREF(&SiftPyGrammar_Type);
    if (PyModule_AddObject(module, "Grammar", (PyObject *)&SiftPyGrammar_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, module_methods);
}
