/*
 * batch.c - sift.sample_batch over sift_chains_sample (one call for n
 * chains, the GIL released), and the private timers the benchmark
 * script (python/bench/bench.py) uses to time the bare C calls in the
 * same process as the Python ones.
 */
#include "sift_py.h"

#include <string.h>
#include <time.h>

int siftpy_chain_build_slice(PyObject *chain, PyObject *obj, sift_slice *out);
PyObject *siftpy_chain_step_error(PyObject *chain, sift_status st, const sift_error *err);

static int is_slice(PyObject *o)
{
    return PyObject_HasAttrString(o, "ids") && PyObject_HasAttrString(o, "n_vocab");
}

/* The exception object siftpy_raise would raise, not raised. */
static PyObject *error_object(PyObject *chain, sift_status st, const sift_error *err)
{
    siftpy_chain_step_error(chain, st, err);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

static PyObject *sample_batch(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"chains", "rows_or_slices", "accept", NULL};
    PyObject *chains_obj, *data;
    int accept = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$p:sample_batch", kwlist, &chains_obj, &data,
                                     &accept))
        return NULL;
    PyObject *chains = PySequence_Fast(chains_obj, "chains must be a sequence of sift.Chain");
    if (!chains)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(chains);
    PyObject *res = NULL, *items = NULL;
    sift_chain **cs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *cs);
    const float **rows = PyMem_Calloc((size_t)(n ? n : 1), sizeof *rows);
    sift_slice *slices = PyMem_Calloc((size_t)(n ? n : 1), sizeof *slices);
    siftpy_view *views = PyMem_Calloc((size_t)(n ? n : 1), sizeof *views);
    int32_t *tokens = PyMem_Calloc((size_t)(n ? n : 1), sizeof *tokens);
    sift_status *statuses = PyMem_Calloc((size_t)(n ? n : 1), sizeof *statuses);
    sift_error *errors = PyMem_Calloc((size_t)(n ? n : 1), sizeof *errors);
    Py_ssize_t acquired = 0, n_views = 0;
    siftpy_view whole;
    int have_whole = 0, use_slices = 0;
    int32_t n_vocab = 0;
    if (!cs || !rows || !slices || !views || !tokens || !statuses || !errors) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(chains, i);
        if (!PyObject_TypeCheck(c, &SiftPyChain_Type)) {
            PyErr_Format(PyExc_TypeError, "chains[%zd] must be a sift.Chain", i);
            goto done;
        }
        cs[i] = siftpy_chain_ptr(c);
    }
    for (; acquired < n; acquired++) {
        PyObject *c = PySequence_Fast_GET_ITEM(chains, acquired);
        if (siftpy_chain_acquire(c) < 0) {
            for (Py_ssize_t j = 0; j < acquired; j++)
                if (PySequence_Fast_GET_ITEM(chains, j) == c) {
                    PyErr_Clear();
                    siftpy_raise_msg(SIFT_E_ARG, acquired,
                                     "slot %zd: the chain of slot %zd again (one chain per slot)",
                                     acquired, j);
                }
            goto done;
        }
    }
    if (PyObject_CheckBuffer(data) || PyObject_HasAttrString(data, "numpy") ||
        PyObject_HasAttrString(data, "__array_interface__")) {
        if (siftpy_view_get(&whole, data, SIFTPY_F32, 2, 0, "rows") < 0)
            goto done;
        have_whole = 1;
        if (whole.shape[0] != n) {
            siftpy_raise_msg(SIFT_E_ARG, -1, "rows has %zd rows for %zd chains", whole.shape[0], n);
            goto done;
        }
        n_vocab = (int32_t)whole.shape[1];
        for (Py_ssize_t i = 0; i < n; i++)
            rows[i] = (const float *)whole.data + (size_t)i * (size_t)whole.shape[1];
    } else {
        items = PySequence_Fast(data, "rows_or_slices must be a [n, V] array or a sequence");
        if (!items)
            goto done;
        if (PySequence_Fast_GET_SIZE(items) != n) {
            siftpy_raise_msg(SIFT_E_ARG, -1, "%zd rows or slices for %zd chains",
                             PySequence_Fast_GET_SIZE(items), n);
            goto done;
        }
        use_slices = n > 0 && is_slice(PySequence_Fast_GET_ITEM(items, 0));
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *o = PySequence_Fast_GET_ITEM(items, i);
            if (use_slices) {
                if (siftpy_chain_build_slice(PySequence_Fast_GET_ITEM(chains, i), o, &slices[i]) <
                    0)
                    goto done;
            } else {
                if (siftpy_view_get(&views[i], o, SIFTPY_F32, 1, 0, "row") < 0)
                    goto done;
                n_views = i + 1;
                if (i > 0 && views[i].shape[0] != n_vocab) {
                    siftpy_raise_msg(SIFT_E_ARG, i, "row %zd has %zd logits, row 0 has %d", i,
                                     views[i].shape[0], (int)n_vocab);
                    goto done;
                }
                n_vocab = (int32_t)views[i].shape[0];
                rows[i] = views[i].data;
            }
        }
    }
    sift_batch_args a;
    sift_batch_args_init(&a);
    a.chains = cs;
    a.n = (size_t)n;
    if (use_slices)
        a.slices = slices;
    else {
        a.rows = rows;
        a.n_vocab = n_vocab;
    }
    a.flags = accept ? SIFT_BATCH_ACCEPT : 0;
    a.errors = errors;
    sift_error err;
    sift_status st;
    Py_BEGIN_ALLOW_THREADS;
    st = sift_chains_sample(&a, tokens, statuses, &err);
    Py_END_ALLOW_THREADS;
    (void)st;
    PyObject *tl = PyList_New(n), *el = PyList_New(n);
    if (!tl || !el) {
        Py_XDECREF(tl);
        Py_XDECREF(el);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyList_SET_ITEM(tl, i, PyLong_FromLong(tokens[i]));
        PyObject *e = statuses[i] == SIFT_OK ? Py_NewRef(Py_None)
                                             : error_object(PySequence_Fast_GET_ITEM(chains, i),
                                                            statuses[i], &errors[i]);
        PyList_SET_ITEM(el, i, e ? e : Py_NewRef(Py_None));
    }
    res = PyTuple_Pack(2, tl, el);
    Py_DECREF(tl);
    Py_DECREF(el);
done:
    for (Py_ssize_t i = 0; i < acquired; i++)
        siftpy_chain_release(PySequence_Fast_GET_ITEM(chains, i));
    for (Py_ssize_t i = 0; i < n_views; i++)
        siftpy_view_release(&views[i]);
    if (have_whole)
        siftpy_view_release(&whole);
    PyMem_Free(cs);
    PyMem_Free(rows);
    PyMem_Free(slices);
    PyMem_Free(views);
    PyMem_Free(tokens);
    PyMem_Free(statuses);
    PyMem_Free(errors);
    Py_XDECREF(items);
    Py_DECREF(chains);
    return res;
}

/* ---------------------------------------------------------------- timers */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* _time_c_sample(chain, logits, reps) -> ns per sift_chain_sample call. */
static PyObject *time_c_sample(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *chain, *logits;
    int reps;
    if (!PyArg_ParseTuple(args, "O!Oi", &SiftPyChain_Type, &chain, &logits, &reps))
        return NULL;
    siftpy_view v;
    if (siftpy_view_get(&v, logits, SIFTPY_F32, 1, 0, "logits") < 0)
        return NULL;
    sift_chain *c = siftpy_chain_ptr(chain);
    int32_t tok;
    sift_error err;
    sift_status st = SIFT_OK;
    double t0 = now_ns();
    for (int i = 0; i < reps && st == SIFT_OK; i++)
        st = sift_chain_sample(c, v.data, (int32_t)v.shape[0], &tok, &err);
    double t1 = now_ns();
    siftpy_view_release(&v);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyFloat_FromDouble((t1 - t0) / reps);
}

/* _time_c_sample_slice(chain, slice, reps) -> ns per sift_chain_sample_slice
 * call (the slice built once, untimed, as a device would). */
static PyObject *time_c_sample_slice(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *chain, *slice;
    int reps;
    if (!PyArg_ParseTuple(args, "O!Oi", &SiftPyChain_Type, &chain, &slice, &reps))
        return NULL;
    sift_slice s;
    if (siftpy_chain_build_slice(chain, slice, &s) < 0)
        return NULL;
    sift_chain *c = siftpy_chain_ptr(chain);
    int32_t tok;
    sift_error err;
    sift_status st = SIFT_OK;
    double t0 = now_ns();
    for (int i = 0; i < reps && st == SIFT_OK; i++)
        st = sift_chain_sample_slice(c, &s, &tok, &err);
    double t1 = now_ns();
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyFloat_FromDouble((t1 - t0) / reps);
}

/* _time_c_fill(grammar, mask, reps) -> ns per sift_grammar_fill_bitmask. */
static PyObject *time_c_fill(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *g, *mask;
    int reps;
    if (!PyArg_ParseTuple(args, "O!Oi", &SiftPyGrammar_Type, &g, &mask, &reps))
        return NULL;
    siftpy_view v;
    if (siftpy_view_get(&v, mask, SIFTPY_I32 | SIFTPY_U32, -1, 1, "bitmask") < 0)
        return NULL;
    size_t w = (size_t)(v.ndim == 2 ? v.shape[1] : v.shape[0]);
    sift_grammar *gr = ((SiftPyGrammar *)g)->grammar;
    sift_error err;
    sift_status st = SIFT_OK;
    double t0 = now_ns();
    for (int i = 0; i < reps && st == SIFT_OK; i++)
        st = sift_grammar_fill_bitmask(gr, v.data, w, &err);
    double t1 = now_ns();
    siftpy_view_release(&v);
    if (st != SIFT_OK)
        return siftpy_raise(st, &err);
    return PyFloat_FromDouble((t1 - t0) / reps);
}

PyMethodDef siftpy_batch_methods[] = {
    {"sample_batch", (PyCFunction)(void (*)(void))sample_batch, METH_VARARGS | METH_KEYWORDS,
     "sample_batch(chains, rows_or_slices, *, accept=True) -> (tokens, errors)\n\n"
     "Samples n chains in one call (sift_chains_sample) with the GIL released:\n"
     "rows_or_slices is a float32 [n, V] array, a sequence of n rows, or a\n"
     "sequence of n sift.Slice. With accept, each token is accepted too.\n"
     "tokens[i] is slot i's token (-1 when it failed); errors[i] is None or the\n"
     "SiftError of slot i (not raised: one failing slot does not stop the others)."},
    {"_time_c_sample", time_c_sample, METH_VARARGS, "benchmark helper"},
    {"_time_c_sample_slice", time_c_sample_slice, METH_VARARGS, "benchmark helper"},
    {"_time_c_fill", time_c_fill, METH_VARARGS, "benchmark helper"},
    {NULL, NULL, 0, NULL}};
