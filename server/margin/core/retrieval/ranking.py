"""Ranking over a retrieval corpus: the files a query's terms, the git signals and the open and
edited files make best (`score_files`), then the best line windows of those files (`search`).

A `Corpus` is what ranking reads: the code and path BM25 scores of the best documents, file ids
and document numbers each way, a term's idf and a file's indexed form. The index in memory
(core.retrieval.index) and the index on disk (adapters.index_db) are both corpora, so they rank
alike: the formula is `rank.py`'s.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from itertools import chain, repeat
from operator import floordiv
from typing import Protocol

from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.rank import FACT_TYPE, FileScore, Hit, Weights, combine
from margin.core.retrieval.signals import Signals
from margin.core.retrieval.terms import text_terms

WINDOW_LINES = 30
WINDOW_STRIDE = 10
CANDIDATE_POOL = 200
"""Files whose code score is exact at query time (the corpus's `pool`): past the best 200 by
code alone, a file can still be ranked through its path, history or co-change, with its code
score possibly under-counted. A workspace this small is scored exactly."""
_K1 = 1.2
CONTENT_B, PATH_B = 0.75, 0.3
"""BM25's k1 (`_K1`, windows too) and b for the code and the path fields, whichever index holds
them (core.retrieval.index in memory, adapters.index_db on disk)"""


class Names(Protocol):
    def __getitem__(self, doc: int, /) -> str: ...


class Corpus(Protocol):
    weights: Weights

    def content_scores(self, terms: list[str], pool: int) -> dict[int, float]:
        """The code field's BM25 of documents holding a term: exact for the best `pool`."""
        ...

    def path_scores(self, terms: list[str], pool: int) -> dict[int, float]:
        """The path field's, the same way."""
        ...

    def docs_of(self, file_ids: Iterable[str]) -> dict[str, int]:
        """The document numbers of those of `file_ids` that are indexed."""
        ...

    def names_of(self, docs: Iterable[int]) -> Names:
        """The file id of each of `docs` (a mapping that holds at least those)."""
        ...

    def idf(self, term: str) -> float: ...

    def file_data(self, file_id: str) -> FileData | None: ...


def score_files(corpus: Corpus, terms: list[str], limit: int, signals: Signals | None,
                exclude: Collection[str]) -> list[FileScore]:
    """The best `limit` files, with every component of each file's score."""
    w = corpus.weights
    pool = max(CANDIDATE_POOL, 4 * limit)
    # Keyed by document number until the best are chosen.
    similarity = corpus.content_scores(terms, pool)
    if w.path_weight:
        _add(similarity, corpus.path_scores(terms, pool), w.path_weight)
    history = signals.history if signals else None
    if history is not None and w.subject_weight:
        scored = history.subjects.score(terms, pool)
        docs = corpus.docs_of(scored)
        _add(similarity, {docs[p]: s for p, s in scored.items() if p in docs}, w.subject_weight)
    priority: dict[int, float] = {}
    if history is not None and w.feedback and similarity:
        near = history.cochange(_best(similarity, w.feedback_files, corpus.names_of))
        docs = corpus.docs_of(near)
        priority = {docs[p]: w.feedback * s for p, s in near.items() if p in docs}
    if signals is not None:
        context = signals.context_files()
        near = history.cochange(context) if history is not None and context else {}
        docs = corpus.docs_of(chain(near, signals.edited))
        for p, s in near.items():
            if p in docs and s > priority.get(doc := docs[p], 0.0):
                priority[doc] = s
        for path in signals.edited:
            if path in docs:
                priority[docs[path]] = 1.0
    recency = history.recency if history is not None else {}
    top = max(similarity.values(), default=0.0) or 1.0
    for doc in priority.keys() - similarity.keys():
        similarity[doc] = 0.0
    excluded = exclude if isinstance(exclude, (set, frozenset)) else set(exclude)
    pri_get, rec_get = priority.get, recency.get
    # combine(), inlined with the same operations: a tuple per candidate, objects for the best.
    ws, wp, wr, wt = w.similarity, w.priority, w.recency, w.type * FACT_TYPE
    known = {d: ws * (s / top) + wp * pri_get(d, 0.0) for d, s in similarity.items()}
    """each candidate's score but its recency's part (and the type's), which needs its name"""
    reach = _within_reach(known, limit, corpus.names_of, excluded, lambda p, f: p + wr * rec_get(f, 0.0) + wt,
                          wr * max(recency.values(), default=0.0), wt)
    names = corpus.names_of(reach)
    keyed = [(-(ws * (similarity[d] / top) + wp * pri_get(d, 0.0) + wr * rec_get(f, 0.0) + wt), f, d)
             for d in reach if (f := names[d]) not in excluded]
    return [FileScore(f, -neg, similarity[d] / top, pri_get(d, 0.0), rec_get(f, 0.0))
            for neg, f, d in heapq.nsmallest(limit, keyed)]


def _within_reach(known: dict[int, float], limit: int, names_of: Callable[[Iterable[int]], Names],
                  excluded: Collection[str], score: Callable[[float, str], float], most: float,
                  last: float) -> list[int]:
    """The candidates that can be among the best `limit`, to look up names for (a query has
    ~1,800 candidates, a name each to look up on disk): `known[d] + most + last` bounds a
    candidate's score from above (`most`: the largest part the name can add; float sums
    grow with their terms, so the bound is never below the score `score(known[d], name)`
    computes), and the `limit`-th best score of the candidates best by `known` that are not
    excluded bounds the `limit`-th best score from below. A candidate whose bound is below it
    cannot be ranked (ties are kept: they are broken by name)."""
    first = heapq.nlargest(limit + len(excluded), known, key=known.__getitem__)
    if len(first) == len(known):
        return first
    names = names_of(first)
    sure = sorted((score(known[d], f) for d in first if (f := names[d]) not in excluded), reverse=True)
    if len(sure) < limit:
        return list(known)
    cut = sure[limit - 1]
    return [d for d, value in known.items() if value + most + last >= cut]


def search(corpus: Corpus, query: str, *, limit: int = 8, signals: Signals | None = None,
           exclude: Collection[str] = (), per_file: int = 2) -> list[Hit]:
    """The best `limit` line windows (`WINDOW_LINES` long, at most `per_file` per file, not
    overlapping) from the best files by `score_files`; files in `exclude` are never returned
    (they still count as context through `signals`)."""
    terms = query_terms(query)
    ranked = score_files(corpus, terms, max(limit, 4), signals, exclude)
    idf = {t: corpus.idf(t) for t in terms}
    found = []
    for fs in ranked:
        entry = corpus.file_data(fs.file_id)
        if entry is None:  # removed by another server since it was scored
            continue
        for start, end, window_score in best_windows(entry, idf, per_file):
            found.append((fs, start, end, window_score))
    top = max((f[3] for f in found), default=0.0) or 1.0
    hits = []
    for fs, start, end, window_score in found:
        sim = (fs.similarity + window_score / top) / 2
        hits.append(Hit(fs.file_id, start, end, combine(corpus.weights, sim, fs.priority, fs.recency),
                        sim, fs.priority, fs.recency, FACT_TYPE))
    hits.sort(key=lambda h: (-h.score, h.file_id, h.start_line))
    return hits[:limit]


def best_windows(entry: FileData, idf: dict[str, float], per_file: int) -> list[tuple[int, int, float]]:
    """The best `per_file` line windows of a file for terms weighted by `idf`: (start, end, score)."""
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


def query_terms(query: str) -> list[str]:
    """A query's distinct terms, in order."""
    return list(dict.fromkeys(text_terms(query)))


def _best(scores: dict[int, float], k: int, names_of: Callable[[Iterable[int]], Names]) -> list[str]:
    """The `k` best documents' names, ties broken by name: the same as `heapq.nsmallest(k,
    scores, key=lambda d: (-scores[d], names[d]))`, without a key call per document, and the
    names looked up for the best (and those tied with the `k`-th) only."""
    if k <= 0:
        return []
    floor = heapq.nlargest(k, scores.values())[-1] if len(scores) > k else float("-inf")
    docs = [d for d, v in scores.items() if v >= floor]
    names = names_of(docs)
    return [f for _, f in sorted((-scores[d], names[d]) for d in docs)[:k]]


def _add(into: dict[int, float], scores: dict[int, float], weight: float) -> None:
    for key, value in scores.items():
        into[key] = into.get(key, 0.0) + weight * value
