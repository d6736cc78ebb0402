"""One BM25 field: an inverted index (term → {document: term frequency}) kept incrementally.

Adding or removing a document touches only that document's terms, and the collection
statistics BM25 needs (document count, total length, each term's document frequency) are kept
as running totals, so a query never scans documents that share none of its terms. Used for the
small fields (path terms, commit subjects); the code field, millions of (term, file) pairs, is
`postings.Postings`, the same scores in compact arrays.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

Doc = TypeVar("Doc", bound=Hashable)


class Field(Generic[Doc]):
    """BM25 over documents given as term counts. `score` returns only documents that contain at
    least one query term."""

    __slots__ = ("b", "k1", "lengths", "postings", "total_length")

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.postings: dict[str, dict[Doc, int]] = {}
        self.lengths: dict[Doc, int] = {}
        self.total_length = 0
        self.k1 = k1
        self.b = b

    def __len__(self) -> int:
        return len(self.lengths)

    def add(self, doc: Doc, counts: Mapping[str, int]) -> None:
        """Index `doc` (replacing any earlier version of it)."""
        if doc in self.lengths:
            self.remove(doc, counts_hint=None)
        postings = self.postings
        length = 0
        for term, tf in counts.items():
            entry = postings.get(term)
            if entry is None:
                postings[term] = {doc: tf}
            else:
                entry[doc] = tf
            length += tf
        self.lengths[doc] = length
        self.total_length += length

    def remove(self, doc: Doc, counts_hint: Iterable[str] | None = None) -> bool:
        """Drop `doc`. `counts_hint`: its terms, if the caller knows them (else every posting
        list is searched, which is the slow path)."""
        length = self.lengths.pop(doc, None)
        if length is None:
            return False
        self.total_length -= length
        postings = self.postings
        for term in counts_hint if counts_hint is not None else list(postings):
            entry = postings.get(term)
            if entry is not None and entry.pop(doc, None) is not None and not entry:
                del postings[term]
        return True

    def idf(self, term: str) -> float:
        df = len(self.postings.get(term, ()))
        n = len(self.lengths)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def score(self, terms: Iterable[str], pool: int | None = None) -> dict[Doc, float]:
        """BM25 (Lucene's idf, never negative) of the documents holding a query term.

        With `pool`, the exact scores of the best `pool` documents, cheaply: terms are taken
        rarest first (MaxScore), and once the `pool`-th best score so far is at least what the
        remaining terms could add (each at most idf·(k1+1)), no document not yet seen can enter
        the best `pool`, so the common terms' long posting lists only update documents already
        seen. Documents outside the best `pool` may then be missing or under-scored."""
        n = len(self.lengths)
        if not n:
            return {}
        k1 = self.k1
        a, c = length_norm(k1, self.b, n, self.total_length)
        lengths = self.lengths
        entries = []
        for term in dict.fromkeys(terms):
            entry = self.postings.get(term)
            if entry:
                df = len(entry)
                entries.append((math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0), term, entry))
        out: dict[Doc, float] = {}
        for idf, entry, live in max_score(entries, pool, out):
            if live is out:
                get = out.get
                for doc, tf in entry.items():
                    out[doc] = get(doc, 0.0) + idf * tf / (tf + a + c * lengths[doc])
            elif len(entry) <= len(live):
                for doc, tf in entry.items():
                    if doc in live:
                        live[doc] += idf * tf / (tf + a + c * lengths[doc])
            else:
                found = entry.get
                for doc in live:
                    in_doc = found(doc)
                    if in_doc:
                        live[doc] += idf * in_doc / (in_doc + a + c * lengths[doc])
        return out


def length_norm(k1: float, b: float, documents: int, total_length: int) -> tuple[float, float]:
    """BM25's term-frequency saturation as `tf / (tf + a + c·length)`: a = k1·(1−b), c =
    k1·b / the average length."""
    return k1 * (1.0 - b), k1 * b * documents / max(total_length, 1)


Posting = TypeVar("Posting")
Key = TypeVar("Key", bound=Hashable)


def max_score(entries: list[tuple[float, str, Posting]], pool: int | None,
              out: dict[Key, float]) -> Iterator[tuple[float, Posting, dict[Key, float]]]:
    """MaxScore over `entries` (a term's idf·(k1+1), the term, its posting): the terms rarest
    first, each with the scores it should add to — `out` itself, until with `pool` the
    `pool`-th best score so far is at least what the remaining terms could add; from then on a
    dict of the documents still able to enter the best `pool`, merged back into `out` when the
    last term is done. Shared by `Field.score` and `postings.Postings.score`."""
    entries.sort(key=lambda e: (-e[0], e[1]))
    remaining = sum(e[0] for e in entries)
    live = out
    for idf, _, entry in entries:
        if pool is not None and live is out and len(out) >= pool:
            threshold = heapq.nlargest(pool, out.values())[-1]
            if threshold >= remaining:
                live = {d: v for d, v in out.items() if v + remaining >= threshold}
        remaining -= idf
        yield idf, entry, live
    if live is not out:
        out.update(live)
