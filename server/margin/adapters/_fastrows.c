/* BM25 straight from postings rows (adapters.index_rows): one term's rows, of several chunks,
 * added to a query's dense scores without decoding them into arrays first. The same floats as
 * core.retrieval.dense.Posting.add_to: for each document, in the same order of operations,
 * norm = length·c; norm += tf + a; v = tf·idf; v /= norm; scores[doc] += v (built with
 * -ffp-contract=off, so no step is fused). Optional: hatch_build.py builds it when a C compiler
 * is there; index_rows.Rows decodes the rows and uses numpy otherwise. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a 1-dimensional contiguous float64 buffer of `object`, writable if asked */
static int as_doubles(PyObject *object, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != 8 || view->ndim != 1 || !view->format || strcmp(view->format, "d") != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous float64 array", what);
        return -1;
    }
    return 0;
}

/* accumulate(scores, lengths, rows, starts, idf, a, c): every (doc, tf) of `rows` (bytes each,
 * one a chunk) whose chunk's first document is the same place of `starts`. */
static PyObject *accumulate(PyObject *self, PyObject *args) {
    Py_buffer scores_view, lengths_view;
    PyObject *scores_object, *lengths_object, *rows, *starts;
    double idf, a, c;
    if (!PyArg_ParseTuple(args, "OOO!O!ddd", &scores_object, &lengths_object, &PyList_Type, &rows, &PyList_Type,
                          &starts, &idf, &a, &c))
        return NULL;
    if (as_doubles(scores_object, &scores_view, 1, "scores")) return NULL;
    if (as_doubles(lengths_object, &lengths_view, 0, "lengths")) { PyBuffer_Release(&scores_view); return NULL; }
    PyObject *result = NULL;
    if (PyList_GET_SIZE(rows) != PyList_GET_SIZE(starts)) {
        PyErr_SetString(PyExc_ValueError, "rows and starts differ in length");
        goto done;
    }
    double *scores = scores_view.buf;
    const double *lengths = lengths_view.buf;
    Py_ssize_t documents = scores_view.shape[0] < lengths_view.shape[0] ? scores_view.shape[0] : lengths_view.shape[0];
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(starts, r));
        if (start == -1 && PyErr_Occurred()) goto done;
        if (!PyBytes_Check(row)) { PyErr_SetString(PyExc_TypeError, "a row must be bytes"); goto done; }
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(row);
        Py_ssize_t size = PyBytes_GET_SIZE(row);
        int wide = size ? p[0] : 0;
        if (size < 1 || (wide != 1 && wide != 2 && wide != 4) || (size - 1) % (2 + wide)) {
            PyErr_SetString(PyExc_ValueError, "a damaged postings row");
            goto done;
        }
        Py_ssize_t n = (size - 1) / (2 + wide);
        const unsigned char *offsets = p + 1, *tfs = p + 1 + 2 * n;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t doc = start + (Py_ssize_t)(offsets[2 * i] | offsets[2 * i + 1] << 8);
            uint32_t tf;
            if (wide == 1) tf = tfs[i];
            else if (wide == 2) tf = (uint32_t)tfs[2 * i] | (uint32_t)tfs[2 * i + 1] << 8;
            else tf = (uint32_t)tfs[4 * i] | (uint32_t)tfs[4 * i + 1] << 8 | (uint32_t)tfs[4 * i + 2] << 16
                      | (uint32_t)tfs[4 * i + 3] << 24;
            if (doc < 0 || doc >= documents) {
                PyErr_Format(PyExc_ValueError, "a postings row names document %zd of %zd", doc, documents);
                goto done;
            }
            double t = (double)tf, norm = lengths[doc] * c, v;
            norm += t + a;
            v = t * idf;
            v /= norm;
            scores[doc] += v;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&scores_view);
    PyBuffer_Release(&lengths_view);
    return result;
}

static PyMethodDef methods[] = {
    {"accumulate", accumulate, METH_VARARGS,
     "accumulate(scores, lengths, rows, starts, idf, a, c): add one term's BM25 to `scores` from its "
     "postings rows (index_rows' format), `starts` the first document of each row's chunk."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastrows", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastrows(void) { return PyModule_Create(&module); }
