"""BM25 scored densely: every document holding a query term gets its score in one numpy array,
a term at a time, and the best are taken from it. For an index whose postings are read from
disk a query at a time (adapters.index_db): no pruning is needed to be fast, since a term held
by every file costs one vectorised pass, so the scores are exact for every document.

The formula and the order of its operations are `postings.Postings.score`'s (terms rarest
first, ties by term; `idf·tf / ((tf + a) + c·length)`), so each document's score is the same
float as the in-memory index's (tests/unit/adapters/test_index_db.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

import numpy as np

from margin.core.retrieval.bm25 import length_norm
from margin.core.retrieval.ranking import _K1 as K1


class Scorable(Protocol):
    """A term's postings as `bm25` reads them: how many documents hold the term, and adding its
    BM25 to the scores by document."""

    @property
    def df(self) -> int: ...

    def add_to(self, scores: np.ndarray, lengths: np.ndarray, idf: float, a: float, c: float) -> None: ...


class Posting:
    """One term's documents and term frequencies, sorted by document."""

    __slots__ = ("docs", "tfs")

    def __init__(self, docs: np.ndarray, tfs: np.ndarray) -> None:
        self.docs, self.tfs = docs, tfs

    @property
    def df(self) -> int:
        return len(self.docs)

    def add_to(self, scores: np.ndarray, lengths: np.ndarray, idf: float, a: float, c: float) -> None:
        """idf·tf / ((tf + a) + c·length) added to each document's score, in place (+ and ·
        commute exactly)."""
        tfs = self.tfs.astype(np.float64)
        norm = lengths[self.docs]
        norm *= c
        norm += tfs + a
        tfs *= idf
        tfs /= norm
        scores[self.docs] += tfs


def bm25(postings: Mapping[str, Scorable], documents: int, total_length: int, lengths: np.ndarray,
         b: float, pool: int) -> dict[int, float]:
    """The best `pool` documents by BM25 over `postings` (term → posting), with their scores:
    `Postings.score`'s formula and order of operations (terms rarest first, ties by term), so
    the same floats. Documents tied with the `pool`-th are all returned."""
    if not documents or not postings:
        return {}
    a, c = length_norm(K1, b, documents, total_length)
    entries = sorted(((math.log(1.0 + (documents - p.df + 0.5) / (p.df + 0.5)) * (K1 + 1.0), term, p)
                      for term, p in postings.items() if p.df), key=lambda e: (-e[0], e[1]))
    scores = np.zeros(len(lengths))
    for idf, _, posting in entries:
        posting.add_to(scores, lengths, idf, a, c)
    found = best(scores, pool)
    return dict(zip(found.tolist(), scores[found].tolist(), strict=True))


SAMPLE_STEP = 8
"""`best` reads every SAMPLE_STEP-th score first, for a floor under the pool's"""


def best(scores: np.ndarray, pool: int) -> np.ndarray:
    """The documents (in order) whose score is above 0 and at least the `pool`-th best's (all
    those above 0 when at most `pool` are). Scores are never below 0.

    Partitioning every document's score cost about 1 ms a field at 100,000 files, most of them
    above 0 when a term is common. The `pool`-th best of every SAMPLE_STEP-th score is at most
    the `pool`-th best of them all (a part holds no more scores above a floor than the whole),
    so only the scores at least that high, about pool·SAMPLE_STEP, are partitioned. (Masks,
    not np.flatnonzero(scores): a float array's non-zeros are found several times slower.)"""
    above = scores > 0
    count = int(np.count_nonzero(above))
    if count <= pool:
        return np.flatnonzero(above)
    found = None if 2 * count > len(scores) else np.flatnonzero(above)
    held = scores if found is None else scores[found]
    sample = held[::SAMPLE_STEP]
    if len(sample) > pool and (low := np.partition(sample, len(sample) - pool)[len(sample) - pool]) > 0:
        at = np.flatnonzero(held >= low)  # every score at least the pool-th best: `pool` or more
    else:
        at = np.flatnonzero(held > 0)
    part = held[at]
    at = at[part >= np.partition(part, len(part) - pool)[len(part) - pool]]
    chosen: np.ndarray = at if found is None else found[at]
    return chosen
