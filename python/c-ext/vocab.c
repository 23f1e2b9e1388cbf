/*
 * vocab.c - sift.Vocab: token id -> bytes, end-of-generation ids, and the
 * encoder (sift_vocab_*). A Vocab is read-only once built, so many
 * threads may build grammars over it at once (the C contract).
 */
#include "sift_py.h"

#include <string.h>

static void vocab_dealloc(SiftPyVocab *self)
{
    sift_vocab_free(self->vocab);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *wrap(PyTypeObject *type, sift_vocab *v)
{
    SiftPyVocab *self = (SiftPyVocab *)type->tp_alloc(type, 0);
    if (!self) {
        sift_vocab_free(v);
        return NULL;
    }
    self->vocab = v;
    return (PyObject *)self;
}

/* Converts a sequence of ints to an int32 array (PyMem); -1 on error. */
static int int32_list(PyObject *seq, int32_t **out, size_t *n, const char *what)
{
    *out = NULL;
    *n = 0;
    if (!seq || seq == Py_None)
        return 0;
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of token ids");
    if (!fast)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    int32_t *a = PyMem_Malloc((size_t)(len ? len : 1) * sizeof *a);
    if (!a) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (x == -1 && PyErr_Occurred()) {
            PyMem_Free(a);
            Py_DECREF(fast);
            return -1;
        }
        if (x < INT32_MIN || x > INT32_MAX) {
            PyMem_Free(a);
            Py_DECREF(fast);
            siftpy_raise_msg(SIFT_E_TOKEN, (int64_t)i, "%s[%zd] = %lld is not a token id", what, i,
                             x);
            return -1;
        }
        a[i] = (int32_t)x;
    }
    Py_DECREF(fast);
    *out = a;
    *n = (size_t)len;
    return 0;
}

int siftpy_int32_list(PyObject *seq, int32_t **out, size_t *n, const char *what)
{
    return int32_list(seq, out, n, what);
}

static PyObject *vocab_from_pieces(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"pieces", "eog_ids", "special", "n_vocab", NULL};
    PyObject *pieces, *eog = NULL, *special = NULL;
    int n_vocab = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOi:from_pieces", kwlist, &pieces, &eog,
                                     &special, &n_vocab))
        return NULL;
    PyObject *fast = PySequence_Fast(pieces, "pieces must be a sequence of bytes");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    const char **ptrs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *ptrs);
    size_t *lens = PyMem_Calloc((size_t)(n ? n : 1), sizeof *lens);
    PyObject *res = NULL;
    int32_t *eog_ids = NULL, *spec_ids = NULL;
    const char **spec_txt = NULL;
    size_t *spec_len = NULL, n_eog = 0, n_spec = 0;
    PyObject *spec_items = NULL;
    sift_vocab *base = NULL, *v = NULL;
    sift_error err;
    if (!ptrs || !lens) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(fast, i);
        char *b;
        Py_ssize_t l;
        if (PyUnicode_Check(p)) {
            b = (char *)PyUnicode_AsUTF8AndSize(p, &l);
            if (!b)
                goto done;
        } else if (PyBytes_AsStringAndSize(p, &b, &l) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "pieces[%zd] must be bytes, not %.100s", i,
                         Py_TYPE(p)->tp_name);
            goto done;
        }
        ptrs[i] = b;
        lens[i] = (size_t)l;
    }
    if (n > INT32_MAX) {
        siftpy_raise_msg(SIFT_E_LIMIT, -1, "too many pieces");
        goto done;
    }
    sift_status st;
    Py_BEGIN_ALLOW_THREADS; /* the pieces are bytes/str the list keeps alive */
    st = sift_vocab_new(&base, (int32_t)n, ptrs, lens, NULL, &err);
    Py_END_ALLOW_THREADS;
    if (st != SIFT_OK) {
        siftpy_raise(st, &err);
        goto done;
    }
    if (int32_list(eog, &eog_ids, &n_eog, "eog_ids") < 0)
        goto done;
    if (special && special != Py_None) {
        if (!PyDict_Check(special)) {
            PyErr_SetString(PyExc_TypeError, "special must be a dict {id: bytes}");
            goto done;
        }
        spec_items = PyDict_Items(special);
        if (!spec_items)
            goto done;
        n_spec = (size_t)PyList_GET_SIZE(spec_items);
        spec_ids = PyMem_Calloc(n_spec ? n_spec : 1, sizeof *spec_ids);
        spec_txt = PyMem_Calloc(n_spec ? n_spec : 1, sizeof *spec_txt);
        spec_len = PyMem_Calloc(n_spec ? n_spec : 1, sizeof *spec_len);
        if (!spec_ids || !spec_txt || !spec_len) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t i = 0; i < n_spec; i++) {
            PyObject *it = PyList_GET_ITEM(spec_items, (Py_ssize_t)i);
            long id = PyLong_AsLong(PyTuple_GET_ITEM(it, 0));
            if (id == -1 && PyErr_Occurred())
                goto done;
            char *b;
            Py_ssize_t l;
            PyObject *t = PyTuple_GET_ITEM(it, 1);
            if (PyUnicode_Check(t)) {
                b = (char *)PyUnicode_AsUTF8AndSize(t, &l);
                if (!b)
                    goto done;
            } else if (PyBytes_AsStringAndSize(t, &b, &l) < 0) {
                goto done;
            }
            spec_ids[i] = (int32_t)id;
            spec_txt[i] = b;
            spec_len[i] = (size_t)l;
        }
    }
    if (n_eog || n_spec || n_vocab) {
        sift_vocab_extra ex;
        sift_vocab_extra_init(&ex);
        ex.special_texts = spec_txt;
        ex.special_lengths = spec_len;
        ex.special_ids = spec_ids;
        ex.n_special = n_spec;
        ex.eog_ids = eog_ids;
        ex.n_eog = n_eog;
        ex.n_vocab = n_vocab;
        Py_BEGIN_ALLOW_THREADS;
        st = sift_vocab_extend(&v, base, &ex, NULL, &err);
        Py_END_ALLOW_THREADS;
        if (st != SIFT_OK) {
            siftpy_raise(st, &err);
            goto done;
        }
    } else {
        v = base;
        base = NULL;
    }
    res = wrap((PyTypeObject *)cls, v);
done:
    sift_vocab_free(base);
    Py_XDECREF(spec_items);
    PyMem_Free(spec_ids);
    PyMem_Free(spec_txt);
    PyMem_Free(spec_len);
    PyMem_Free(eog_ids);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    Py_DECREF(fast);
    return res;
}

typedef sift_status (*load_fn)(sift_vocab **, const char *, const sift_allocator *, sift_error *);
typedef sift_status (*mem_fn)(sift_vocab **, const void *, size_t, const sift_allocator *,
                              sift_error *);

static sift_status tiktoken_mem(sift_vocab **out, const void *d, size_t n, const sift_allocator *a,
                                sift_error *err)
{
    return sift_vocab_from_tiktoken(out, d, n, a, err);
}

/* A path (str or os.PathLike) or the file's bytes. */
static PyObject *load(PyObject *cls, PyObject *arg, load_fn from_path, mem_fn from_mem)
{
    sift_vocab *v = NULL;
    sift_error err;
    sift_status st;
    if (PyBytes_Check(arg) || PyByteArray_Check(arg) || PyMemoryView_Check(arg)) {
        Py_buffer b;
        if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
            return NULL;
        Py_BEGIN_ALLOW_THREADS;
        st = from_mem(&v, b.buf, (size_t)b.len, NULL, &err);
        Py_END_ALLOW_THREADS;
        PyBuffer_Release(&b);
    } else {
        PyObject *path = NULL;
        if (!PyUnicode_FSConverter(arg, &path))
            return NULL;
        const char *p = PyBytes_AS_STRING(path);
        Py_BEGIN_ALLOW_THREADS;
        st = from_path(&v, p, NULL, &err);
        Py_END_ALLOW_THREADS;
        Py_DECREF(path);
    }
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return wrap((PyTypeObject *)cls, v);
}

static PyObject *vocab_from_tiktoken(PyObject *cls, PyObject *arg)
{
    return load(cls, arg, sift_vocab_load_tiktoken, tiktoken_mem);
}

static PyObject *vocab_from_gguf(PyObject *cls, PyObject *arg)
{
    return load(cls, arg, sift_vocab_load_gguf, sift_vocab_from_gguf);
}

/* A path (str or os.PathLike) or the file's bytes, for from_hf. */
typedef struct {
    Py_buffer buf;
    PyObject *path;
    int have_buf;
} hf_src;

static int hf_src_get(hf_src *s, PyObject *arg)
{
    s->have_buf = 0;
    s->path = NULL;
    if (!arg || arg == Py_None)
        return 0;
    if (PyBytes_Check(arg) || PyByteArray_Check(arg) || PyMemoryView_Check(arg)) {
        if (PyObject_GetBuffer(arg, &s->buf, PyBUF_SIMPLE) < 0)
            return -1;
        s->have_buf = 1;
        return 0;
    }
    return PyUnicode_FSConverter(arg, &s->path) ? 0 : -1;
}

static void hf_src_release(hf_src *s)
{
    if (s->have_buf)
        PyBuffer_Release(&s->buf);
    Py_CLEAR(s->path);
}

static PyObject *vocab_from_hf(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"tokenizer_json", "generation_config", NULL};
    PyObject *tok_obj, *cfg_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:from_hf", kwlist, &tok_obj, &cfg_obj))
        return NULL;
    hf_src tok, cfg;
    if (hf_src_get(&tok, tok_obj) < 0)
        return NULL;
    if (hf_src_get(&cfg, cfg_obj) < 0) {
        hf_src_release(&tok);
        return NULL;
    }
    PyObject *res = NULL;
    if ((tok.have_buf && cfg.path) || (!tok.have_buf && cfg.have_buf)) {
        PyErr_SetString(PyExc_TypeError,
                        "tokenizer_json and generation_config must both be paths or both bytes");
        goto done;
    }
    sift_vocab *v = NULL;
    sift_error err;
    sift_status st;
    if (tok.have_buf) {
        const char *c = cfg.have_buf ? cfg.buf.buf : NULL;
        size_t cl = cfg.have_buf ? (size_t)cfg.buf.len : 0;
        Py_BEGIN_ALLOW_THREADS;
        st = sift_vocab_from_hf(&v, tok.buf.buf, (size_t)tok.buf.len, c, cl, NULL, &err);
        Py_END_ALLOW_THREADS;
    } else {
        const char *tp = PyBytes_AS_STRING(tok.path);
        const char *cp = cfg.path ? PyBytes_AS_STRING(cfg.path) : NULL;
        Py_BEGIN_ALLOW_THREADS;
        st = sift_vocab_load_hf(&v, tp, cp, NULL, &err);
        Py_END_ALLOW_THREADS;
    }
    if (st != SIFT_OK)
        siftpy_raise(st, &err);
    else
        res = wrap((PyTypeObject *)cls, v);
done:
    hf_src_release(&tok);
    hf_src_release(&cfg);
    return res;
}

static PyObject *vocab_extend(SiftPyVocab *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"eog_ids", "n_vocab", NULL};
    PyObject *eog = NULL;
    int n_vocab = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$Oi:extend", kwlist, &eog, &n_vocab))
        return NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (int32_list(eog, &ids, &n, "eog_ids") < 0)
        return NULL;
    sift_vocab_extra ex;
    sift_vocab_extra_init(&ex);
    ex.eog_ids = ids;
    ex.n_eog = n;
    ex.n_vocab = n_vocab;
    sift_vocab *v = NULL;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_vocab_extend(&v, self->vocab, &ex, NULL, &err);
    Py_END_ALLOW_THREADS;
    PyMem_Free(ids);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return wrap(Py_TYPE(self), v);
}

static Py_ssize_t vocab_len(SiftPyVocab *self)
{
    return sift_vocab_size(self->vocab);
}

static PyObject *vocab_piece(SiftPyVocab *self, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    if (id < INT32_MIN || id > INT32_MAX)
        return siftpy_raise_msg(SIFT_E_TOKEN, id, "token %ld is outside [0, %d)", id,
                                (int)sift_vocab_size(self->vocab));
    const char *b;
    size_t n;
    sift_error err;
    sift_status st = sift_vocab_piece(self->vocab, (int32_t)id, &b, &n, &err);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyBytes_FromStringAndSize(b, (Py_ssize_t)n);
}

static PyObject *vocab_attr(SiftPyVocab *self, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    if (id < 0 || id >= sift_vocab_size(self->vocab))
        return siftpy_raise_msg(SIFT_E_TOKEN, id, "token %ld is outside [0, %d)", id,
                                (int)sift_vocab_size(self->vocab));
    return PyLong_FromUnsignedLong(sift_vocab_attr(self->vocab, (int32_t)id));
}

static PyObject *vocab_eog_ids(SiftPyVocab *self, PyObject *unused)
{
    (void)unused;
    PyObject *l = PyList_New(0);
    int32_t n = sift_vocab_size(self->vocab);
    for (int32_t i = 0; l && i < n; i++)
        if (sift_vocab_attr(self->vocab, i) & SIFT_TOKEN_EOG) {
            PyObject *x = PyLong_FromLong(i);
            if (!x || PyList_Append(l, x) < 0) {
                Py_XDECREF(x);
                Py_CLEAR(l);
                break;
            }
            Py_DECREF(x);
        }
    return l;
}

static PyObject *vocab_encode(SiftPyVocab *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"text", "special", NULL};
    Py_buffer text;
    int special = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s*|$p:encode", kwlist, &text, &special))
        return NULL;
    size_t n = 0;
    sift_error err;
    uint32_t flags = special ? SIFT_ENCODE_SPECIAL : 0;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_vocab_encode(self->vocab, text.buf, (size_t)text.len, flags, NULL, 0, &n, NULL, &err);
    Py_END_ALLOW_THREADS;
    if (st != SIFT_OK && st != SIFT_E_LIMIT) {
        PyBuffer_Release(&text);
        return siftpy_raise(st, &err);
    }
    int32_t *ids = PyMem_Malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        PyBuffer_Release(&text);
        return PyErr_NoMemory();
    }
    size_t n2 = 0;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_vocab_encode(self->vocab, text.buf, (size_t)text.len, flags, ids, n, &n2, NULL, &err);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    PyObject *l = NULL;
    if (st != SIFT_OK) {
        siftpy_raise(st, &err);
    } else if ((l = PyList_New((Py_ssize_t)n2))) {
        for (size_t i = 0; i < n2; i++) {
            PyObject *x = PyLong_FromLong(ids[i]);
            if (!x) {
                Py_CLEAR(l);
                break;
            }
            PyList_SET_ITEM(l, (Py_ssize_t)i, x);
        }
    }
    PyMem_Free(ids);
    return l;
}

static PyMethodDef vocab_methods[] = {
    {"from_pieces", (PyCFunction)(void (*)(void))vocab_from_pieces,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_pieces(pieces, *, eog_ids=(), special=None, n_vocab=0) -> Vocab\n\n"
     "A vocabulary from token byte strings (pieces[i] is token i's bytes;\n"
     "str is taken as UTF-8). eog_ids: end-of-generation ids; special: {id:\n"
     "bytes} control tokens; n_vocab: pad with unused ids to the model's\n"
     "logits width (sift_vocab_new + sift_vocab_extend)."},
    {"from_tiktoken", (PyCFunction)vocab_from_tiktoken, METH_CLASS | METH_O,
     "from_tiktoken(path_or_bytes) -> Vocab\n\nA tiktoken rank file (sift_vocab_load_tiktoken)."},
    {"from_hf", (PyCFunction)(void (*)(void))vocab_from_hf,
     METH_CLASS | METH_VARARGS | METH_KEYWORDS,
     "from_hf(tokenizer_json, generation_config=None) -> Vocab\n\n"
     "A Hugging Face tokenizer.json, with the EOS ids of generation_config.json\n"
     "(or tokenizer_config.json): both paths or both bytes (sift_vocab_load_hf,\n"
     "sift_vocab_from_hf). The GIL is released."},
    {"from_gguf", (PyCFunction)vocab_from_gguf, METH_CLASS | METH_O,
     "from_gguf(path_or_bytes) -> Vocab\n\nA GGUF model's tokenizer (sift_vocab_load_gguf)."},
    {"extend", (PyCFunction)(void (*)(void))vocab_extend, METH_VARARGS | METH_KEYWORDS,
     "extend(*, eog_ids=(), n_vocab=0) -> Vocab\n\nA new vocabulary with more "
     "end-of-generation ids and padding (sift_vocab_extend)."},
    {"piece", (PyCFunction)vocab_piece, METH_O, "piece(id) -> bytes"},
    {"attr", (PyCFunction)vocab_attr, METH_O,
     "attr(id) -> int\n\nThe SIFT_TOKEN_* bits of a token (1 EOG, 2 special, 4 unused)."},
    {"eog_ids", (PyCFunction)vocab_eog_ids, METH_NOARGS,
     "eog_ids() -> list[int]\n\nThe end-of-generation ids."},
    {"encode", (PyCFunction)(void (*)(void))vocab_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(text, *, special=False) -> list[int]\n\nText (str or bytes) to token ids "
     "(sift_vocab_encode)."},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods vocab_seq = {.sq_length = (lenfunc)vocab_len};

PyTypeObject SiftPyVocab_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sift._sift.Vocab",
    .tp_basicsize = sizeof(SiftPyVocab),
    .tp_dealloc = (destructor)vocab_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A vocabulary: token id -> bytes, plus end-of-generation ids (sift_vocab).\n\n"
              "Build one with Vocab.from_pieces, from_tiktoken or from_gguf. len(vocab) is\n"
              "its size V.",
    .tp_methods = vocab_methods,
    .tp_as_sequence = &vocab_seq,
};

int siftpy_vocab_init(PyObject *module)
{
    if (PyType_Ready(&SiftPyVocab_Type) < 0)
        return -1;
    Py_INCREF(&SiftPyVocab_Type);
    return PyModule_AddObject(module, "Vocab", (PyObject *)&SiftPyVocab_Type);
}
