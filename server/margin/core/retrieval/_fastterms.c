/* filedata.from_text's tokenising in C: the same terms, counts and line numbers as the Python
 * (terms.line_terms, then filedata.from_text's grouping), about seven times faster. Optional: the
 * package builds it when a C compiler is there (hatch_build.py) and falls back to the Python.
 * tests/unit/core/test_fastterms.py checks both give identical output.
 *
 * Words are runs of [A-Za-z0-9_] (every other character, ASCII or not, separates them); a word's
 * parts are the regex terms._PARTS's matches between underscores, lowercased and stemmed
 * (terms.stem); a part is kept when it is longer than one character and not a stopword; a word of
 * several parts adds all of them joined. The stopwords come from terms.STOPWORDS (set_stopwords).
 *
 * The text is read in place (any str kind) with the GIL released; each call has its own state. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define UP(c) ((c) >= 'A' && (c) <= 'Z')
#define LO(c) ((c) >= 'a' && (c) <= 'z')
#define DI(c) ((c) >= '0' && (c) <= '9')
#define WORDC(c) (UP(c) || LO(c) || DI(c) || (c) == '_')

/* ---- stopwords: a sorted table of strings, set once from Python ---- */
static char **stop_words = NULL;
static size_t *stop_lens = NULL;
static Py_ssize_t stop_count = 0;

#define STOP_SHORT 16
static unsigned char stop_bucket[256][STOP_SHORT]; /* whether any stopword has this first byte and length */

static int is_stop(const char *s, size_t n) {
    if (n == 0 || (n < STOP_SHORT && !stop_bucket[(unsigned char)s[0]][n])) return 0;
    Py_ssize_t lo = 0, hi = stop_count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        size_t m = stop_lens[mid] < n ? stop_lens[mid] : n;
        int c = memcmp(stop_words[mid], s, m);
        if (c == 0) c = stop_lens[mid] < n ? -1 : stop_lens[mid] > n ? 1 : 0;
        if (c == 0) return 1;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return 0;
}

static int ends(const char *s, size_t n, const char *suffix) {
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* terms.stem, in place; the new length */
static size_t stem(char *s, size_t n) {
    if (n > 4 && ends(s, n, "ies")) { s[n - 3] = 'y'; return n - 2; }
    if (n > 3 && s[n - 1] == 's' && !ends(s, n, "ss") && !ends(s, n, "us") && !ends(s, n, "is")) return n - 1;
    if (n > 5 && ends(s, n, "ing")) return n - 3;
    if (n > 4 && ends(s, n, "ed") && !ends(s, n, "eed")) return n - 2;
    return n;
}

/* ---- one call's state: distinct terms in an open-addressing table, (term, line) pairs ---- */
typedef struct { size_t off, n; Py_ssize_t count, last, rank; uint64_t prefix; } Term;
typedef struct {
    Term *terms; Py_ssize_t nterms, capterms;
    Py_ssize_t *slots; size_t nslots;
    char *chars; size_t nchars, capchars;
    Py_ssize_t *pairs; size_t npairs, cappairs;
    char *word; size_t capword;          /* the current word's parts, lowercased, back to back */
    size_t *parts; size_t capparts;      /* their (start, length) */
    int failed;
} State;

static int grow(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*buf, cap2 * item);
    if (!p) return -1;
    *buf = p; *cap = cap2;
    return 0;
}

static uint64_t hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int rehash(State *st, size_t nslots) {
    Py_ssize_t *slots = malloc(sizeof(Py_ssize_t) * nslots);
    if (!slots) return -1;
    for (size_t i = 0; i < nslots; i++) slots[i] = -1;
    for (Py_ssize_t t = 0; t < st->nterms; t++) {
        size_t h = hash(st->chars + st->terms[t].off, st->terms[t].n) & (nslots - 1);
        while (slots[h] >= 0) h = (h + 1) & (nslots - 1);
        slots[h] = t;
    }
    free(st->slots);
    st->slots = slots; st->nslots = nslots;
    return 0;
}

static int pair(State *st, Py_ssize_t term, Py_ssize_t line) {
    if (grow((void **)&st->pairs, &st->cappairs, st->npairs + 2, sizeof(Py_ssize_t))) return -1;
    st->pairs[st->npairs++] = term;
    st->pairs[st->npairs++] = line;
    return 0;
}

/* `s` (n bytes) occurs on `line`: counted once a line */
static int add(State *st, const char *s, size_t n, Py_ssize_t line) {
    if ((size_t)st->nterms * 2 >= st->nslots && rehash(st, st->nslots * 2)) return -1;
    size_t h = hash(s, n) & (st->nslots - 1);
    while (st->slots[h] >= 0) {
        Py_ssize_t t = st->slots[h];
        Term *term = &st->terms[t];
        if (term->n == n && memcmp(st->chars + term->off, s, n) == 0) {
            if (term->last == line) return 0;
            term->count++; term->last = line;
            return pair(st, t, line);
        }
        h = (h + 1) & (st->nslots - 1);
    }
    size_t cap = (size_t)st->capterms;
    if (grow((void **)&st->terms, &cap, (size_t)st->nterms + 1, sizeof(Term))) return -1;
    st->capterms = (Py_ssize_t)cap;
    if (grow((void **)&st->chars, &st->capchars, st->nchars + n, 1)) return -1;
    Term *term = &st->terms[st->nterms];
    term->off = st->nchars; term->n = n; term->count = 1; term->last = line;
    memcpy(st->chars + st->nchars, s, n);
    st->nchars += n;
    st->slots[h] = st->nterms;
    return pair(st, st->nterms++, line);
}

/* the word held in st->word[0..n) (its characters as read), on `line` */
static int word(State *st, size_t n, Py_ssize_t line) {
    char *w = st->word;
    /* at most one part a character: (start, length) pairs, written after the word's bytes */
    if (grow((void **)&st->parts, &st->capparts, 2 * n, sizeof(size_t))) return -1;
    size_t np = 0, i = 0, out = 0;
    char *lower = w + n;                 /* the parts, lowercased and stemmed, back to back */
    while (i < n) {
        char c = w[i];
        size_t b;
        if (UP(c)) {
            size_t j = i;
            while (j < n && UP(w[j])) j++;
            if (j - i >= 2 && j < n && LO(w[j])) b = j - 1;                       /* [A-Z]+(?=[A-Z][a-z]) */
            else if (j - i == 1 && j < n && LO(w[j])) { b = j; while (b < n && LO(w[b])) b++; } /* [A-Z]?[a-z]+ */
            else b = j;                                                            /* [A-Z]+ */
        } else if (LO(c)) { b = i; while (b < n && LO(w[b])) b++; }
        else if (DI(c)) { b = i; while (b < n && DI(w[b])) b++; }
        else { i++; continue; }                                                    /* "_" */
        size_t k = b - i;
        for (size_t q = 0; q < k; q++) { char ch = w[i + q]; lower[out + q] = UP(ch) ? (char)(ch + 32) : ch; }
        k = stem(lower + out, k);
        st->parts[2 * np] = out; st->parts[2 * np + 1] = k;
        np++; out += k; i = b;
    }
    for (size_t p = 0; p < np; p++) {
        size_t len = st->parts[2 * p + 1];
        if (len > 1 && !is_stop(lower + st->parts[2 * p], len) && add(st, lower + st->parts[2 * p], len, line)) return -1;
    }
    if (np > 1 && add(st, lower, out, line)) return -1;  /* every part joined */
    return 0;
}

/* the first 8 bytes as a big-endian number (0-padded): ordering by it orders by those bytes */
static uint64_t prefix_of(const char *s, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) v = (v << 8) | (i < n ? (unsigned char)s[i] : 0);
    return v;
}

static int cmp_terms(const void *a, const void *b, void *ctx) {
    State *st = ctx;
    const Term *x = &st->terms[*(const Py_ssize_t *)a], *y = &st->terms[*(const Py_ssize_t *)b];
    if (x->prefix != y->prefix) return x->prefix < y->prefix ? -1 : 1;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = n > 8 ? memcmp(st->chars + x->off + 8, st->chars + y->off + 8, n - 8) : 0;
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* qsort with a context, portably: a small merge sort */
static void sort_terms(Py_ssize_t *v, Py_ssize_t *tmp, Py_ssize_t n, State *st) {
    if (n < 2) return;
    Py_ssize_t h = n / 2;
    sort_terms(v, tmp, h, st);
    sort_terms(v + h, tmp, n - h, st);
    Py_ssize_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_terms(&v[j], &v[i], st) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, sizeof(Py_ssize_t) * (size_t)n);
}

static void release(State *st) {
    free(st->terms); free(st->slots); free(st->chars); free(st->pairs); free(st->word); free(st->parts);
}

/* scan the text: every word's terms with the lines they are on; the number of lines (-1: out of
 * memory). One function a str kind (1, 2 or 4 bytes a character). */
#define SCAN(NAME, CHAR)                                                                            \
static Py_ssize_t NAME(State *st, const CHAR *text, Py_ssize_t length) {                          \
    Py_ssize_t line = 0, i = 0;                                                                   \
    while (i < length) {                                                                          \
        CHAR c = text[i];                                                                         \
        if (c == '\n') { line++; i++; continue; }                                                \
        if (!(c < 128 && WORDC(c))) { i++; continue; }                                            \
        Py_ssize_t j = i + 1;                                                                     \
        while (j < length && text[j] < 128 && WORDC(text[j])) j++;                                \
        size_t n = (size_t)(j - i);                                                               \
        if (grow((void **)&st->word, &st->capword, 2 * n, 1)) return -1;                          \
        for (size_t q = 0; q < n; q++) st->word[q] = (char)text[i + (Py_ssize_t)q];               \
        if (word(st, n, line)) return -1;                                                         \
        i = j;                                                                                    \
    }                                                                                             \
    return line + 1;                                                                              \
}
SCAN(scan1, Py_UCS1)
SCAN(scan2, Py_UCS2)
SCAN(scan4, Py_UCS4)

static Py_ssize_t scan(State *st, int kind, const void *data, Py_ssize_t length) {
    return kind == PyUnicode_1BYTE_KIND ? scan1(st, data, length)
         : kind == PyUnicode_2BYTE_KIND ? scan2(st, data, length) : scan4(st, data, length);
}

static PyObject *from_text(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) { PyErr_SetString(PyExc_TypeError, "from_text expects a str"); return NULL; }
    State st;
    memset(&st, 0, sizeof st);
    if (rehash(&st, 1024)) return PyErr_NoMemory();
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t length = PyUnicode_GET_LENGTH(arg), lines, *order = NULL, *tmp = NULL;
    Py_BEGIN_ALLOW_THREADS
    lines = scan(&st, kind, data, length);
    if (lines >= 0) {
        order = malloc(sizeof(Py_ssize_t) * (size_t)(st.nterms + 1));
        tmp = malloc(sizeof(Py_ssize_t) * (size_t)(st.nterms + 1));
        if (order && tmp) {
            for (Py_ssize_t t = 0; t < st.nterms; t++) {
                order[t] = t;
                st.terms[t].prefix = prefix_of(st.chars + st.terms[t].off, st.terms[t].n);
            }
            sort_terms(order, tmp, st.nterms, &st);
        }
    }
    Py_END_ALLOW_THREADS
    if (lines < 0 || !order || !tmp) { free(order); free(tmp); release(&st); return PyErr_NoMemory(); }
    /* ranks and where each term's line numbers start (tmp reused) */
    size_t chars = 0;
    Py_ssize_t total = 0, nt = st.nterms;
    for (Py_ssize_t r = 0; r < nt; r++) {
        Term *t = &st.terms[order[r]];
        t->rank = r; tmp[r] = total; total += t->count; chars += t->n + 1;
    }
    int wide = lines >= 65536 ? 4 : 2;
    PyObject *terms = PyUnicode_New(chars ? (Py_ssize_t)chars - 1 : 0, 127);
    PyObject *counts = PyBytes_FromStringAndSize(NULL, nt * wide);
    PyObject *positions = PyBytes_FromStringAndSize(NULL, total * wide);
    if (!terms || !counts || !positions) {
        Py_XDECREF(terms); Py_XDECREF(counts); Py_XDECREF(positions);
        free(order); free(tmp); release(&st);
        return NULL;
    }
    char *tp = (char *)PyUnicode_DATA(terms), *cp = PyBytes_AS_STRING(counts), *pp = PyBytes_AS_STRING(positions);
    for (Py_ssize_t r = 0; r < nt; r++) {
        Term *t = &st.terms[order[r]];
        if (r) *tp++ = ' ';
        memcpy(tp, st.chars + t->off, t->n); tp += t->n;
        if (wide == 2) { uint16_t v = (uint16_t)t->count; memcpy(cp + 2 * r, &v, 2); }
        else { uint32_t v = (uint32_t)t->count; memcpy(cp + 4 * r, &v, 4); }
    }
    for (size_t p = 0; p < st.npairs; p += 2) {  /* in line order: each term's lines ascend */
        Py_ssize_t at = tmp[st.terms[st.pairs[p]].rank]++;
        if (wide == 2) { uint16_t v = (uint16_t)st.pairs[p + 1]; memcpy(pp + 2 * at, &v, 2); }
        else { uint32_t v = (uint32_t)st.pairs[p + 1]; memcpy(pp + 4 * at, &v, 4); }
    }
    free(order); free(tmp); release(&st);
    return Py_BuildValue("(nNNN)", lines, terms, counts, positions);
}

static PyObject *set_stopwords(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "set_stopwords expects a sorted sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    char **words = calloc((size_t)n + 1, sizeof(char *));
    size_t *lens = calloc((size_t)n + 1, sizeof(size_t));
    if (!words || !lens) { free(words); free(lens); Py_DECREF(seq); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &len);
        if (!s || (words[i] = malloc((size_t)len + 1)) == NULL) {
            for (Py_ssize_t k = 0; k < i; k++) free(words[k]);
            free(words); free(lens); Py_DECREF(seq);
            return s ? PyErr_NoMemory() : NULL;
        }
        memcpy(words[i], s, (size_t)len + 1);
        lens[i] = (size_t)len;
    }
    Py_DECREF(seq);
    for (Py_ssize_t i = 0; i < stop_count; i++) free(stop_words[i]);
    free(stop_words); free(stop_lens);
    stop_words = words; stop_lens = lens; stop_count = n;
    memset(stop_bucket, 0, sizeof stop_bucket);
    for (Py_ssize_t i = 0; i < n; i++)
        if (lens[i] && lens[i] < STOP_SHORT) stop_bucket[(unsigned char)words[i][0]][lens[i]] = 1;
    Py_RETURN_NONE;
}

/* ---- KeyNumbers: a number for each distinct key, in the order first seen (index_rows.FreshRows) ---- */
typedef struct { uint32_t check; int32_t number; } Slot;  /* check: the hash's high bits; number -1: empty */

typedef struct {
    PyObject_HEAD
    Slot *slots; size_t nslots;
    uint64_t *hashes;                    /* a key number → its hash */
    size_t *offs; size_t capoffs;        /* a key number → where its bytes start in chars (one more at the end) */
    char *chars; size_t nchars, capchars;
    Py_ssize_t count;
} KeyNumbers;

static int keys_rehash(KeyNumbers *k, size_t nslots) {
    Slot *slots = malloc(sizeof(Slot) * nslots);
    if (!slots) return -1;
    for (size_t i = 0; i < nslots; i++) slots[i].number = -1;
    for (Py_ssize_t t = 0; t < k->count; t++) {
        size_t h = k->hashes[t] & (nslots - 1);
        while (slots[h].number >= 0) h = (h + 1) & (nslots - 1);
        slots[h].check = (uint32_t)(k->hashes[t] >> 32);
        slots[h].number = (int32_t)t;
    }
    free(k->slots);
    k->slots = slots; k->nslots = nslots;
    return 0;
}

/* the number of the key s[0..n), given one if new; -1 when out of memory or past 2**31 keys */
static Py_ssize_t keys_number(KeyNumbers *k, const char *s, size_t n) {
    if ((size_t)k->count * 2 >= k->nslots && keys_rehash(k, k->nslots * 2)) return -1;
    uint64_t hv = hash(s, n);
    uint32_t check = (uint32_t)(hv >> 32);
    size_t h = hv & (k->nslots - 1);
    while (k->slots[h].number >= 0) {
        Py_ssize_t t = k->slots[h].number;
        if (k->slots[h].check == check && k->offs[t + 1] - k->offs[t] == n && memcmp(k->chars + k->offs[t], s, n) == 0)
            return t;
        h = (h + 1) & (k->nslots - 1);
    }
    if (k->count >= INT32_MAX) return -1;
    size_t capoffs = k->capoffs;
    if (grow((void **)&k->offs, &k->capoffs, (size_t)k->count + 2, sizeof(size_t))) return -1;
    if (k->capoffs != capoffs) {
        uint64_t *hashes = realloc(k->hashes, sizeof(uint64_t) * k->capoffs);
        if (!hashes) return -1;
        k->hashes = hashes;
    }
    if (grow((void **)&k->chars, &k->capchars, k->nchars + n, 1)) return -1;
    memcpy(k->chars + k->nchars, s, n);
    k->nchars += n;
    k->hashes[k->count] = hv;
    k->offs[k->count + 1] = k->nchars;
    k->slots[h].check = check;
    k->slots[h].number = (int32_t)k->count;
    return k->count++;
}

static PyObject *keys_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) || (kwargs && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "KeyNumbers() takes no arguments");
        return NULL;
    }
    KeyNumbers *k = (KeyNumbers *)type->tp_alloc(type, 0);
    if (!k) return NULL;
    if (keys_rehash(k, 1024) || grow((void **)&k->offs, &k->capoffs, 1, sizeof(size_t))
            || !(k->hashes = malloc(sizeof(uint64_t) * k->capoffs))) {
        Py_DECREF(k);
        return PyErr_NoMemory();
    }
    k->offs[0] = 0;
    return (PyObject *)k;
}

static void keys_dealloc(KeyNumbers *k) {
    PyTypeObject *type = Py_TYPE(k);
    free(k->slots); free(k->hashes); free(k->offs); free(k->chars);
    type->tp_free((PyObject *)k);
    Py_DECREF(type);
}

static PyObject *keys_add(KeyNumbers *k, PyObject *arg) {
    if (!PyUnicode_Check(arg)) { PyErr_SetString(PyExc_TypeError, "KeyNumbers.add expects a str"); return NULL; }
    Py_ssize_t size;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &size);
    if (!s) return NULL;
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < size; i++) n += s[i] == ' ';
    n = size ? n + 1 : 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (!out) return NULL;
    char *o = PyBytes_AS_STRING(out);
    Py_ssize_t start = 0, at = 0;
    for (Py_ssize_t i = 0; i <= size && size; i++) {
        if (i < size && s[i] != ' ') continue;
        Py_ssize_t number = keys_number(k, s + start, (size_t)(i - start));
        if (number < 0) { Py_DECREF(out); return PyErr_NoMemory(); }
        int64_t v = number;
        memcpy(o + 8 * at++, &v, 8);
        start = i + 1;
    }
    return out;
}

static KeyNumbers *sorting;  /* the keys merge_keys compares (it runs with the GIL held) */

static int key_less(Py_ssize_t a, Py_ssize_t b) {
    size_t na = sorting->offs[a + 1] - sorting->offs[a], nb = sorting->offs[b + 1] - sorting->offs[b];
    int c = memcmp(sorting->chars + sorting->offs[a], sorting->chars + sorting->offs[b], na < nb ? na : nb);
    return c < 0 || (c == 0 && na < nb);
}

static void merge_keys(int64_t *v, int64_t *tmp, Py_ssize_t n) {
    if (n < 2) return;
    Py_ssize_t h = n / 2, i = 0, j = h, o = 0;
    merge_keys(v, tmp, h);
    merge_keys(v + h, tmp, n - h);
    while (i < h && j < n) tmp[o++] = key_less(v[j], v[i]) ? v[j++] : v[i++];
    while (i < h) tmp[o++] = v[i++];
    while (j < n) tmp[o++] = v[j++];
    memcpy(v, tmp, sizeof(int64_t) * (size_t)n);
}

static PyObject *keys_sorted(KeyNumbers *k, PyObject *unused) {
    PyObject *numbers = PyBytes_FromStringAndSize(NULL, k->count * (Py_ssize_t)sizeof(int64_t));
    int64_t *tmp = malloc(sizeof(int64_t) * ((size_t)k->count + 1));
    PyObject *list = PyList_New(k->count);
    if (!numbers || !tmp || !list) { Py_XDECREF(numbers); Py_XDECREF(list); free(tmp); return PyErr_NoMemory(); }
    int64_t *v = (int64_t *)PyBytes_AS_STRING(numbers);
    for (Py_ssize_t t = 0; t < k->count; t++) v[t] = t;
    sorting = k;
    merge_keys(v, tmp, k->count);
    free(tmp);
    for (Py_ssize_t r = 0; r < k->count; r++) {
        Py_ssize_t t = (Py_ssize_t)v[r];
        PyObject *key = PyUnicode_DecodeUTF8(k->chars + k->offs[t], (Py_ssize_t)(k->offs[t + 1] - k->offs[t]), "strict");
        if (!key) { Py_DECREF(list); Py_DECREF(numbers); return NULL; }
        PyList_SET_ITEM(list, r, key);
    }
    return Py_BuildValue("(NN)", list, numbers);
}

static Py_ssize_t keys_len(KeyNumbers *k) { return k->count; }

static PyMethodDef keys_methods[] = {
    {"add", (PyCFunction)keys_add, METH_O,
     "add(keys) -> bytes: the numbers of the space-separated keys (new ones numbered on from the "
     "last), as native int64s; \"\" holds no key."},
    {"sorted", (PyCFunction)keys_sorted, METH_NOARGS,
     "sorted() -> (keys, numbers): every key in sorted order, and their numbers as native int64s."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot keys_slots[] = {
    {Py_tp_new, keys_new}, {Py_tp_dealloc, keys_dealloc}, {Py_tp_methods, keys_methods},
    {Py_sq_length, keys_len}, {Py_tp_doc, "A number for each distinct key, in the order first seen."},
    {0, NULL}};

static PyType_Spec keys_spec = {"margin.core.retrieval._fastterms.KeyNumbers", sizeof(KeyNumbers), 0,
                                Py_TPFLAGS_DEFAULT, keys_slots};

static PyMethodDef methods[] = {
    {"from_text", from_text, METH_O,
     "from_text(text) -> (lines, terms, counts, positions): the line count, the sorted distinct terms "
     "joined by spaces, and the counts and line numbers as bytes of native 2-byte items (4-byte from "
     "65,536 lines), array('H') or array('I')'s."},
    {"set_stopwords", set_stopwords, METH_O, "set_stopwords(sorted_words): the parts never kept as terms."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastterms", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastterms(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *type = PyType_FromSpec(&keys_spec);
    if (!type || PyModule_AddObject(m, "KeyNumbers", type) < 0) { Py_XDECREF(type); Py_DECREF(m); return NULL; }
    return m;
}
