/*
 * buffers.c - zero-copy views of the arrays Python callers pass.
 *
 * numpy arrays (and anything else with the buffer protocol) are read in
 * place through PyObject_GetBuffer; a torch tensor has no buffer protocol
 * in torch 1.13, so a CPU tensor goes through .numpy(), which shares its
 * memory; an object with only __array_interface__ goes through
 * numpy.asarray, which shares it too. Nothing is ever copied: a row sift
 * cannot read in place (wrong dtype, another device, a stride) is a
 * TypeError that says which, so a caller never pays for a hidden copy.
 */
#include "sift_py.h"

#include <string.h>

static const char *format_name(const char *fmt, Py_ssize_t itemsize)
{
    if (!fmt)
        return "bytes";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@' || *fmt == '!' || *fmt == '>')
        fmt++;
    switch (fmt[0]) {
    case 'f': return "float32";
    case 'd': return "float64";
    case 'e': return "float16";
    case 'b': return "int8";
    case 'B': return "uint8";
    case '?': return "bool";
    case 'h': return "int16";
    case 'H': return "uint16";
    case 'i': return itemsize == 4 ? "int32" : "int";
    case 'I': return itemsize == 4 ? "uint32" : "uint";
    case 'l':
    case 'q': return itemsize == 8 ? "int64" : "int32";
    case 'L':
    case 'Q': return itemsize == 8 ? "uint64" : "uint32";
    default: return fmt;
    }
}

static char kind_of(const char *fmt, Py_ssize_t itemsize)
{
    if (!fmt)
        fmt = "B";
    if (*fmt == '>' || *fmt == '!')
        return 0; /* big-endian: not what sift reads */
    while (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    if (fmt[1])
        return 0;
    switch (fmt[0]) {
    case 'f': return itemsize == 4 ? 'f' : 0;
    case 'i': return itemsize == 4 ? 'i' : 0;
    case 'I': return itemsize == 4 ? 'I' : 0;
    case 'l':
    case 'q': return itemsize == 8 ? 'l' : (itemsize == 4 ? 'i' : 0);
    case 'L':
    case 'Q': return itemsize == 4 ? 'I' : 0;
    default: return 0;
    }
}

static int kind_ok(char kind, unsigned kinds)
{
    return (kind == 'f' && (kinds & SIFTPY_F32)) || (kind == 'i' && (kinds & SIFTPY_I32)) ||
           (kind == 'l' && (kinds & SIFTPY_I64)) || (kind == 'I' && (kinds & SIFTPY_U32));
}

static const char *kinds_text(unsigned kinds)
{
    if (kinds == SIFTPY_F32)
        return "float32";
    if (kinds == (SIFTPY_I32 | SIFTPY_I64))
        return "int32 or int64";
    if (kinds == (SIFTPY_I32 | SIFTPY_U32))
        return "int32 or uint32";
    if (kinds == SIFTPY_I32)
        return "int32";
    return "another dtype";
}

/* A torch tensor: checks its device first (so a CUDA tensor gets a message
 * about the device, not about .numpy()), then returns tensor.numpy(). */
static PyObject *torch_numpy(PyObject *obj, const char *what)
{
    PyObject *dev = PyObject_GetAttrString(obj, "device");
    if (!dev)
        return NULL;
    PyObject *type = PyObject_GetAttrString(dev, "type");
    if (!type) {
        Py_DECREF(dev);
        return NULL;
    }
    int cpu = PyUnicode_Check(type) && PyUnicode_CompareWithASCIIString(type, "cpu") == 0;
    Py_DECREF(type);
    if (!cpu) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a tensor on device %S; sift reads host memory: copy the slice "
                     "or row to the CPU first (sift.torch.make_slices does)",
                     what, dev);
        Py_DECREF(dev);
        return NULL;
    }
    Py_DECREF(dev);
    PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
    if (!dtype)
        return NULL;
    PyObject *ds = PyObject_Str(dtype);
    Py_DECREF(dtype);
    if (!ds)
        return NULL;
    const char *d = PyUnicode_AsUTF8(ds);
    int supported = d && (!strcmp(d, "torch.float32") || !strcmp(d, "torch.int32") ||
                          !strcmp(d, "torch.int64"));
    if (!supported) {
        PyErr_Format(PyExc_TypeError,
                     "%s is a tensor of dtype %U; expected float32, int32 or int64", what, ds);
        Py_DECREF(ds);
        return NULL;
    }
    Py_DECREF(ds);
    PyObject *res = PyObject_CallMethod(obj, "numpy", NULL);
    if (!res && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        /* A tensor that requires grad: .detach() shares the memory too. */
        PyErr_Clear();
        PyObject *det = PyObject_CallMethod(obj, "detach", NULL);
        if (!det)
            return NULL;
        res = PyObject_CallMethod(det, "numpy", NULL);
        Py_DECREF(det);
    }
    return res;
}

static int is_torch_tensor(PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    for (; t; t = t->tp_base) {
        const char *n = t->tp_name;
        if (n && (!strncmp(n, "torch.", 6) || !strcmp(n, "Tensor") || !strcmp(n, "TensorBase") ||
                  !strcmp(n, "torch._C._TensorBase")))
            return 1;
    }
    return 0;
}

int siftpy_view_get(siftpy_view *v, PyObject *obj, unsigned kinds, int ndim, int writable,
                    const char *what)
{
    memset(v, 0, sizeof *v);
    PyObject *src = obj;
    if (!PyObject_CheckBuffer(obj)) {
        if (is_torch_tensor(obj)) {
            v->owner = torch_numpy(obj, what);
        } else if (PyObject_HasAttrString(obj, "__array_interface__")) {
            PyObject *np = PyImport_ImportModule("numpy");
            if (!np)
                return -1;
            v->owner = PyObject_CallMethod(np, "asarray", "O", obj);
            Py_DECREF(np);
        } else {
            PyErr_Format(PyExc_TypeError,
                         "%s must be a numpy array, a CPU torch tensor or a buffer, not %.200s",
                         what, Py_TYPE(obj)->tp_name);
            return -1;
        }
        if (!v->owner)
            return -1;
        src = v->owner;
    }
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(src, &v->buf, flags) < 0) {
        if (writable && (PyErr_ExceptionMatches(PyExc_BufferError) ||
                         PyErr_ExceptionMatches(PyExc_ValueError))) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s is read-only; sift writes into it", what);
        }
        Py_CLEAR(v->owner);
        return -1;
    }
    v->held = 1;
    Py_buffer *b = &v->buf;
    char kind = kind_of(b->format, b->itemsize);
    if (!kind_ok(kind, kinds)) {
        PyErr_Format(PyExc_TypeError, "%s has dtype %s; expected %s", what,
                     format_name(b->format, b->itemsize), kinds_text(kinds));
        goto fail;
    }
    if (b->ndim < 1 || b->ndim > 2 || (ndim > 0 && b->ndim != ndim)) {
        if (ndim > 0)
            PyErr_Format(PyExc_TypeError, "%s has %d dimensions; expected %d", what, b->ndim, ndim);
        else
            PyErr_Format(PyExc_TypeError, "%s has %d dimensions; expected 1 or 2", what, b->ndim);
        goto fail;
    }
    Py_ssize_t inner = b->ndim == 2 ? b->shape[1] : b->shape[0];
    Py_ssize_t inner_stride = b->strides ? b->strides[b->ndim - 1] : b->itemsize;
    if (inner > 1 && inner_stride != b->itemsize) {
        PyErr_Format(PyExc_TypeError,
                     "%s has stride %zd bytes between elements; sift reads contiguous rows "
                     "(itemsize %zd): pass a contiguous array",
                     what, inner_stride, b->itemsize);
        goto fail;
    }
    if (b->ndim == 2 && b->shape[0] > 1 && b->strides &&
        b->strides[0] != b->shape[1] * b->itemsize) {
        PyErr_Format(PyExc_TypeError,
                     "%s has stride %zd bytes between rows; sift reads C-contiguous arrays "
                     "(%zd bytes per row): pass a contiguous array",
                     what, b->strides[0], b->shape[1] * b->itemsize);
        goto fail;
    }
    v->data = b->buf;
    v->ndim = b->ndim;
    v->shape[0] = b->shape[0];
    v->shape[1] = b->ndim == 2 ? b->shape[1] : 1;
    v->itemsize = b->itemsize;
    v->kind = kind;
    return 0;
fail:
    siftpy_view_release(v);
    return -1;
}

void siftpy_view_release(siftpy_view *v)
{
    if (v->held)
        PyBuffer_Release(&v->buf);
    v->held = 0;
    Py_CLEAR(v->owner);
}
