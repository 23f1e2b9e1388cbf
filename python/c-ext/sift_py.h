/*
 * sift_py.h - what the files of the CPython extension sift._sift share.
 *
 * The extension is written over include/sift.h only. One file per
 * concept: errors.c (SiftError and the status -> exception bridge),
 * buffers.c (zero-copy views of numpy arrays and CPU torch tensors),
 * vocab.c, grammar.c, chain.c, batch.c, and module.c, which registers
 * them. Every object carries a busy flag, set while a call runs with the
 * GIL released, so that a second Python thread gets an error instead of
 * breaking sift's one-thread-per-object contract.
 */
#ifndef SIFT_PY_H
#define SIFT_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "sift.h"

/* errors.c */
extern PyObject *SiftPy_Error; /* sift.SiftError, a ValueError */
int siftpy_errors_init(PyObject *module);
/* Raises SiftError from a failed call's status and detail; returns NULL. */
PyObject *siftpy_raise(sift_status st, const sift_error *err);
/* Raises SiftError with a status and a message of our own; returns NULL. */
PyObject *siftpy_raise_msg(sift_status st, int64_t index, const char *fmt, ...);
/* Raises SiftError(SIFT_E_STATE) for an object another thread is using. */
PyObject *siftpy_busy(const char *what);

/* buffers.c: a read-only or writable 1-D or 2-D view of an array. */
typedef struct siftpy_view {
    Py_buffer buf; /* held when `held` */
    int held;
    PyObject *owner; /* a strong reference to what the view reads (the
                        numpy array a torch tensor's .numpy() made) */
    void *data;
    Py_ssize_t ndim;
    Py_ssize_t shape[2];
    Py_ssize_t itemsize;
    char kind; /* 'f' float32, 'i' int32, 'l' int64, 'I' uint32 */
} siftpy_view;

/* Which element types a caller accepts: a bit per kind. */
enum {
    SIFTPY_F32 = 1,
    SIFTPY_I32 = 2,
    SIFTPY_I64 = 4,
    SIFTPY_U32 = 8,
};

/*
 * Takes a view of `obj` without copying: an object with the buffer
 * protocol (numpy arrays, memoryview, array.array), a CPU torch tensor
 * (through its .numpy(), which shares the memory) or an object with
 * __array_interface__. `kinds` is a SIFTPY_* mask, `ndim` 1 or 2 (-1 for
 * either), `writable` 1 for outputs. Rows must be C-contiguous. Raises
 * TypeError naming the dtype, device or stride on anything else and
 * returns -1. `what` names the argument in messages.
 */
int siftpy_view_get(siftpy_view *v, PyObject *obj, unsigned kinds, int ndim, int writable,
                    const char *what);
void siftpy_view_release(siftpy_view *v);

/* vocab.c */
int siftpy_int32_list(PyObject *seq, int32_t **out, size_t *n, const char *what);
typedef struct {
    PyObject_HEAD sift_vocab *vocab;
} SiftPyVocab;
extern PyTypeObject SiftPyVocab_Type;
int siftpy_vocab_init(PyObject *module);

/* grammar.c */
typedef struct {
    PyObject_HEAD sift_grammar *grammar;
    PyObject *vocab; /* the Vocab it was built over (keeps its allocator alive), or None */
    int32_t n_vocab;
    int busy;
} SiftPyGrammar;
extern PyTypeObject SiftPyGrammar_Type;
int siftpy_grammar_init(PyObject *module);

/* chain.c */
typedef struct SiftPyChain SiftPyChain;
extern PyTypeObject SiftPyChain_Type;
int siftpy_chain_init(PyObject *module);
sift_chain *siftpy_chain_ptr(PyObject *obj);
int siftpy_chain_acquire(PyObject *obj); /* sets busy; 0 or -1 with SiftError */
void siftpy_chain_release(PyObject *obj);
/* Builds a sift_slice for `chain` from Python ids/logits/extras; see chain.c. */

/* workspace.c */
extern PyTypeObject SiftPyWorkspace_Type;
int siftpy_workspace_init(PyObject *module);
/* The workspace of a live sift.Workspace; NULL with TypeError or SiftError
 * (closed) set. */
sift_workspace *siftpy_workspace_ptr(PyObject *obj);

/* batch.c */
extern PyMethodDef siftpy_batch_methods[];

#endif /* SIFT_PY_H */
