"""The code's BM25 field in compact form: term → the documents holding it, as packed integers.

`bm25.Field` keeps term → {document: tf} dicts, fine for the small path and commit-subject
fields; the code field of a large workspace holds millions of (term, file) pairs, most of its
terms in a single file. Here documents are small integers (the index assigns them) and each
term's posting is one int `doc << 32 | tf` while a single document holds it, then an
`array('I')` of pairs `doc, tf, doc, tf, …` sorted by document (4 bytes each), so adding or
removing a document is a bisect per term, and scoring walks the pairs as fast as a dict's
items. Scores are the same floats as `Field.score`'s (same formula, same order of operations).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from margin.core.retrieval.bm25 import length_norm, max_score

_TF = (1 << 32) - 1
_SCAN = 16
"""Walk a posting list rather than bisect it for each live document while it has at most this
many items (two per document) per live document: one bisect costs about as much as walking 8
documents' pairs."""


def _position(pairs: array[int], doc: int) -> int:
    """Index in `pairs` (doc, tf, doc, tf, …) of the first document >= `doc`."""
    with memoryview(pairs) as view, view[::2] as docs:
        return 2 * bisect_left(docs, doc)


class Postings:
    """BM25 over documents numbered 0, 1, …; `score` returns only documents that contain at
    least one query term. Same semantics as `bm25.Field` (see there for the pruning)."""

    __slots__ = ("b", "count", "k1", "lengths", "postings", "total_length")

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.postings: dict[str, int | array[int]] = {}
        """term → `doc << 32 | tf` (one document) or `array('I', [doc, tf, doc, tf, …])`."""
        self.lengths: list[int] = []
        """Indexed by document; -1 for a number not in use."""
        self.count = 0
        self.total_length = 0
        self.k1 = k1
        self.b = b

    def __len__(self) -> int:
        return self.count

    def add(self, doc: int, terms: Sequence[str], counts: Sequence[int]) -> None:
        """Index document `doc` (not currently indexed) holding `terms[i]` `counts[i]` times."""
        postings = self.postings
        key = doc << 32
        for term, tf in zip(terms, counts):
            entry = postings.get(term)
            if entry is None:
                postings[term] = key | tf
            elif isinstance(entry, int):
                other = entry >> 32
                postings[term] = array("I", (other, entry & _TF, doc, tf) if other < doc else
                                       (doc, tf, other, entry & _TF))
            elif entry[-2] < doc:
                entry.append(doc)
                entry.append(tf)
            else:
                i = _position(entry, doc)
                entry[i:i] = array("I", (doc, tf))
        lengths = self.lengths
        while len(lengths) <= doc:
            lengths.append(-1)
        length = sum(counts)
        lengths[doc] = length
        self.count += 1
        self.total_length += length

    def remove(self, doc: int, terms: Iterable[str]) -> None:
        """Drop document `doc`, which holds exactly `terms`."""
        postings = self.postings
        for term in terms:
            entry = postings[term]
            if isinstance(entry, int):
                del postings[term]
            else:
                i = _position(entry, doc)
                del entry[i:i + 2]
                if len(entry) == 2:
                    postings[term] = entry[0] << 32 | entry[1]
        self.total_length -= self.lengths[doc]
        self.lengths[doc] = -1
        self.count -= 1

    def df(self, term: str) -> int:
        entry = self.postings.get(term)
        return 0 if entry is None else 1 if isinstance(entry, int) else len(entry) // 2

    def idf(self, term: str) -> float:
        df = self.df(term)
        n = self.count
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def score(self, terms: Iterable[str], pool: int | None = None) -> dict[int, float]:
        """BM25 (Lucene's idf, never negative) of the documents holding a query term; with
        `pool`, exact for the best `pool` documents only (MaxScore, as `bm25.Field.score`)."""
        n = self.count
        if not n:
            return {}
        k1 = self.k1
        a, c = length_norm(k1, self.b, n, self.total_length)
        lengths = self.lengths
        entries: list[tuple[float, str, array[int]]] = []
        for term in dict.fromkeys(terms):
            found = self.postings.get(term)
            if found is not None:
                entry = array("I", (found >> 32, found & _TF)) if isinstance(found, int) else found
                df = len(entry) // 2
                entries.append((math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0), term, entry))
        out: dict[int, float] = {}
        for idf, entry, live in max_score(entries, pool, out):
            pairs = iter(entry)
            if live is out:
                get = out.get
                for doc, tf in zip(pairs, pairs):
                    out[doc] = get(doc, 0.0) + idf * tf / (tf + a + c * lengths[doc])
            elif len(entry) <= _SCAN * len(live):
                for doc, tf in zip(pairs, pairs):
                    if doc in live:
                        live[doc] += idf * tf / (tf + a + c * lengths[doc])
            else:  # a long posting list and few live documents: look each one up
                size = len(entry) // 2
                with memoryview(entry) as view, view[::2] as docs:
                    for doc in live:
                        i = bisect_left(docs, doc)
                        if i < size and docs[i] == doc:
                            tf = entry[2 * i + 1]
                            live[doc] += idf * tf / (tf + a + c * lengths[doc])
        return out
