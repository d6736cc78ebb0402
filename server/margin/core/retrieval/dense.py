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
    found = np.flatnonzero(scores)
    if len(found) > pool:  # the pool-th best (above 0, as every score is), from the fewer values
        held = scores if 2 * len(found) > len(scores) else scores[found]
        floor = np.partition(held, len(held) - pool)[len(held) - pool]
        found = found[scores[found] >= floor]
    return dict(zip(found.tolist(), scores[found].tolist(), strict=True))
