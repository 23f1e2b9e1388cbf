/*
 * chain.c - sift.Chain: a sampler chain (sift_chain), built from YAML or
 * stage by stage, sampling rows and top-k slices.
 *
 * Invariants:
 * - Rows and slices are read in place (buffers.c); a slice's ids and
 *   logits are interleaved into the chain's own candidate buffer, which
 *   grows to the largest slice seen, so a step allocates nothing.
 * - Every call that runs sift code for more than a few microseconds
 *   (sample, sample_slice, distribution, verify) releases the GIL and
 *   marks the chain busy; a second thread, or the row hook calling back
 *   into its own chain, gets SiftError(SIFT_E_STATE), never a race.
 * - A failed call changes nothing, as in C. accept_prompt with several
 *   tokens feeds a clone and keeps it only when every token went in.
 * - The row hook is a Python callable () -> row; its row is copied into
 *   sift's buffer (the hook path already copies a whole row off the
 *   device), so no Python object ever points into sift's memory.
 */
#include "sift_py.h"

#include <stdlib.h>
#include <string.h>

struct SiftPyChain {
    PyObject_HEAD sift_chain *chain;
    int busy;
    PyObject *hook;     /* callable () -> row, or NULL */
    PyObject *hook_exc; /* the exception the hook raised in the current call */
    sift_candidate *cand;
    size_t cand_cap;
    uint8_t *mark; /* one bit per token id, all clear between calls */
    size_t mark_bits;
    PyObject *weakrefs;
    PyObject *config; /* dict of the config it was built from, or NULL */
};

static PyTypeObject *plan_type;
static PyTypeObject *stage_type;

sift_chain *siftpy_chain_ptr(PyObject *obj)
{
    return ((SiftPyChain *)obj)->chain;
}

int siftpy_chain_acquire(PyObject *obj)
{
    SiftPyChain *c = (SiftPyChain *)obj;
    if (c->busy) {
        siftpy_busy("this chain");
        return -1;
    }
    c->busy = 1;
    return 0;
}

void siftpy_chain_release(PyObject *obj)
{
    ((SiftPyChain *)obj)->busy = 0;
}

#define ACQUIRE(self)                                     \
    do {                                                  \
        if (siftpy_chain_acquire((PyObject *)(self)) < 0) \
            return NULL;                                  \
    } while (0)
#define RELEASE(self) ((self)->busy = 0)

static int chain_traverse(SiftPyChain *self, visitproc visit, void *arg)
{
    Py_VISIT(self->hook);
    Py_VISIT(self->hook_exc);
    Py_VISIT(self->config);
    return 0;
}

static int chain_clear(SiftPyChain *self)
{
    Py_CLEAR(self->hook);
    Py_CLEAR(self->hook_exc);
    Py_CLEAR(self->config);
    return 0;
}

static void chain_dealloc(SiftPyChain *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    chain_clear(self);
    sift_chain_free(self->chain);
    PyMem_Free(self->cand);
    PyMem_Free(self->mark);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static SiftPyChain *wrap(PyTypeObject *type, sift_chain *ch)
{
    SiftPyChain *self = (SiftPyChain *)type->tp_alloc(type, 0);
    if (!self) {
        sift_chain_free(ch);
        return NULL;
    }
    self->chain = ch;
    return self;
}

static PyObject *chain_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"seed", "n_vocab", "max_vocab", "max_history", "max_stages", NULL};
    unsigned long long seed = 0;
    int n_vocab = 0, max_vocab = 0, max_history = 0, max_stages = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|K$iiii:Chain", kwlist, &seed, &n_vocab, &max_vocab,
                                     &max_history, &max_stages))
        return NULL;
    sift_chain_params p;
    sift_chain_params_init(&p);
    p.seed = seed;
    p.n_vocab = n_vocab;
    if (max_vocab)
        p.max_vocab = max_vocab;
    if (max_history)
        p.max_history = max_history;
    if (max_stages)
        p.max_stages = max_stages;
    sift_chain *ch = NULL;
    sift_error err;
    sift_status st = sift_chain_new(&ch, &p, &err);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return (PyObject *)wrap(type, ch);
}

/* ---------------------------------------------------------------- YAML */

/* Raises the config's first error; the message is the diagnostic's
 * "FILE:LINE:COL: error: MESSAGE" text, every other diagnostic follows on
 * its own line. */
static PyObject *config_error(sift_status st, const sift_error *err, const sift_config *cfg)
{
    siftpy_raise(st, err);
    if (!cfg || sift_config_n_errors(cfg) == 0)
        return NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *diags = PyList_New(0);
    for (size_t i = 0; diags && i < sift_config_n_diagnostics(cfg); i++) {
        PyObject *s = PyUnicode_DecodeUTF8(sift_config_diagnostic(cfg, i)->text,
                                           (Py_ssize_t)strlen(sift_config_diagnostic(cfg, i)->text),
                                           "replace");
        if (!s || PyList_Append(diags, s) < 0) {
            Py_XDECREF(s);
            Py_CLEAR(diags);
        } else {
            Py_DECREF(s);
        }
    }
    if (diags && value) {
        PyObject_SetAttrString(value, "diagnostics", diags);
        PyObject *nl = PyUnicode_FromString("\n");
        PyObject *joined = nl ? PyUnicode_Join(nl, diags) : NULL;
        if (joined) {
            PyObject *t = PyTuple_Pack(1, joined);
            if (t) {
                PyObject_SetAttrString(value, "args", t);
                Py_DECREF(t);
            }
        }
        Py_XDECREF(joined);
        Py_XDECREF(nl);
    }
    Py_XDECREF(diags);
    PyErr_Restore(type, value, tb);
    return NULL;
}

/* What a config says besides its chain: {"form": "document" | "llama.cpp"
 * | "openai", "logprobs": None or {"top_n", "post_sampling"},
 * "description": sift_config_describe's text}. */
static PyObject *config_dict(const sift_config *cfg)
{
    int32_t f = sift_config_form_of(cfg);
    const char *form = f == SIFT_CONFIG_FORM_OPENAI      ? "openai"
                       : f == SIFT_CONFIG_FORM_LLAMA_CPP ? "llama.cpp"
                                                         : "document";
    sift_config_logprobs lp = {.struct_size = sizeof lp};
    PyObject *lpo = NULL;
    if (sift_config_get_logprobs(cfg, &lp) == 1)
        lpo = Py_BuildValue("{s:i,s:O}", "top_n", (int)lp.top_n, "post_sampling",
                            lp.post_sampling ? Py_True : Py_False);
    else
        lpo = Py_NewRef(Py_None);
    size_t n = sift_config_describe(cfg, NULL, 0);
    char *text = PyMem_Malloc(n + 1);
    PyObject *d = NULL;
    if (lpo && text) {
        sift_config_describe(cfg, text, n + 1);
        d = Py_BuildValue("{s:s,s:O,s:s#}", "form", form, "logprobs", lpo, "description", text,
                          (Py_ssize_t)n);
    } else if (!text) {
        PyErr_NoMemory();
    }
    PyMem_Free(text);
    Py_XDECREF(lpo);
    return d;
}

static PyObject *from_config(PyTypeObject *type, sift_config *cfg, PyObject *vocab_obj,
                             PyObject *seed_obj)
{
    sift_error err;
    sift_vocab *own = NULL;
    const sift_vocab *vocab = NULL;
    sift_status st;
    if (vocab_obj && vocab_obj != Py_None) {
        if (!PyObject_TypeCheck(vocab_obj, &SiftPyVocab_Type)) {
            sift_config_free(cfg);
            PyErr_SetString(PyExc_TypeError, "vocab must be a sift.Vocab");
            return NULL;
        }
        vocab = ((SiftPyVocab *)vocab_obj)->vocab;
    } else {
        Py_BEGIN_ALLOW_THREADS;
        st = sift_config_load_vocab(cfg, NULL, &own, &err);
        Py_END_ALLOW_THREADS;
        if (st != SIFT_OK) {
            sift_config_free(cfg);
            return siftpy_raise(st, &err);
        }
        vocab = own;
    }
    sift_chain_params p;
    sift_chain_params_init(&p);
    int have_seed = 0;
    if (seed_obj && seed_obj != Py_None) {
        p.seed = PyLong_AsUnsignedLongLong(seed_obj);
        if (PyErr_Occurred()) {
            sift_vocab_free(own);
            sift_config_free(cfg);
            return NULL;
        }
        have_seed = 1;
    }
    sift_chain *ch = NULL;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_config_build_chain(cfg, &p, vocab, &ch, &err);
    Py_END_ALLOW_THREADS;
    sift_vocab_free(own);
    PyObject *info = st == SIFT_OK ? config_dict(cfg) : NULL;
    sift_config_free(cfg);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    (void)have_seed;
    if (!info) {
        sift_chain_free(ch);
        return NULL;
    }
    SiftPyChain *self = wrap(type, ch);
    if (self)
        self->config = info;
    else
        Py_DECREF(info);
    return (PyObject *)self;
}

/* form=None | "document" | "llama.cpp" | "openai" -> sift_config_form; -1
 * with ValueError. */
static int parse_form(const char *form)
{
    if (!form || !strcmp(form, "document"))
        return SIFT_CONFIG_FORM_DOCUMENT;
    if (!strcmp(form, "openai"))
        return SIFT_CONFIG_FORM_OPENAI;
    if (!strcmp(form, "llama.cpp") || !strcmp(form, "llama_cpp"))
        return SIFT_CONFIG_FORM_LLAMA_CPP;
    PyErr_Format(PyExc_ValueError, "form = '%s': expected 'document', 'llama.cpp' or 'openai'",
                 form);
    return -1;
}

static PyObject *chain_from_yaml(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"text", "vocab", "name", "base_dir", "form", NULL};
    Py_buffer text;
    PyObject *vocab = NULL;
    const char *name = NULL, *base_dir = NULL, *form = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|O$zzz:from_yaml", kwlist, &text, &vocab, &name,
                                     &base_dir, &form))
        return NULL;
    int f = parse_form(form);
    if (f < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    sift_config_params cp;
    sift_config_params_init(&cp);
    cp.base_dir = base_dir;
    cp.form = f;
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_config_parse(&cfg, name, text.buf, (size_t)text.len, &cp, &err);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (st != SIFT_OK) {
        config_error(st, &err, cfg);
        sift_config_free(cfg);
        return NULL;
    }
    return from_config((PyTypeObject *)cls, cfg, vocab, NULL);
}

static PyObject *chain_from_yaml_file(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "vocab", "form", NULL};
    PyObject *path = NULL, *vocab = NULL;
    const char *form = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O$z:from_yaml_file", kwlist,
                                     PyUnicode_FSConverter, &path, &vocab, &form))
        return NULL;
    int f = parse_form(form);
    if (f < 0) {
        Py_DECREF(path);
        return NULL;
    }
    sift_config_params cp;
    sift_config_params_init(&cp);
    cp.form = f;
    sift_config *cfg = NULL;
    sift_error err;
    sift_status st;
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS;
    st = sift_config_load(&cfg, p, &cp, &err);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    if (st != SIFT_OK) {
        config_error(st, &err, cfg);
        sift_config_free(cfg);
        return NULL;
    }
    return from_config((PyTypeObject *)cls, cfg, vocab, NULL);
}

/* ---------------------------------------------------------------- stages */

static PyObject *added(SiftPyChain *self, sift_status st, const sift_error *err)
{
    RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, err);
    return Py_NewRef((PyObject *)self);
}

#define STAGE0(fname, call)                                             \
    static PyObject *chain_##fname(SiftPyChain *self, PyObject *unused) \
    {                                                                   \
        (void)unused;                                                   \
        ACQUIRE(self);                                                  \
        sift_error err;                                                 \
        return added(self, call(self->chain, &err), &err);              \
    }
STAGE0(add_greedy, sift_chain_add_greedy)
STAGE0(add_dist, sift_chain_add_dist)
STAGE0(add_dist_id_order, sift_chain_add_dist_id_order)

#define STAGE_I(fname, call, pyname)                                  \
    static PyObject *chain_##fname(SiftPyChain *self, PyObject *args) \
    {                                                                 \
        int k;                                                        \
        if (!PyArg_ParseTuple(args, "i:" pyname, &k))                 \
            return NULL;                                              \
        ACQUIRE(self);                                                \
        sift_error err;                                               \
        return added(self, call(self->chain, k, &err), &err);         \
    }
STAGE_I(add_top_k, sift_chain_add_top_k, "add_top_k")
STAGE_I(add_top_k_ties, sift_chain_add_top_k_ties, "add_top_k_ties")

#define STAGE_F(fname, call, pyname)                                  \
    static PyObject *chain_##fname(SiftPyChain *self, PyObject *args) \
    {                                                                 \
        float x;                                                      \
        if (!PyArg_ParseTuple(args, "f:" pyname, &x))                 \
            return NULL;                                              \
        ACQUIRE(self);                                                \
        sift_error err;                                               \
        return added(self, call(self->chain, x, &err), &err);         \
    }
STAGE_F(add_temp, sift_chain_add_temp, "add_temp")
STAGE_F(add_top_n_sigma, sift_chain_add_top_n_sigma, "add_top_n_sigma")

#define STAGE_FK(fname, call, pyname)                                                     \
    static PyObject *chain_##fname(SiftPyChain *self, PyObject *args, PyObject *kw)       \
    {                                                                                     \
        static char *kwlist[] = {"p", "min_keep", NULL};                                  \
        float x;                                                                          \
        int min_keep = 0;                                                                 \
        if (!PyArg_ParseTupleAndKeywords(args, kw, "f|i:" pyname, kwlist, &x, &min_keep)) \
            return NULL;                                                                  \
        ACQUIRE(self);                                                                    \
        sift_error err;                                                                   \
        return added(self, call(self->chain, x, min_keep, &err), &err);                   \
    }
STAGE_FK(add_top_p, sift_chain_add_top_p, "add_top_p")
STAGE_FK(add_min_p, sift_chain_add_min_p, "add_min_p")
STAGE_FK(add_typical, sift_chain_add_typical, "add_typical")
STAGE_FK(add_epsilon, sift_chain_add_epsilon, "add_epsilon")
STAGE_FK(add_eta, sift_chain_add_eta, "add_eta")

static PyObject *chain_add_temp_ext(SiftPyChain *self, PyObject *args)
{
    float t, d, e;
    if (!PyArg_ParseTuple(args, "fff:add_temp_ext", &t, &d, &e))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_temp_ext(self->chain, t, d, e, &err), &err);
}

static PyObject *chain_add_xtc(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"probability", "threshold", "min_keep", NULL};
    float p, t;
    int min_keep = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ff|i:add_xtc", kwlist, &p, &t, &min_keep))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_xtc(self->chain, p, t, min_keep, &err), &err);
}

static PyObject *chain_add_mirostat(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"n_vocab", "tau", "eta", "m", NULL};
    int n, m = 100;
    float tau, eta;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iff|i:add_mirostat", kwlist, &n, &tau, &eta, &m))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_mirostat(self->chain, n, tau, eta, m, &err), &err);
}

static PyObject *chain_add_mirostat_v2(SiftPyChain *self, PyObject *args)
{
    float tau, eta;
    if (!PyArg_ParseTuple(args, "ff:add_mirostat_v2", &tau, &eta))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_mirostat_v2(self->chain, tau, eta, &err), &err);
}

static PyObject *chain_add_adaptive_p(SiftPyChain *self, PyObject *args)
{
    float target, decay;
    if (!PyArg_ParseTuple(args, "ff:add_adaptive_p", &target, &decay))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_adaptive_p(self->chain, target, decay, &err), &err);
}

static PyObject *chain_add_penalties(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"last_n", "repeat", "frequency", "presence", NULL};
    int last_n;
    float r = 1.0f, f = 0.0f, p = 0.0f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|fff:add_penalties", kwlist, &last_n, &r, &f, &p))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_penalties(self->chain, last_n, r, f, p, &err), &err);
}

static const sift_vocab *opt_vocab(PyObject *o, int *bad)
{
    *bad = 0;
    if (!o || o == Py_None)
        return NULL;
    if (!PyObject_TypeCheck(o, &SiftPyVocab_Type)) {
        PyErr_SetString(PyExc_TypeError, "vocab must be a sift.Vocab");
        *bad = 1;
        return NULL;
    }
    return ((SiftPyVocab *)o)->vocab;
}

static PyObject *chain_add_dry(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"multiplier", "base", "allowed_length", "last_n", "breakers",
                             "vocab",      NULL};
    sift_dry_params dp;
    sift_dry_params_init(&dp);
    PyObject *breakers = NULL, *vocab_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "f|fiiOO:add_dry", kwlist, &dp.multiplier, &dp.base,
                                     &dp.allowed_length, &dp.last_n, &breakers, &vocab_obj))
        return NULL;
    int bad;
    const sift_vocab *vocab = opt_vocab(vocab_obj, &bad);
    if (bad)
        return NULL;
    PyObject *fast = NULL;
    const char **ptrs = NULL;
    size_t *lens = NULL;
    PyObject *res = NULL;
    if (breakers && breakers != Py_None) {
        fast = PySequence_Fast(breakers, "breakers must be a sequence of str or bytes");
        if (!fast)
            return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
        ptrs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *ptrs);
        lens = PyMem_Calloc((size_t)(n ? n : 1), sizeof *lens);
        if (!ptrs || !lens) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
            char *b;
            Py_ssize_t l;
            if (PyUnicode_Check(o)) {
                if (!(b = (char *)PyUnicode_AsUTF8AndSize(o, &l)))
                    goto done;
            } else if (PyBytes_AsStringAndSize(o, &b, &l) < 0) {
                goto done;
            }
            ptrs[i] = b;
            lens[i] = (size_t)l;
        }
        dp.breakers = ptrs;
        dp.breaker_lengths = lens;
        dp.n_breakers = (size_t)n;
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0)
        goto done;
    sift_error err;
    res = added(self, sift_chain_add_dry(self->chain, &dp, vocab, &err), &err);
done:
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    Py_XDECREF(fast);
    return res;
}

static PyObject *chain_add_logit_bias(SiftPyChain *self, PyObject *arg)
{
    /* A dict {token: bias} or a sequence of (token, bias) pairs. */
    PyObject *items = PyDict_Check(arg) ? PyDict_Items(arg) : PySequence_List(arg);
    if (!items)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    sift_bias *b = PyMem_Calloc((size_t)(n ? n : 1), sizeof *b);
    PyObject *res = NULL;
    if (!b) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Tuple(PyList_GET_ITEM(items, i));
        long long tok;
        double bias;
        int ok = it && PyArg_ParseTuple(it, "Ld", &tok, &bias);
        Py_XDECREF(it);
        if (!ok)
            goto done;
        if (tok < INT32_MIN || tok > INT32_MAX) {
            siftpy_raise_msg(SIFT_E_ARG, i, "logit_bias[%zd]: token %lld is not a token id", i,
                             tok);
            goto done;
        }
        b[i].token = (int32_t)tok;
        b[i].bias = (float)bias;
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0)
        goto done;
    sift_error err;
    res = added(self, sift_chain_add_logit_bias(self->chain, b, (size_t)n, &err), &err);
done:
    PyMem_Free(b);
    Py_DECREF(items);
    return res;
}

static PyObject *chain_add_min_tokens(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"min_tokens", "ids", "vocab", NULL};
    int min_tokens;
    PyObject *ids_obj = NULL, *vocab_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|OO:add_min_tokens", kwlist, &min_tokens, &ids_obj,
                                     &vocab_obj))
        return NULL;
    int bad;
    const sift_vocab *vocab = opt_vocab(vocab_obj, &bad);
    if (bad)
        return NULL;
    int32_t *ids;
    size_t n;
    if (siftpy_int32_list(ids_obj, &ids, &n, "ids") < 0)
        return NULL;
    PyObject *res = NULL;
    if (siftpy_chain_acquire((PyObject *)self) == 0) {
        sift_error err;
        res = added(self, sift_chain_add_min_tokens(self->chain, min_tokens, ids, n, vocab, &err),
                    &err);
    }
    PyMem_Free(ids);
    return res;
}

static PyObject *chain_add_allowed_tokens(SiftPyChain *self, PyObject *arg)
{
    int32_t *ids;
    size_t n;
    if (siftpy_int32_list(arg, &ids, &n, "ids") < 0)
        return NULL;
    PyObject *res = NULL;
    if (siftpy_chain_acquire((PyObject *)self) == 0) {
        sift_error err;
        res = added(self, sift_chain_add_allowed_tokens(self->chain, ids, n, &err), &err);
    }
    PyMem_Free(ids);
    return res;
}

static PyObject *chain_add_no_repeat_ngram(SiftPyChain *self, PyObject *args)
{
    int n, last_n;
    if (!PyArg_ParseTuple(args, "ii:add_no_repeat_ngram", &n, &last_n))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    return added(self, sift_chain_add_no_repeat_ngram(self->chain, n, last_n, &err), &err);
}

static PyObject *chain_add_bad_words(SiftPyChain *self, PyObject *arg)
{
    PyObject *fast = PySequence_Fast(arg, "bad words must be a sequence of id sequences");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int32_t **seqs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *seqs);
    size_t *lens = PyMem_Calloc((size_t)(n ? n : 1), sizeof *lens);
    PyObject *res = NULL;
    Py_ssize_t got = 0;
    if (!seqs || !lens) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++)
        if (siftpy_int32_list(PySequence_Fast_GET_ITEM(fast, got), &seqs[got], &lens[got],
                              "bad word") < 0)
            goto done;
    if (siftpy_chain_acquire((PyObject *)self) < 0)
        goto done;
    sift_error err;
    res = added(
        self,
        sift_chain_add_bad_words(self->chain, (const int32_t *const *)seqs, lens, (size_t)n, &err),
        &err);
done:
    for (Py_ssize_t i = 0; seqs && i < got; i++)
        PyMem_Free(seqs[i]);
    PyMem_Free(seqs);
    PyMem_Free(lens);
    Py_DECREF(fast);
    return res;
}

/* The chain takes a clone: the Python grammar stays the caller's. */
static PyObject *grammar_stage(SiftPyChain *self, PyObject *arg, int check)
{
    sift_grammar *g = NULL;
    sift_error err;
    sift_status st;
    if (arg != Py_None || !check) {
        if (!PyObject_TypeCheck(arg, &SiftPyGrammar_Type)) {
            PyErr_SetString(PyExc_TypeError, "expected a sift.Grammar");
            return NULL;
        }
        SiftPyGrammar *gr = (SiftPyGrammar *)arg;
        if (gr->busy)
            return siftpy_busy("this grammar");
        st = sift_grammar_clone(gr->grammar, &g, &err);
        if (st != SIFT_OK)
            return siftpy_raise(st, &err);
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0) {
        sift_grammar_free(g);
        return NULL;
    }
    st = check ? sift_chain_set_check_grammar(self->chain, g, &err)
               : sift_chain_add_grammar(self->chain, g, &err);
    if (st != SIFT_OK)
        sift_grammar_free(g);
    return added(self, st, &err);
}

static PyObject *chain_add_grammar(SiftPyChain *self, PyObject *arg)
{
    return grammar_stage(self, arg, 0);
}

static PyObject *chain_set_check_grammar(SiftPyChain *self, PyObject *arg)
{
    return grammar_stage(self, arg, 1);
}

/* ---------------------------------------------------------------- hook */

/* Raises SiftError for `st`; when the hook raised, that exception becomes
 * the SiftError's __cause__. */
static PyObject *raise_step(SiftPyChain *self, sift_status st, const sift_error *err)
{
    siftpy_raise(st, err);
    if (self->hook_exc) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value) {
            PyException_SetCause(value, self->hook_exc); /* steals */
            self->hook_exc = NULL;
        }
        PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(self->hook_exc);
    return NULL;
}

static int hook_copy(PyObject *res, float *row, int32_t n)
{
    siftpy_view v;
    if (siftpy_view_get(&v, res, SIFTPY_F32, 1, 0, "the row hook's row") < 0)
        return -1;
    if (v.shape[0] != n) {
        siftpy_view_release(&v);
        PyErr_Format(PyExc_ValueError, "the row hook returned %zd logits; the row has %d",
                     v.shape[0], (int)n);
        return -1;
    }
    memcpy(row, v.data, (size_t)n * sizeof(float));
    siftpy_view_release(&v);
    return 0;
}

static int row_hook(void *user, float *row, int32_t n)
{
    SiftPyChain *self = user;
    PyGILState_STATE gs = PyGILState_Ensure();
    int rc = 1;
    PyObject *res = PyObject_CallNoArgs(self->hook);
    if (res && hook_copy(res, row, n) == 0)
        rc = 0;
    Py_XDECREF(res);
    if (rc) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb && value)
            PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        Py_XSETREF(self->hook_exc, value);
    }
    PyGILState_Release(gs);
    return rc;
}

static int install_hook(SiftPyChain *self)
{
    sift_error err;
    sift_status st = sift_chain_set_row_hook(self->chain, self->hook ? row_hook : NULL,
                                             self->hook ? self : NULL, &err);
    if (st != SIFT_OK) {
        siftpy_raise(st, &err);
        return -1;
    }
    return 0;
}

static PyObject *chain_set_row_hook(SiftPyChain *self, PyObject *arg)
{
    if (arg != Py_None && !PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "the row hook must be a callable () -> row, or None");
        return NULL;
    }
    ACQUIRE(self);
    PyObject *old = self->hook;
    self->hook = arg == Py_None ? NULL : Py_NewRef(arg);
    if (install_hook(self) < 0) {
        Py_XDECREF(self->hook);
        self->hook = old;
        RELEASE(self);
        return NULL;
    }
    Py_XDECREF(old);
    RELEASE(self);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- rows */

static int row_view(siftpy_view *v, PyObject *obj)
{
    if (siftpy_view_get(v, obj, SIFTPY_F32, 1, 0, "logits") < 0)
        return -1;
    if (v->shape[0] > INT32_MAX) {
        siftpy_view_release(v);
        siftpy_raise_msg(SIFT_E_LIMIT, -1, "a row of %zd logits is longer than sift takes",
                         v->shape[0]);
        return -1;
    }
    return 0;
}

static PyObject *chain_sample(SiftPyChain *self, PyObject *arg)
{
    siftpy_view v;
    if (row_view(&v, arg) < 0)
        return NULL;
    if (siftpy_chain_acquire((PyObject *)self) < 0) {
        siftpy_view_release(&v);
        return NULL;
    }
    int32_t tok = -1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_sample(self->chain, v.data, (int32_t)v.shape[0], &tok, &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    siftpy_view_release(&v);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyLong_FromLong(tok);
}

static PyObject *chain_accept(SiftPyChain *self, PyObject *arg)
{
    long long x = PyLong_AsLongLong(arg);
    if (x == -1 && PyErr_Occurred())
        return NULL;
    if (x < INT32_MIN || x > INT32_MAX)
        return siftpy_raise_msg(SIFT_E_TOKEN, x, "token %lld is outside the vocabulary", x);
    ACQUIRE(self);
    sift_error err;
    sift_status st = sift_chain_accept(self->chain, (int32_t)x, &err);
    RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *chain_accept_prompt(SiftPyChain *self, PyObject *arg)
{
    sift_error err;
    sift_status st;
    if (PyLong_Check(arg) || (PyIndex_Check(arg) && !PySequence_Check(arg))) {
        /* an int, or a numpy integer scalar (not an array, which has __index__ too) */
        long long x = PyLong_AsLongLong(arg);
        if (x == -1 && PyErr_Occurred())
            return NULL;
        if (x < INT32_MIN || x > INT32_MAX)
            return siftpy_raise_msg(SIFT_E_TOKEN, x, "token %lld is outside the vocabulary", x);
        ACQUIRE(self);
        st = sift_chain_accept_prompt(self->chain, (int32_t)x, &err);
        RELEASE(self);
        if (st != SIFT_OK)
            return siftpy_raise(st, &err);
        Py_RETURN_NONE;
    }
    int32_t *ids;
    size_t n;
    siftpy_view v;
    int have_view = 0;
    if (PyObject_CheckBuffer(arg) || PyObject_HasAttrString(arg, "numpy")) {
        if (siftpy_view_get(&v, arg, SIFTPY_I32 | SIFTPY_I64, 1, 0, "tokens") < 0)
            return NULL;
        have_view = 1;
        n = (size_t)v.shape[0];
        ids = PyMem_Malloc((n ? n : 1) * sizeof *ids);
        if (!ids) {
            siftpy_view_release(&v);
            return PyErr_NoMemory();
        }
        for (size_t i = 0; i < n; i++) {
            int64_t x = v.kind == 'l' ? ((int64_t *)v.data)[i] : ((int32_t *)v.data)[i];
            ids[i] = x < INT32_MIN || x > INT32_MAX ? -1 : (int32_t)x;
        }
        siftpy_view_release(&v);
    } else if (siftpy_int32_list(arg, &ids, &n, "tokens") < 0) {
        return NULL;
    }
    (void)have_view;
    if (siftpy_chain_acquire((PyObject *)self) < 0) {
        PyMem_Free(ids);
        return NULL;
    }
    /* All or nothing: feed a clone, keep it only if every token went in. */
    sift_chain *work = self->chain;
    st = SIFT_OK;
    if (n > 1)
        st = sift_chain_clone(self->chain, &work, &err);
    size_t i = 0;
    for (; st == SIFT_OK && i < n; i++)
        st = sift_chain_accept_prompt(work, ids[i], &err);
    PyMem_Free(ids);
    if (st == SIFT_OK && work != self->chain) {
        sift_chain *old = self->chain;
        self->chain = work;
        if (install_hook(self) < 0) {
            self->chain = old;
            sift_chain_free(work);
            RELEASE(self);
            return NULL;
        }
        sift_chain_free(old);
    } else if (work != self->chain) {
        sift_chain_free(work);
    }
    RELEASE(self);
    if (st != SIFT_OK) {
        if (n > 1 && i > 0) {
            char msg[SIFT_ERROR_MESSAGE_MAX];
            snprintf(msg, sizeof msg, "tokens[%zu]: %.200s", i - 1, err.message);
            memcpy(err.message, msg, sizeof err.message);
            err.message[sizeof err.message - 1] = 0;
        }
        return siftpy_raise(st, &err);
    }
    Py_RETURN_NONE;
}

static PyObject *chain_reset(SiftPyChain *self, PyObject *unused)
{
    (void)unused;
    ACQUIRE(self);
    sift_chain_reset(self->chain);
    RELEASE(self);
    Py_RETURN_NONE;
}

static PyObject *chain_clone(SiftPyChain *self, PyObject *unused)
{
    (void)unused;
    ACQUIRE(self);
    sift_chain *c = NULL;
    sift_error err;
    sift_status st = sift_chain_clone(self->chain, &c, &err);
    RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return (PyObject *)wrap(Py_TYPE(self), c);
}

/* ---------------------------------------------------------------- slices */

static int grow_cand(sift_candidate **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    sift_candidate *b = PyMem_Realloc(*buf, c * sizeof *b);
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = b;
    *cap = c;
    return 0;
}

static int grow_mark(SiftPyChain *self, size_t bits)
{
    if (bits <= self->mark_bits)
        return 0;
    uint8_t *m = PyMem_Calloc((bits + 7) / 8, 1);
    if (!m) {
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(self->mark);
    self->mark = m;
    self->mark_bits = bits;
    return 0;
}

static inline int64_t id_at(const siftpy_view *v, Py_ssize_t i)
{
    return v->kind == 'l' ? ((const int64_t *)v->data)[i] : ((const int32_t *)v->data)[i];
}

/* Fills `dst` with (id, logit) pairs from an ids view and a logits view of
 * equal length; ids outside int32 become -1 (sift reports them). */
static int pairs(sift_candidate *dst, PyObject *ids_obj, PyObject *logits_obj, Py_ssize_t *n_out,
                 const char *ids_what, const char *logits_what)
{
    siftpy_view iv, lv;
    if (siftpy_view_get(&iv, ids_obj, SIFTPY_I32 | SIFTPY_I64, 1, 0, ids_what) < 0)
        return -1;
    if (siftpy_view_get(&lv, logits_obj, SIFTPY_F32, 1, 0, logits_what) < 0) {
        siftpy_view_release(&iv);
        return -1;
    }
    Py_ssize_t n = iv.shape[0];
    if (lv.shape[0] != n) {
        siftpy_view_release(&iv);
        siftpy_view_release(&lv);
        siftpy_raise_msg(SIFT_E_SLICE, -1, "%s has %zd entries but %s has %zd", ids_what, n,
                         logits_what, lv.shape[0]);
        return -1;
    }
    if (dst) {
        const float *l = lv.data;
        if (iv.kind == 'i') {
            const int32_t *id = iv.data;
            for (Py_ssize_t i = 0; i < n; i++) {
                dst[i].id = id[i];
                dst[i].logit = l[i];
            }
        } else {
            for (Py_ssize_t i = 0; i < n; i++) {
                int64_t x = id_at(&iv, i);
                dst[i].id = x < INT32_MIN || x > INT32_MAX ? -1 : (int32_t)x;
                dst[i].logit = l[i];
            }
        }
    }
    siftpy_view_release(&iv);
    siftpy_view_release(&lv);
    *n_out = n;
    return 0;
}

static Py_ssize_t view_len(PyObject *obj, const char *what)
{
    siftpy_view v;
    if (siftpy_view_get(&v, obj, SIFTPY_I32 | SIFTPY_I64 | SIFTPY_F32, 1, 0, what) < 0)
        return -1;
    Py_ssize_t n = v.shape[0];
    siftpy_view_release(&v);
    return n;
}

/*
 * Builds `out` from Python arguments into (*buf, *cap): the prefix pairs,
 * then the extras (a pair (ids, logits)) that are not in the prefix (a
 * device gathers the extras' logits without knowing the top-k, so the
 * binding drops the repeats, in O(k + extras) with the chain's bitmap).
 */
static int build_slice(SiftPyChain *self, sift_candidate **buf, size_t *cap, PyObject *ids,
                       PyObject *logits, long long n_vocab, PyObject *tail_mass, int canonical,
                       PyObject *extras, sift_slice *out)
{
    memset(out, 0, sizeof *out);
    if (n_vocab < 1 || n_vocab > INT32_MAX) {
        siftpy_raise_msg(SIFT_E_ARG, -1, "n_vocab %lld is outside [1, 2^31)", n_vocab);
        return -1;
    }
    Py_ssize_t k = view_len(ids, "ids");
    if (k < 0)
        return -1;
    PyObject *eids = NULL, *elog = NULL;
    Py_ssize_t ne = 0;
    if (extras && extras != Py_None) {
        if (!PyTuple_Check(extras) || PyTuple_GET_SIZE(extras) != 2) {
            PyErr_SetString(PyExc_TypeError, "extras must be a pair (ids, logits)");
            return -1;
        }
        eids = PyTuple_GET_ITEM(extras, 0);
        elog = PyTuple_GET_ITEM(extras, 1);
        if (PyList_Check(eids) || PyTuple_Check(eids) || PyList_Check(elog) ||
            PyTuple_Check(elog)) {
            /* chain.extras() gives a list: take lists as arrays here (the
             * extras are few; a prefix must still be an array). */
            PyObject *np = PyImport_ImportModule("numpy");
            if (!np)
                return -1;
            eids = PyObject_CallMethod(np, "asarray", "Os", eids, "int64");
            elog = eids ? PyObject_CallMethod(np, "asarray", "Os", elog, "float32") : NULL;
            Py_DECREF(np);
            if (!elog) {
                Py_XDECREF(eids);
                return -1;
            }
            PyObject *pair = PyTuple_Pack(2, eids, elog);
            Py_DECREF(eids);
            Py_DECREF(elog);
            if (!pair)
                return -1;
            int rc =
                build_slice(self, buf, cap, ids, logits, n_vocab, tail_mass, canonical, pair, out);
            Py_DECREF(pair);
            return rc;
        }
        if ((ne = view_len(eids, "extras ids")) < 0)
            return -1;
    }
    if (grow_cand(buf, cap, (size_t)(k + ne)) < 0)
        return -1;
    Py_ssize_t got;
    if (pairs(*buf, ids, logits, &got, "ids", "logits") < 0)
        return -1;
    Py_ssize_t n_extras = 0;
    if (ne > 0) {
        sift_candidate *e = *buf + k;
        if (pairs(e, eids, elog, &got, "extras ids", "extras logits") < 0)
            return -1;
        if (grow_mark(self, (size_t)n_vocab) < 0)
            return -1;
        uint8_t *m = self->mark;
        for (Py_ssize_t i = 0; i < k; i++) {
            int32_t id = (*buf)[i].id;
            if (id >= 0 && id < n_vocab)
                m[id >> 3] |= (uint8_t)(1u << (id & 7));
        }
        for (Py_ssize_t i = 0; i < ne; i++) {
            int32_t id = e[i].id;
            if (id >= 0 && id < n_vocab && (m[id >> 3] >> (id & 7) & 1))
                continue;
            e[n_extras++] = e[i];
        }
        for (Py_ssize_t i = 0; i < k; i++) {
            int32_t id = (*buf)[i].id;
            if (id >= 0 && id < n_vocab)
                m[id >> 3] = 0;
        }
    }
    if (k > INT32_MAX || n_extras > INT32_MAX) {
        siftpy_raise_msg(SIFT_E_SLICE, -1, "slice too large");
        return -1;
    }
    out->n_vocab = (int32_t)n_vocab;
    out->n_prefix = (int32_t)k;
    out->prefix = *buf;
    out->n_extras = (int32_t)n_extras;
    out->extras = *buf + k;
    out->flags = canonical ? SIFT_SLICE_CANONICAL : 0;
    if (tail_mass && tail_mass != Py_None) {
        double t = PyFloat_AsDouble(tail_mass);
        if (t == -1.0 && PyErr_Occurred())
            return -1;
        out->flags |= SIFT_SLICE_TAIL_MASS;
        out->tail_mass = t;
    }
    return 0;
}

/* A slice from an object with attributes ids, logits, n_vocab and
 * optional tail_mass, canonical, extras (sift.Slice). */
static int build_slice_obj(SiftPyChain *self, sift_candidate **buf, size_t *cap, PyObject *obj,
                           sift_slice *out)
{
    PyObject *ids = PyObject_GetAttrString(obj, "ids");
    PyObject *logits = ids ? PyObject_GetAttrString(obj, "logits") : NULL;
    PyObject *nv = logits ? PyObject_GetAttrString(obj, "n_vocab") : NULL;
    int rc = -1;
    if (!nv) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "a slice must have ids, logits and n_vocab (sift.Slice), not %.100s",
                         Py_TYPE(obj)->tp_name);
        }
        goto done;
    }
    PyObject *tm = PyObject_GetAttrString(obj, "tail_mass");
    PyObject *can = tm ? PyObject_GetAttrString(obj, "canonical") : NULL;
    PyObject *ex = can ? PyObject_GetAttrString(obj, "extras") : NULL;
    if (ex) {
        long long n_vocab = PyLong_AsLongLong(nv);
        int canonical = PyObject_IsTrue(can);
        if (!(n_vocab == -1 && PyErr_Occurred()) && canonical >= 0)
            rc = build_slice(self, buf, cap, ids, logits, n_vocab, tm, canonical, ex, out);
    } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Format(PyExc_TypeError, "a slice needs tail_mass, canonical and extras attributes");
    }
    Py_XDECREF(tm);
    Py_XDECREF(can);
    Py_XDECREF(ex);
done:
    Py_XDECREF(ids);
    Py_XDECREF(logits);
    Py_XDECREF(nv);
    return rc;
}

int siftpy_chain_build_slice(PyObject *chain, PyObject *obj, sift_slice *out)
{
    SiftPyChain *self = (SiftPyChain *)chain;
    return build_slice_obj(self, &self->cand, &self->cand_cap, obj, out);
}

int siftpy_chain_hook_installed(PyObject *chain)
{
    return ((SiftPyChain *)chain)->hook != NULL;
}

PyObject *siftpy_chain_step_error(PyObject *chain, sift_status st, const sift_error *err)
{
    return raise_step((SiftPyChain *)chain, st, err);
}

#define SLICE_KWLIST "ids", "logits", "n_vocab", "tail_mass", "canonical", "extras"

static PyObject *chain_sample_slice(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {SLICE_KWLIST, NULL};
    PyObject *ids, *logits, *tail_mass = NULL, *extras = NULL;
    long long n_vocab;
    int canonical = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOL|$OpO:sample_slice", kwlist, &ids, &logits,
                                     &n_vocab, &tail_mass, &canonical, &extras))
        return NULL;
    ACQUIRE(self);
    sift_slice s;
    if (build_slice(self, &self->cand, &self->cand_cap, ids, logits, n_vocab, tail_mass, canonical,
                    extras, &s) < 0) {
        RELEASE(self);
        return NULL;
    }
    int32_t tok = -1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_sample_slice(self->chain, &s, &tok, &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    if (st != SIFT_OK)
        return raise_step(self, st, &err);
    return PyLong_FromLong(tok);
}

/* ---------------------------------------------------------------- distributions */

static PyObject *probs_list(const sift_token_prob *p, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *t = Py_BuildValue("(idd)", p[i].id, (double)p[i].logit, p[i].p);
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

static PyObject *chain_distribution(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"logits", "n", NULL};
    PyObject *logits;
    Py_ssize_t cap = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n:distribution", kwlist, &logits, &cap))
        return NULL;
    siftpy_view v;
    if (row_view(&v, logits) < 0)
        return NULL;
    if (cap < 0)
        cap = v.shape[0];
    sift_token_prob *out = PyMem_Malloc((size_t)(cap ? cap : 1) * sizeof *out);
    if (!out) {
        siftpy_view_release(&v);
        return PyErr_NoMemory();
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0) {
        PyMem_Free(out);
        siftpy_view_release(&v);
        return NULL;
    }
    size_t n = 0;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_distribution(self->chain, v.data, (int32_t)v.shape[0], out, (size_t)cap, &n,
                                 &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    siftpy_view_release(&v);
    PyObject *res =
        st == SIFT_OK ? probs_list(out, n < (size_t)cap ? n : (size_t)cap) : siftpy_raise(st, &err);
    PyMem_Free(out);
    return res;
}

static PyObject *logprob_tuple(const sift_logprob *e)
{
    return Py_BuildValue("(iddd)", e->id, (double)e->logit, e->logprob, e->p);
}

static PyObject *logprob_list(const sift_logprob *e, size_t n)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *t = logprob_tuple(&e[i]);
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

/* (token, dict) of a logprobs call: "raw", "raw_top", "lse" with RAW,
 * "processed", "processed_top", "n_support" with PROCESSED. */
static PyObject *logprobs_result(int32_t tok, const sift_logprobs *lp)
{
    PyObject *d = PyDict_New();
    int bad = !d;
    if (!bad && (lp->flags & SIFT_LOGPROBS_RAW)) {
        PyObject *a = logprob_tuple(&lp->raw), *b = logprob_list(lp->raw_top, lp->n_raw_top);
        PyObject *c = PyFloat_FromDouble(lp->lse);
        bad = !a || !b || !c || PyDict_SetItemString(d, "raw", a) < 0 ||
              PyDict_SetItemString(d, "raw_top", b) < 0 || PyDict_SetItemString(d, "lse", c) < 0;
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
    }
    if (!bad && (lp->flags & SIFT_LOGPROBS_PROCESSED)) {
        PyObject *a = logprob_tuple(&lp->processed);
        PyObject *b = logprob_list(lp->processed_top, lp->n_processed_top);
        PyObject *c = PyLong_FromSize_t(lp->n_support);
        bad = !a || !b || !c || PyDict_SetItemString(d, "processed", a) < 0 ||
              PyDict_SetItemString(d, "processed_top", b) < 0 ||
              PyDict_SetItemString(d, "n_support", c) < 0;
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
    }
    PyObject *res = bad ? NULL : Py_BuildValue("(iO)", tok, d);
    Py_XDECREF(d);
    return res;
}

/* The request of a logprobs call, its arrays in one PyMem buffer (*buf,
 * freed by the caller); -1 with an exception set. */
static int logprobs_request(sift_logprobs *lp, sift_logprob **buf, Py_ssize_t n_top, int raw,
                            int processed)
{
    if (n_top < 0) {
        siftpy_raise_msg(SIFT_E_ARG, -1, "n = %zd must be >= 0", n_top);
        return -1;
    }
    *buf = PyMem_Malloc((size_t)(n_top ? 2 * n_top : 1) * sizeof **buf);
    if (!*buf) {
        PyErr_NoMemory();
        return -1;
    }
    *lp = (sift_logprobs){.struct_size = sizeof *lp, .n_top = (size_t)n_top};
    lp->flags = (raw ? SIFT_LOGPROBS_RAW : 0u) | (processed ? SIFT_LOGPROBS_PROCESSED : 0u);
    lp->raw_top = *buf;
    lp->processed_top = *buf + n_top;
    return 0;
}

/* sample_logprobs(logits, n=0, *, raw=True, processed=True) -> (token, dict) */
static PyObject *chain_sample_logprobs(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"logits", "n", "raw", "processed", NULL};
    PyObject *logits;
    Py_ssize_t n_top = 0;
    int raw = 1, processed = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n$pp:sample_logprobs", kwlist, &logits, &n_top,
                                     &raw, &processed))
        return NULL;
    sift_logprobs lp;
    sift_logprob *buf = NULL;
    if (logprobs_request(&lp, &buf, n_top, raw, processed) < 0)
        return NULL;
    siftpy_view v;
    if (row_view(&v, logits) < 0) {
        PyMem_Free(buf);
        return NULL;
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0) {
        PyMem_Free(buf);
        siftpy_view_release(&v);
        return NULL;
    }
    int32_t tok = -1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_sample_logprobs(self->chain, v.data, (int32_t)v.shape[0], &tok, &lp, &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    siftpy_view_release(&v);
    PyObject *res = st != SIFT_OK ? siftpy_raise(st, &err) : logprobs_result(tok, &lp);
    PyMem_Free(buf);
    return res;
}

/* sample_slice_logprobs(ids, logits, n_vocab, *, tail_mass, canonical, extras,
 * n=0, raw=True, processed=True, row_lse=None) -> (token, dict) */
static PyObject *chain_sample_slice_logprobs(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {SLICE_KWLIST, "n", "raw", "processed", "row_lse", NULL};
    PyObject *ids, *logits, *tail_mass = NULL, *extras = NULL, *row_lse = NULL;
    long long n_vocab;
    int canonical = 0, raw = 1, processed = 1;
    Py_ssize_t n_top = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOL|$OpOnppO:sample_slice_logprobs", kwlist, &ids,
                                     &logits, &n_vocab, &tail_mass, &canonical, &extras, &n_top,
                                     &raw, &processed, &row_lse))
        return NULL;
    double lse = 0.0;
    if (row_lse && row_lse != Py_None) {
        lse = PyFloat_AsDouble(row_lse);
        if (lse == -1.0 && PyErr_Occurred())
            return NULL;
    }
    sift_logprobs lp;
    sift_logprob *buf = NULL;
    if (logprobs_request(&lp, &buf, n_top, raw, processed) < 0)
        return NULL;
    if (row_lse && row_lse != Py_None) {
        lp.flags |= SIFT_LOGPROBS_ROW_LSE;
        lp.row_lse = lse;
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0) {
        PyMem_Free(buf);
        return NULL;
    }
    sift_slice s;
    if (build_slice(self, &self->cand, &self->cand_cap, ids, logits, n_vocab, tail_mass, canonical,
                    extras, &s) < 0) {
        RELEASE(self);
        PyMem_Free(buf);
        return NULL;
    }
    int32_t tok = -1;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_sample_slice_logprobs(self->chain, &s, &tok, &lp, &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    PyObject *res = st != SIFT_OK ? raise_step(self, st, &err) : logprobs_result(tok, &lp);
    PyMem_Free(buf);
    return res;
}

static PyObject *chain_set_workspace(SiftPyChain *self, PyObject *arg)
{
    sift_workspace *ws = NULL;
    if (arg != Py_None && !(ws = siftpy_workspace_ptr(arg)))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    sift_status st = sift_chain_set_workspace(self->chain, ws, &err);
    RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_NONE;
}

static PyObject *chain_distribution_slice(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {SLICE_KWLIST, "n", NULL};
    PyObject *ids, *logits, *tail_mass = NULL, *extras = NULL;
    long long n_vocab;
    int canonical = 0;
    Py_ssize_t cap = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOL|$OpOn:distribution_slice", kwlist, &ids,
                                     &logits, &n_vocab, &tail_mass, &canonical, &extras, &cap))
        return NULL;
    ACQUIRE(self);
    sift_slice s;
    if (build_slice(self, &self->cand, &self->cand_cap, ids, logits, n_vocab, tail_mass, canonical,
                    extras, &s) < 0) {
        RELEASE(self);
        return NULL;
    }
    if (cap < 0)
        cap = (Py_ssize_t)s.n_prefix + s.n_extras;
    sift_token_prob *out = PyMem_Malloc((size_t)(cap ? cap : 1) * sizeof *out);
    if (!out) {
        RELEASE(self);
        return PyErr_NoMemory();
    }
    size_t n = 0;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_distribution_slice(self->chain, &s, out, (size_t)cap, &n, &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    PyObject *res = st == SIFT_OK ? probs_list(out, n < (size_t)cap ? n : (size_t)cap)
                                  : raise_step(self, st, &err);
    PyMem_Free(out);
    return res;
}

/* ---------------------------------------------------------------- plans */

static PyObject *make_plan(const sift_plan *p, PyObject *stages)
{
    PyObject *o = PyStructSequence_New(plan_type);
    if (!o) {
        Py_XDECREF(stages);
        return NULL;
    }
    PyStructSequence_SET_ITEM(o, 0, PyLong_FromLong(p->k));
    PyStructSequence_SET_ITEM(o, 1, PyUnicode_FromString(sift_guarantee_str(p->guarantee)));
    PyStructSequence_SET_ITEM(o, 2,
                              PyUnicode_DecodeUTF8(p->why, (Py_ssize_t)strlen(p->why), "replace"));
    PyStructSequence_SET_ITEM(o, 3, PyLong_FromLong(p->recommended_k));
    PyStructSequence_SET_ITEM(o, 4, PyLong_FromLong(p->max_extras));
    PyStructSequence_SET_ITEM(o, 5, PyLong_FromLong(p->decided_at));
    PyStructSequence_SET_ITEM(o, 6, stages ? stages : PyTuple_New(0));
    PyStructSequence_SET_ITEM(o, 7, PyLong_FromLong(p->device_k));
    for (int i = 0; i < 8; i++)
        if (!PyStructSequence_GET_ITEM(o, i)) {
            Py_DECREF(o);
            return NULL;
        }
    return o;
}

static PyObject *chain_plan(SiftPyChain *self, PyObject *unused)
{
    (void)unused;
    size_t n = sift_chain_n_stages(self->chain);
    sift_plan_stage *ps = PyMem_Calloc(n ? n : 1, sizeof *ps);
    if (!ps)
        return PyErr_NoMemory();
    for (size_t i = 0; i < n; i++)
        ps[i].struct_size = sizeof *ps;
    sift_plan p = {.struct_size = sizeof p};
    sift_error err;
    sift_status st = sift_chain_plan(self->chain, &p, n ? ps : NULL, &err);
    if (st != SIFT_OK) {
        PyMem_Free(ps);
        return siftpy_raise(st, &err);
    }
    PyObject *stages = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; stages && i < n; i++) {
        PyObject *o = PyStructSequence_New(stage_type);
        if (!o) {
            Py_CLEAR(stages);
            break;
        }
        const char *name = sift_chain_stage_name(self->chain, i);
        PyStructSequence_SET_ITEM(o, 0, PyUnicode_FromString(name ? name : ""));
        PyStructSequence_SET_ITEM(o, 1, PyUnicode_FromString(sift_class_str(ps[i].cls)));
        PyStructSequence_SET_ITEM(o, 2, PyLong_FromLongLong(ps[i].n));
        PyStructSequence_SET_ITEM(o, 3, PyLong_FromLong(ps[i].k));
        PyStructSequence_SET_ITEM(
            o, 4, PyUnicode_DecodeUTF8(ps[i].why, (Py_ssize_t)strlen(ps[i].why), "replace"));
        PyTuple_SET_ITEM(stages, (Py_ssize_t)i, o);
        for (int j = 0; j < 5; j++)
            if (!PyStructSequence_GET_ITEM(o, j))
                Py_CLEAR(stages);
        if (!stages)
            break;
    }
    PyMem_Free(ps);
    if (!stages)
        return NULL;
    return make_plan(&p, stages);
}

static PyObject *chain_next_k(SiftPyChain *self, PyObject *unused)
{
    (void)unused;
    sift_plan p = {.struct_size = sizeof p};
    sift_error err;
    sift_status st = sift_chain_next_k(self->chain, &p, &err);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return make_plan(&p, NULL);
}

static PyObject *chain_extras(SiftPyChain *self, PyObject *unused)
{
    (void)unused;
    int32_t small[64];
    int32_t *ids = small;
    size_t cap = 64, n = 0;
    sift_error err;
    ACQUIRE(self);
    sift_status st = sift_chain_extras(self->chain, ids, cap, &n, &err);
    if (st == SIFT_E_LIMIT && n > cap) {
        ids = PyMem_Malloc(n * sizeof *ids);
        if (!ids) {
            RELEASE(self);
            return PyErr_NoMemory();
        }
        cap = n;
        st = sift_chain_extras(self->chain, ids, cap, &n, &err);
    }
    RELEASE(self);
    PyObject *l = NULL;
    if (st != SIFT_OK) {
        siftpy_raise(st, &err);
    } else if ((l = PyList_New((Py_ssize_t)n))) {
        for (size_t i = 0; i < n; i++) {
            PyObject *x = PyLong_FromLong(ids[i]);
            if (!x) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, (Py_ssize_t)i, x);
        }
    }
    if (ids != small)
        PyMem_Free(ids);
    return l;
}

static PyObject *chain_stats(SiftPyChain *self, PyObject *unused)
{
    (void)unused;
    sift_stats s = {.struct_size = sizeof s};
    sift_error err;
    sift_status st = sift_chain_stats(self->chain, &s, &err);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsK}", "slice_decided", (unsigned long long)s.slice_decided, "hook_calls",
        (unsigned long long)s.hook_calls, "need_row", (unsigned long long)s.need_row,
        "row_prefix_decided", (unsigned long long)s.row_prefix_decided, "row_prefix_fallback",
        (unsigned long long)s.row_prefix_fallback, "grammar_resamples",
        (unsigned long long)s.grammar_resamples, "cross_checks", (unsigned long long)s.cross_checks,
        "cross_check_mismatches", (unsigned long long)s.cross_check_mismatches,
        "cross_check_skipped", (unsigned long long)s.cross_check_skipped);
}

static PyObject *chain_stages(SiftPyChain *self, void *closure)
{
    (void)closure;
    size_t n = sift_chain_n_stages(self->chain);
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        const char *name = sift_chain_stage_name(self->chain, i);
        PyObject *s = PyUnicode_FromString(name ? name : "");
        if (!s) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    return t;
}

static PyObject *chain_set_cross_check(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"every_n", "probability", "seed", NULL};
    unsigned int every_n = 0;
    double prob = 0.0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|IdK:set_cross_check", kwlist, &every_n, &prob,
                                     &seed))
        return NULL;
    ACQUIRE(self);
    sift_error err;
    sift_status st = sift_chain_set_cross_check(self->chain, every_n, prob, seed, &err);
    RELEASE(self);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- verify */

static PyObject *chain_verify(SiftPyChain *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"drafts", "rows", "slices", "keep_last", NULL};
    PyObject *drafts_obj, *rows_obj = NULL, *slices_obj = NULL;
    int keep_last = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$Op:verify", kwlist, &drafts_obj, &rows_obj,
                                     &slices_obj, &keep_last))
        return NULL;
    if ((rows_obj && rows_obj != Py_None) == (slices_obj && slices_obj != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "verify takes rows or slices (exactly one)");
        return NULL;
    }
    int32_t *drafts;
    size_t nd;
    if (siftpy_int32_list(drafts_obj, &drafts, &nd, "drafts") < 0)
        return NULL;
    PyObject *res = NULL, *fast = NULL;
    siftpy_view rv;
    int have_rows = 0;
    const float **rows = NULL;
    sift_slice *slices = NULL;
    sift_candidate **bufs = NULL;
    size_t *caps = NULL;
    size_t np_ = nd + 1;
    sift_verify_args a;
    sift_verify_args_init(&a);
    a.drafts = drafts;
    a.n_drafts = (int32_t)nd;
    a.flags = keep_last ? SIFT_VERIFY_KEEP_LAST : 0;
    if (rows_obj && rows_obj != Py_None) {
        if (siftpy_view_get(&rv, rows_obj, SIFTPY_F32, 2, 0, "rows") < 0)
            goto done;
        have_rows = 1;
        if ((size_t)rv.shape[0] < np_) {
            siftpy_raise_msg(SIFT_E_ARG, -1, "rows has %zd rows; %zu drafts need %zu", rv.shape[0],
                             nd, np_);
            goto done;
        }
        rows = PyMem_Malloc(np_ * sizeof *rows);
        if (!rows) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t i = 0; i < np_; i++)
            rows[i] = (const float *)rv.data + i * (size_t)rv.shape[1];
        a.rows = rows;
        a.n_vocab = (int32_t)rv.shape[1];
    } else {
        fast = PySequence_Fast(slices_obj, "slices must be a sequence of sift.Slice");
        if (!fast)
            goto done;
        if ((size_t)PySequence_Fast_GET_SIZE(fast) < np_) {
            siftpy_raise_msg(SIFT_E_ARG, -1, "%zd slices; %zu drafts need %zu",
                             PySequence_Fast_GET_SIZE(fast), nd, np_);
            goto done;
        }
        slices = PyMem_Calloc(np_, sizeof *slices);
        bufs = PyMem_Calloc(np_, sizeof *bufs);
        caps = PyMem_Calloc(np_, sizeof *caps);
        if (!slices || !bufs || !caps) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t i = 0; i < np_; i++)
            if (build_slice_obj(self, &bufs[i], &caps[i], PySequence_Fast_GET_ITEM(fast, i),
                                &slices[i]) < 0)
                goto done;
        a.slices = slices;
    }
    if (siftpy_chain_acquire((PyObject *)self) < 0)
        goto done;
    sift_verify_result r = {.struct_size = sizeof r};
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chain_verify(self->chain, &a, &r, &err);
    Py_END_ALLOW_THREADS;
    RELEASE(self);
    if (st != SIFT_OK)
        raise_step(self, st, &err);
    else
        res = Py_BuildValue("(ii)", r.n_accepted, r.token);
done:
    if (have_rows)
        siftpy_view_release(&rv);
    for (size_t i = 0; bufs && i < np_; i++)
        PyMem_Free(bufs[i]);
    PyMem_Free(bufs);
    PyMem_Free(caps);
    PyMem_Free(slices);
    PyMem_Free(rows);
    PyMem_Free(drafts);
    Py_XDECREF(fast);
    return res;
}

/* ---------------------------------------------------------------- type */

static PyMethodDef chain_methods[] = {
    {"from_yaml", (PyCFunction)(void (*)(void))chain_from_yaml,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_yaml(text, vocab=None, *, name=None, base_dir=None) -> Chain\n\n"
     "A chain from a YAML config (docs/config.md). Errors are SiftError with\n"
     "'name:line:col: error: ...' (every diagnostic in .diagnostics). Without\n"
     "`vocab`, the config's own `vocab:` is loaded."},
    {"from_yaml_file", (PyCFunction)(void (*)(void))chain_from_yaml_file,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_yaml_file(path, vocab=None) -> Chain\n\nAs from_yaml, from a file."},
    {"add_greedy", (PyCFunction)chain_add_greedy, METH_NOARGS, "add_greedy() -> self"},
    {"add_dist", (PyCFunction)chain_add_dist, METH_NOARGS, "add_dist() -> self"},
    {"add_dist_id_order", (PyCFunction)chain_add_dist_id_order, METH_NOARGS,
     "add_dist_id_order() -> self"},
    {"add_top_k", (PyCFunction)chain_add_top_k, METH_VARARGS, "add_top_k(k) -> self"},
    {"add_top_k_ties", (PyCFunction)chain_add_top_k_ties, METH_VARARGS,
     "add_top_k_ties(k) -> self"},
    {"add_top_p", (PyCFunction)(void (*)(void))chain_add_top_p, METH_VARARGS | METH_KEYWORDS,
     "add_top_p(p, min_keep=0) -> self"},
    {"add_min_p", (PyCFunction)(void (*)(void))chain_add_min_p, METH_VARARGS | METH_KEYWORDS,
     "add_min_p(p, min_keep=0) -> self"},
    {"add_typical", (PyCFunction)(void (*)(void))chain_add_typical, METH_VARARGS | METH_KEYWORDS,
     "add_typical(p, min_keep=0) -> self"},
    {"add_epsilon", (PyCFunction)(void (*)(void))chain_add_epsilon, METH_VARARGS | METH_KEYWORDS,
     "add_epsilon(p, min_keep=0) -> self"},
    {"add_eta", (PyCFunction)(void (*)(void))chain_add_eta, METH_VARARGS | METH_KEYWORDS,
     "add_eta(p, min_keep=0) -> self"},
    {"add_temp", (PyCFunction)chain_add_temp, METH_VARARGS, "add_temp(temp) -> self"},
    {"add_temp_ext", (PyCFunction)chain_add_temp_ext, METH_VARARGS,
     "add_temp_ext(temp, delta, exponent) -> self"},
    {"add_xtc", (PyCFunction)(void (*)(void))chain_add_xtc, METH_VARARGS | METH_KEYWORDS,
     "add_xtc(probability, threshold, min_keep=0) -> self"},
    {"add_top_n_sigma", (PyCFunction)chain_add_top_n_sigma, METH_VARARGS,
     "add_top_n_sigma(n) -> self"},
    {"add_mirostat", (PyCFunction)(void (*)(void))chain_add_mirostat, METH_VARARGS | METH_KEYWORDS,
     "add_mirostat(n_vocab, tau, eta, m=100) -> self"},
    {"add_mirostat_v2", (PyCFunction)chain_add_mirostat_v2, METH_VARARGS,
     "add_mirostat_v2(tau, eta) -> self"},
    {"add_adaptive_p", (PyCFunction)chain_add_adaptive_p, METH_VARARGS,
     "add_adaptive_p(target, decay) -> self"},
    {"add_penalties", (PyCFunction)(void (*)(void))chain_add_penalties,
     METH_VARARGS | METH_KEYWORDS,
     "add_penalties(last_n, repeat=1.0, frequency=0.0, presence=0.0) -> self"},
    {"add_dry", (PyCFunction)(void (*)(void))chain_add_dry, METH_VARARGS | METH_KEYWORDS,
     "add_dry(multiplier, base=1.75, allowed_length=2, last_n=4096, breakers=(), vocab=None)"},
    {"add_logit_bias", (PyCFunction)chain_add_logit_bias, METH_O,
     "add_logit_bias({token: bias} or [(token, bias), ...]) -> self"},
    {"add_min_tokens", (PyCFunction)(void (*)(void))chain_add_min_tokens,
     METH_VARARGS | METH_KEYWORDS, "add_min_tokens(min_tokens, ids=(), vocab=None) -> self"},
    {"add_allowed_tokens", (PyCFunction)chain_add_allowed_tokens, METH_O,
     "add_allowed_tokens(ids) -> self"},
    {"add_no_repeat_ngram", (PyCFunction)chain_add_no_repeat_ngram, METH_VARARGS,
     "add_no_repeat_ngram(n, last_n) -> self"},
    {"add_bad_words", (PyCFunction)chain_add_bad_words, METH_O,
     "add_bad_words([[id, ...], ...]) -> self"},
    {"add_grammar", (PyCFunction)chain_add_grammar, METH_O,
     "add_grammar(grammar) -> self\n\nA constrain stage; the chain takes a copy of the "
     "grammar in its current state."},
    {"set_check_grammar", (PyCFunction)chain_set_check_grammar, METH_O,
     "set_check_grammar(grammar or None) -> self\n\nThe check-mode grammar (a copy)."},
    {"set_row_hook", (PyCFunction)chain_set_row_hook, METH_O,
     "set_row_hook(fn or None)\n\nfn() returns the whole row of the current step (float32\n"
     "[V]; it is copied). Called when a slice cannot decide a step; an exception\n"
     "in it becomes SiftError(SIFT_E_HOOK) with the exception as __cause__."},
    {"sample", (PyCFunction)chain_sample, METH_O,
     "sample(logits) -> int\n\nSamples from a whole row: a 1-D float32 numpy array or CPU\n"
     "torch tensor, read in place (sift_chain_sample). The GIL is released."},
    {"accept", (PyCFunction)chain_accept, METH_O, "accept(token)\n\nsift_chain_accept."},
    {"accept_prompt", (PyCFunction)chain_accept_prompt, METH_O,
     "accept_prompt(tokens)\n\nA token or a sequence of them (sift_chain_accept_prompt);\n"
     "all or nothing."},
    {"reset", (PyCFunction)chain_reset, METH_NOARGS, "reset()\n\nsift_chain_reset."},
    {"clone", (PyCFunction)chain_clone, METH_NOARGS,
     "clone() -> Chain\n\nA deep copy (not its row hook)."},
    {"sample_slice", (PyCFunction)(void (*)(void))chain_sample_slice, METH_VARARGS | METH_KEYWORDS,
     "sample_slice(ids, logits, n_vocab, *, tail_mass=None, canonical=False, extras=None)\n\n"
     "Samples from a top-k slice: ids (int32 or int64) and logits (float32) of the\n"
     "k largest logits in any order; extras = (ids, logits) of chain.extras()\n"
     "(ids already in the prefix are dropped); tail_mass = the bound of\n"
     "docs/analyzer.md. The token is the whole row's, bit for bit."},
    {"sample_logprobs", (PyCFunction)(void (*)(void))chain_sample_logprobs,
     METH_VARARGS | METH_KEYWORDS,
     "sample_logprobs(logits, n=0, *, raw=True, processed=True) -> (int, dict)\n\n"
     "sample() that also returns logprobs (sift_chain_sample_logprobs): the same\n"
     "token and RNG. dict: raw, processed = (id, logit, logprob, p) of the token;\n"
     "raw_top, processed_top = the first n such entries; lse; n_support."},
    {"sample_slice_logprobs", (PyCFunction)(void (*)(void))chain_sample_slice_logprobs,
     METH_VARARGS | METH_KEYWORDS,
     "sample_slice_logprobs(ids, logits, n_vocab, *, tail_mass=None, canonical=False,\n"
     "extras=None, n=0, raw=True, processed=True, row_lse=None) -> (int, dict)\n\n"
     "sample_slice() with logprobs (sift_chain_sample_slice_logprobs); raw values\n"
     "need row_lse, the whole row's log-sum-exp, or the row (the hook)."},
    {"set_workspace", (PyCFunction)chain_set_workspace, METH_O,
     "set_workspace(ws)\n\nAttach a sift.Workspace (None detaches): sift_chain_set_workspace."},
    {"distribution", (PyCFunction)(void (*)(void))chain_distribution, METH_VARARGS | METH_KEYWORDS,
     "distribution(logits, n=None) -> list[(id, logit, p)]\n\nThe selector's distribution in "
     "canonical order, the first n entries."},
    {"distribution_slice", (PyCFunction)(void (*)(void))chain_distribution_slice,
     METH_VARARGS | METH_KEYWORDS,
     "distribution_slice(ids, logits, n_vocab, *, tail_mass=None, canonical=False,\n"
     "                   extras=None, n=None) -> list[(id, logit, p)]"},
    {"plan", (PyCFunction)chain_plan, METH_NOARGS,
     "plan() -> Plan\n\nThe static plan: k, guarantee, why, ... and per-stage entries."},
    {"next_k", (PyCFunction)chain_next_k, METH_NOARGS,
     "next_k() -> Plan\n\nThe dynamic plan for the next step."},
    {"extras", (PyCFunction)chain_extras, METH_NOARGS,
     "extras() -> list[int]\n\nThe extra ids the next slice must carry."},
    {"stats", (PyCFunction)chain_stats, METH_NOARGS, "stats() -> dict"},
    {"set_cross_check", (PyCFunction)(void (*)(void))chain_set_cross_check,
     METH_VARARGS | METH_KEYWORDS, "set_cross_check(every_n=0, probability=0.0, seed=0)"},
    {"verify", (PyCFunction)(void (*)(void))chain_verify, METH_VARARGS | METH_KEYWORDS,
     "verify(drafts, rows=None, *, slices=None, keep_last=False) -> (n_accepted, token)\n\n"
     "Speculative verification (sift_chain_verify): rows float32 [n+1, V], or n+1\n"
     "sift.Slice objects."},
    {NULL, NULL, 0, NULL}};

static PyObject *chain_config(SiftPyChain *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->config ? self->config : Py_None);
}

static PyGetSetDef chain_getset[] = {
    {"config", (getter)chain_config, NULL,
     "What the config it was built from says besides the chain: {'form', 'logprobs',\n"
     "'description'} (None for a chain built stage by stage or cloned).",
     NULL},
    {"stages", (getter)chain_stages, NULL, "The stage names, in order.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject SiftPyChain_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sift._sift.Chain",
    .tp_basicsize = sizeof(SiftPyChain),
    .tp_dealloc = (destructor)chain_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Chain(seed=0, *, n_vocab=0, max_vocab=0, max_history=0, max_stages=0)\n\n"
              "A sampler chain (sift_chain). Add stages with the add_* methods (each\n"
              "returns the chain) or build one with Chain.from_yaml.",
    .tp_traverse = (traverseproc)chain_traverse,
    .tp_clear = (inquiry)chain_clear,
    .tp_methods = chain_methods,
    .tp_getset = chain_getset,
    .tp_new = chain_new,
    .tp_weaklistoffset = offsetof(SiftPyChain, weakrefs),
};

static PyStructSequence_Field plan_fields[] = {
    {"k", "Prefix length to copy; 0 = the whole row."},
    {"guarantee", "'exact', 'certified' or 'whole_row'."},
    {"why", "The sum in words."},
    {"recommended_k", "The k to use."},
    {"max_extras", "Most extra ids a step can ask for."},
    {"decided_at", "Stage whose truncation decides; -1 = none."},
    {"stages", "Per-stage entries (plan() only)."},
    {"device_k", "Prefix length for a device top-k (any order): k + 8; 0 = the whole row."},
    {NULL, NULL}};
static PyStructSequence_Desc plan_desc = {"sift.Plan", "The analyzer's plan (sift_plan).",
                                          plan_fields, 8};
static PyStructSequence_Field stage_fields[] = {{"name", NULL}, {"cls", NULL}, {"n", NULL},
                                                {"k", NULL},    {"why", NULL}, {NULL, NULL}};
static PyStructSequence_Desc stage_desc = {"sift.PlanStage", "One stage of a plan.", stage_fields,
                                           5};

int siftpy_chain_init(PyObject *module)
{
    if (PyType_Ready(&SiftPyChain_Type) < 0)
        return -1;
    plan_type = PyStructSequence_NewType(&plan_desc);
    stage_type = PyStructSequence_NewType(&stage_desc);
    if (!plan_type || !stage_type)
        return -1;
    Py_INCREF(&SiftPyChain_Type);
    if (PyModule_AddObject(module, "Chain", (PyObject *)&SiftPyChain_Type) < 0)
        return -1;
    Py_INCREF(plan_type);
    Py_INCREF(stage_type);
    if (PyModule_AddObject(module, "Plan", (PyObject *)plan_type) < 0 ||
        PyModule_AddObject(module, "PlanStage", (PyObject *)stage_type) < 0)
        return -1;
    return 0;
}
