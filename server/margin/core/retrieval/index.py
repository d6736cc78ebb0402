"""The retrieval index: files → terms, kept one file at a time, ranked by `rank.py`'s formula.

Each file is kept as a `filedata.FileData`: its line count, its sorted distinct terms and, per
term, the sorted numbers of the lines holding it, in flat `array`s. From that: the file-level
BM25 field (`postings.Postings`: term frequency = lines holding the term; files numbered by the
index), the path field, and at query time any line window's term frequencies by bisecting the
line numbers, so windows of any size are scored without storing them. `put` re-indexes one file
in time proportional to that file; `search` scores files through the inverted index (only files
that share a query term), then windows inside the best files only.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Mapping
from itertools import chain, repeat
from operator import floordiv
from typing import Any

from margin.core.retrieval import filedata
from margin.core.retrieval.bm25 import Field
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.postings import Postings
from margin.core.retrieval.rank import DEFAULT_WEIGHTS, FACT_TYPE, FileScore, Hit, Weights, combine
from margin.core.retrieval.signals import Signals
from margin.core.retrieval.terms import path_terms, text_terms

WINDOW_LINES = 30
WINDOW_STRIDE = 10
EXPORT_VERSION = filedata.FORMAT
CANDIDATE_POOL = 200
"""Files whose code score is exact at query time (`Postings.score`'s pool): past the best 200 by
code alone, a file can still be ranked through its path, history or co-change, with its code
score possibly under-counted. A workspace this small is scored exactly."""
_K1 = 1.2


class RetrievalIndex:
    """See the package docstring for the API."""

    def __init__(self, weights: Weights = DEFAULT_WEIGHTS) -> None:
        self.weights = weights
        self._files: dict[str, FileData] = {}
        self._names: list[str] = []
        """File id by document number (`FileData.doc`); "" for a free number."""
        self._free: list[int] = []
        self._content = Postings(k1=_K1, b=0.75)
        self._paths: Field[int] = Field(k1=_K1, b=0.3)
        """Path terms, by document number too."""

    # ---- maintenance -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, file_id: object) -> bool:
        return file_id in self._files

    def files(self) -> list[str]:
        return list(self._files)

    def fingerprint(self, file_id: str) -> str | None:
        entry = self._files.get(file_id)
        return entry.fingerprint if entry else None

    def put(self, file_id: str, text: str, fingerprint: str) -> bool:
        """Index `text` as `file_id`; False (and nothing done) when `fingerprint` is unchanged."""
        entry = self._files.get(file_id)
        if entry is not None and entry.fingerprint == fingerprint:
            return False
        self._store(file_id, filedata.from_text(text, fingerprint))
        return True

    def remove(self, file_id: str) -> bool:
        entry = self._files.pop(file_id, None)
        if entry is None:
            return False
        self._content.remove(entry.doc, entry.term_list())
        self._paths.remove(entry.doc, path_terms(file_id))
        self._names[entry.doc] = ""
        self._free.append(entry.doc)
        return True

    def export_file(self, file_id: str) -> dict[str, Any]:
        """One file's indexed form, JSON-serialisable, for `import_file` to reload without
        re-reading or re-tokenising the file. Raises KeyError if the file is not indexed."""
        return self._files[file_id].export()

    def import_file(self, file_id: str, fingerprint: str, data: Mapping[str, Any]) -> bool:
        """Reload `export_file`'s output. False (nothing done) if `data` is from another version
        of the format (or damaged): the caller should `put` the file instead."""
        entry = filedata.load(data, fingerprint)
        if entry is None:
            return False
        self._store(file_id, entry)
        return True

    def _store(self, file_id: str, entry: FileData) -> None:
        self.remove(file_id)
        if self._free:
            entry.doc = self._free.pop()
        else:
            entry.doc = len(self._names)
            self._names.append("")
        self._files[file_id] = entry
        self._names[entry.doc] = file_id
        self._content.add(entry.doc, entry.term_list(), entry.counts)
        self._paths.add(entry.doc, Counter(path_terms(file_id)))

    # ---- ranking -----------------------------------------------------------------------------

    def rank_files(self, query: str, *, limit: int = 10, signals: Signals | None = None,
                   exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """The best `limit` files for `query`, as (file_id, final score), best first."""
        return [(s.file_id, s.score) for s in self.score_files(query, limit=limit, signals=signals,
                                                                 exclude=exclude)]

    def score_files(self, query: str, *, limit: int = 10, signals: Signals | None = None,
                    exclude: Collection[str] = ()) -> list[FileScore]:
        """`rank_files` with every component of each file's score."""
        return self._score_files(_query_terms(query), limit, signals, exclude)

    def _score_files(self, terms: list[str], limit: int, signals: Signals | None,
                     exclude: Collection[str]) -> list[FileScore]:
        w = self.weights
        files, names = self._files, self._names
        pool = max(CANDIDATE_POOL, 4 * limit)
        # Keyed by document number until the best are chosen.
        similarity = self._content.score(terms, pool)
        if w.path_weight:
            _add(similarity, self._paths.score(terms, pool), w.path_weight)
        history = signals.history if signals else None
        if history is not None and w.subject_weight:
            subjects = {files[p].doc: s for p, s in history.subjects.score(terms, pool).items() if p in files}
            _add(similarity, subjects, w.subject_weight)
        priority: dict[int, float] = {}
        if history is not None and w.feedback and similarity:
            priority = {files[p].doc: w.feedback * s for p, s in history.cochange(
                _best(similarity, w.feedback_files, names)).items() if p in files}
        if signals is not None:
            context = signals.context_files()
            if history is not None and context:
                for p, s in history.cochange(context).items():
                    if p in files and s > priority.get(doc := files[p].doc, 0.0):
                        priority[doc] = s
            for path in signals.edited:
                if path in files:
                    priority[files[path].doc] = 1.0
        recency = history.recency if history is not None else {}
        top = max(similarity.values(), default=0.0) or 1.0
        for doc in priority.keys() - similarity.keys():
            similarity[doc] = 0.0
        excluded = exclude if isinstance(exclude, (set, frozenset)) else set(exclude)
        pri_get, rec_get = priority.get, recency.get
        # combine(), inlined with the same operations: a tuple per candidate, objects for the best.
        ws, wp, wr, wt = w.similarity, w.priority, w.recency, w.type * FACT_TYPE
        keyed = [(-(ws * (s / top) + wp * pri_get(d, 0.0) + wr * rec_get(f, 0.0) + wt), f, d)
                 for d, s in similarity.items() if (f := names[d]) not in excluded]
        return [FileScore(f, -neg, similarity[d] / top, pri_get(d, 0.0), rec_get(f, 0.0))
                for neg, f, d in heapq.nsmallest(limit, keyed)]

    def search(self, query: str, *, limit: int = 8, signals: Signals | None = None,
               exclude: Collection[str] = (), per_file: int = 2) -> list[Hit]:
        """The best `limit` line windows (`WINDOW_LINES` long, at most `per_file` per file, not
        overlapping) from the best files by `score_files`; files in `exclude` are never
        returned (they still count as context through `signals`)."""
        terms = _query_terms(query)
        ranked = self._score_files(terms, max(limit, 4), signals, exclude)
        idf = {t: self._content.idf(t) for t in terms}
        found = []
        for fs in ranked:
            for start, end, window_score in self._best_windows(self._files[fs.file_id], idf, per_file):
                found.append((fs, start, end, window_score))
        top = max((f[3] for f in found), default=0.0) or 1.0
        hits = []
        for fs, start, end, window_score in found:
            sim = (fs.similarity + window_score / top) / 2
            hits.append(Hit(fs.file_id, start, end, combine(self.weights, sim, fs.priority, fs.recency),
                            sim, fs.priority, fs.recency, FACT_TYPE))
        hits.sort(key=lambda h: (-h.score, h.file_id, h.start_line))
        return hits[:limit]

    @staticmethod
    def _best_windows(entry: FileData, idf: dict[str, float], per_file: int) -> list[tuple[int, int, float]]:
        layout = _layout(entry)
        lines = entry.lines
        last = max(lines - WINDOW_LINES, 0)
        aligned = last // WINDOW_STRIDE + 1  # the windows starting at a multiple of the stride
        windows = aligned + (last % WINDOW_STRIDE != 0)  # and one ending at the last line
        # A window's term frequency is the sum of the stride-long runs of lines it covers: each
        # term's lines are counted by run (in C), then each run adds to the windows over it. The
        # parts are added in the terms' order, each window's once a term (the same floats as two
        # bisects a term in every window: tests/unit/core/retrieval/test_index.py).
        scores = [0.0] * windows
        for term, weight in idf.items():
            if weight <= 0 or (numbers := entry.line_numbers(layout, term)) is None:
                continue
            runs = Counter(map(floordiv, numbers, repeat(WINDOW_STRIDE)))
            tfs: dict[int, int] = {}
            for back in range(_RUNS):
                for run, count in runs.items():
                    if 0 <= (at := run - back) < aligned:
                        tfs[at] = tfs.get(at, 0) + count
            if windows > aligned and (tf := bisect_left(numbers, last + WINDOW_LINES) - bisect_left(numbers, last)):
                tfs[aligned] = tf
            for at, tf in tfs.items():
                scores[at] += weight * tf * (_K1 + 1) / (tf + _K1)
        # The best windows not overlapping, highest score first (ties: the earlier); where too
        # few score, the earliest window that does not overlap one chosen.
        starts = range(0, windows * WINDOW_STRIDE, WINDOW_STRIDE) if windows == aligned else \
            [*range(0, aligned * WINDOW_STRIDE, WINDOW_STRIDE), last]
        scored = sorted(((score, -start) for score, start in zip(scores, starts) if score), reverse=True)
        unscored = ((0.0, -start) for score, start in zip(scores, starts) if not score)
        chosen: list[tuple[int, int, float]] = []
        for score, neg_start in chain(scored, unscored):
            start = -neg_start
            if all(start >= e or start + WINDOW_LINES <= s for s, e, _ in chosen):
                chosen.append((start, min(start + WINDOW_LINES, lines), score))
                if len(chosen) == per_file or score == 0.0:
                    break
        return chosen


_RUNS = WINDOW_LINES // WINDOW_STRIDE
assert _RUNS * WINDOW_STRIDE == WINDOW_LINES, "a window covers whole stride-long runs of lines"


_LAYOUTS: dict[str, tuple[array[int], tuple[list[str], list[int]]]] = {}
LAYOUTS_KEPT = 64
"""Files whose term list and offsets are kept between searches (a search reads a few files,
and the next search mostly the same)."""


def _layout(entry: FileData) -> tuple[list[str], list[int]]:
    """`entry.layout()`, made once for the files searched lately (by the file's term string,
    and its counts' array: two files may hold the same terms)."""
    found = _LAYOUTS.get(entry.terms)
    if found is not None and found[0] is entry.counts:
        return found[1]
    layout = entry.layout()
    if len(_LAYOUTS) >= LAYOUTS_KEPT:
        _LAYOUTS.clear()
    _LAYOUTS[entry.terms] = (entry.counts, layout)
    return layout


def _query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(text_terms(query)))


def _best(scores: dict[int, float], k: int, names: list[str]) -> list[str]:
    """The `k` best documents' names, ties broken by name: the same as `heapq.nsmallest(k,
    scores, key=lambda d: (-scores[d], names[d]))`, without a key call per document."""
    if k <= 0:
        return []
    floor = heapq.nlargest(k, scores.values())[-1] if len(scores) > k else float("-inf")
    return [f for _, f in sorted((-v, names[d]) for d, v in scores.items() if v >= floor)[:k]]


def _add(into: dict[int, float], scores: dict[int, float], weight: float) -> None:
    for key, value in scores.items():
        into[key] = into.get(key, 0.0) + weight * value
