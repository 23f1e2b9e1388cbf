/*
 * errors.c - sift.SiftError and the one bridge from a C status to it.
 *
 * Every failed sift call becomes one exception type, a ValueError (the
 * engines turn ValueError into a request error), carrying the status
 * number and the place the C library named: .status, .status_name,
 * .message, .index, .line, .column, .offset, .source. The C contract
 * holds through the binding: a failed call changed nothing.
 */
#include "sift_py.h"

#include <stdarg.h>
#include <stdio.h>

PyObject *SiftPy_Error = NULL;

static int set_attrs(PyObject *exc, sift_status st, const char *message, int64_t index,
                     int32_t line, int32_t column, int64_t offset, const char *source)
{
    PyObject *vals[] = {
        PyLong_FromLong((long)st),
        PyUnicode_FromString(sift_status_str(st)),
        PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace"),
        PyLong_FromLongLong(index),
        PyLong_FromLong(line),
        PyLong_FromLong(column),
        PyLong_FromLongLong(offset),
        PyUnicode_DecodeUTF8(source, (Py_ssize_t)strlen(source), "replace"),
    };
    static const char *const names[] = {"status", "status_name", "message", "index",
                                        "line",   "column",      "offset",  "source"};
    int rc = 0;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        if (!vals[i] || (rc == 0 && PyObject_SetAttrString(exc, names[i], vals[i]) < 0))
            rc = -1;
        Py_XDECREF(vals[i]);
    }
    return rc;
}

static PyObject *raise_full(sift_status st, const char *message, int64_t index, int32_t line,
                            int32_t column, int64_t offset, const char *source)
{
    PyObject *exc = PyObject_CallFunction(SiftPy_Error, "s", message);
    if (!exc)
        return NULL;
    if (set_attrs(exc, st, message, index, line, column, offset, source) == 0)
        PyErr_SetObject(SiftPy_Error, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *siftpy_raise(sift_status st, const sift_error *err)
{
    if (st == SIFT_E_NOMEM)
        return PyErr_NoMemory();
    if (!err)
        return raise_full(st, sift_status_str(st), -1, 0, 0, -1, "");
    const char *msg = err->message[0] ? err->message : sift_status_str(st);
    return raise_full(st, msg, err->index, err->line, err->column, err->offset, err->source);
}

PyObject *siftpy_raise_msg(sift_status st, int64_t index, const char *fmt, ...)
{
    char msg[SIFT_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return raise_full(st, msg, index, 0, 0, -1, "");
}

PyObject *siftpy_busy(const char *what)
{
    return siftpy_raise_msg(SIFT_E_STATE, -1,
                            "%s is in use by another thread or by a callback of its own "
                            "(one thread at a time per object)",
                            what);
}

static PyObject *status_str(PyObject *self, PyObject *arg)
{
    (void)self;
    long st = PyLong_AsLong(arg);
    if (st == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(sift_status_str((sift_status)st));
}

static PyMethodDef error_methods[] = {
    {"status_str", status_str, METH_O,
     "status_str(status: int) -> str\n\nsift_status_str: a short description of a status."},
    {NULL, NULL, 0, NULL}};

int siftpy_errors_init(PyObject *module)
{
    SiftPy_Error = PyErr_NewExceptionWithDoc(
        "sift.SiftError",
        "A sift call failed; nothing changed.\n\n"
        "Attributes: status (int, sift_status), status_name, message (the C\n"
        "library's message, with its place: 'file:line:col: ...'), index (token\n"
        "id, row index, stage or slot the message names; -1 if none), line and\n"
        "column (1-based; 0 if none), offset (byte offset; -1 if none), source.",
        PyExc_ValueError, NULL);
    if (!SiftPy_Error)
        return -1;
    Py_INCREF(SiftPy_Error);
    if (PyModule_AddObject(module, "SiftError", SiftPy_Error) < 0) {
        Py_DECREF(SiftPy_Error);
        return -1;
    }
    return PyModule_AddFunctions(module, error_methods);
}
