/*
 * module.c - the sift._sift extension module: registers the types and
 * functions of the other files. The pure-Python package `sift` re-exports
 * them and adds the torch, Hugging Face and SGLang layers.
 */
#include "sift_py.h"

static PyObject *version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(sift_version());
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "version() -> str\n\nThe linked library's version."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef sift_module = {
    PyModuleDef_HEAD_INIT,
    "sift._sift",
    "The C extension of sift's Python package, over include/sift.h.",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__sift(void)
{
    PyObject *m = PyModule_Create(&sift_module);
    if (!m)
        return NULL;
    if (siftpy_errors_init(m) < 0 || siftpy_vocab_init(m) < 0 || siftpy_grammar_init(m) < 0 ||
        siftpy_chain_init(m) < 0 || siftpy_workspace_init(m) < 0 ||
        PyModule_AddFunctions(m, siftpy_batch_methods) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_NUMBER", (long)sift_version_number()) < 0 ||
        PyModule_AddIntConstant(m, "TOKEN_EOG", SIFT_TOKEN_EOG) < 0 ||
        PyModule_AddIntConstant(m, "TOKEN_SPECIAL", SIFT_TOKEN_SPECIAL) < 0 ||
        PyModule_AddIntConstant(m, "TOKEN_UNUSED", SIFT_TOKEN_UNUSED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
