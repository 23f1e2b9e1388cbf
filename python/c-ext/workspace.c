/*
 * workspace.c - sift.Workspace: scratch memory chains share
 * (sift_workspace).
 *
 * Invariants:
 * - The object holds the caller's handle; close() (or leaving a `with`
 *   block, or garbage collection) releases it with sift_workspace_free.
 *   Chains attached to it keep it alive in C (sift counts them), so a
 *   closed workspace stays valid for them; only attaching it again is
 *   an error.
 */
#include "sift_py.h"

typedef struct {
    PyObject_HEAD sift_workspace *ws;
} SiftPyWorkspace;

static void ws_dealloc(SiftPyWorkspace *self)
{
    sift_workspace_free(self->ws);
    self->ws = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ws_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"n_vocab", NULL};
    long long n_vocab = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$L:Workspace", kwlist, &n_vocab))
        return NULL;
    if (n_vocab < 0 || n_vocab > INT32_MAX)
        return siftpy_raise_msg(SIFT_E_ARG, -1, "n_vocab = %lld must be in [0, 2^31 - 1]", n_vocab);
    sift_workspace_params p;
    sift_workspace_params_init(&p);
    p.n_vocab = (int32_t)n_vocab;
    SiftPyWorkspace *self = (SiftPyWorkspace *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    sift_error err;
    sift_status st = sift_workspace_new(&self->ws, &p, &err);
    if (st != SIFT_OK) {
        Py_DECREF(self);
        return siftpy_raise(st, &err);
    }
    return (PyObject *)self;
}

sift_workspace *siftpy_workspace_ptr(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &SiftPyWorkspace_Type)) {
        PyErr_Format(PyExc_TypeError, "expected a sift.Workspace or None, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    SiftPyWorkspace *w = (SiftPyWorkspace *)obj;
    if (!w->ws)
        siftpy_raise_msg(SIFT_E_STATE, -1, "this workspace is closed");
    return w->ws;
}

static PyObject *ws_close(SiftPyWorkspace *self, PyObject *unused)
{
    (void)unused;
    sift_workspace_free(self->ws);
    self->ws = NULL;
    Py_RETURN_NONE;
}

static PyObject *ws_enter(SiftPyWorkspace *self, PyObject *unused)
{
    (void)unused;
    if (!self->ws)
        return siftpy_raise_msg(SIFT_E_STATE, -1, "this workspace is closed");
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *ws_exit(SiftPyWorkspace *self, PyObject *args)
{
    (void)args;
    return ws_close(self, NULL);
}

static PyObject *ws_closed(SiftPyWorkspace *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->ws == NULL);
}

static PyMethodDef ws_methods[] = {
    {"close", (PyCFunction)ws_close, METH_NOARGS,
     "close()\n\nRelease this handle (sift_workspace_free); chains attached keep the\n"
     "memory until they detach or are freed. Closing twice is a no-op."},
    {"__enter__", (PyCFunction)ws_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)ws_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ws_getset[] = {{"closed", (getter)ws_closed, NULL, "True after close().", NULL},
                                  {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject SiftPyWorkspace_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sift.Workspace",
    .tp_basicsize = sizeof(SiftPyWorkspace),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Workspace(*, n_vocab=0)\n\nScratch memory that chains share (sift_workspace): attach "
        "it with\nchain.set_workspace(ws); one call at a time uses it.",
    .tp_new = ws_new,
    .tp_dealloc = (destructor)ws_dealloc,
    .tp_methods = ws_methods,
    .tp_getset = ws_getset,
};

int siftpy_workspace_init(PyObject *module)
{
    if (PyType_Ready(&SiftPyWorkspace_Type) < 0)
        return -1;
    Py_INCREF(&SiftPyWorkspace_Type);
    return PyModule_AddObject(module, "Workspace", (PyObject *)&SiftPyWorkspace_Type);
}
