"""The rows of the on-disk retrieval index (adapters.index_db): arrays as little-endian bytes,
and a postings row — a chunk's documents holding a term, with their term frequencies — merged
with changes (documents added, changed, or dropped with a term frequency of 0)."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

import numpy as np

from margin.core.retrieval.dense import Posting

_LITTLE = sys.byteorder == "little"


def to_bytes(values: array[int]) -> bytes:
    if not _LITTLE:
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def from_bytes(code: str, data: bytes) -> array[int]:
    values = array(code)
    values.frombytes(data)
    if not _LITTLE:
        values.byteswap()
    return values


def row_of(pairs: Sequence[tuple[int, int]]) -> tuple[bytes, bytes]:
    return to_bytes(array("I", [d for d, _ in pairs])), to_bytes(array("I", [tf for _, tf in pairs]))


_SMALL = 64
"""rows of at most this many documents are merged in Python, longer ones in numpy"""


def merged(row: tuple[bytes, bytes] | None, part: dict[int, int]) -> tuple[bytes, bytes] | None:
    """A row's (docs, tfs) with `part` applied (tf 0: dropped); None when nothing changes."""
    if row is None:
        kept = sorted((d, tf) for d, tf in part.items() if tf)
        return row_of(kept) if kept else None
    if len(row[0]) // 4 <= _SMALL:
        current = dict(zip(from_bytes("I", row[0]), from_bytes("I", row[1]), strict=True))
        before = len(current), dict(current)
        current.update(part)
        pairs = sorted((d, tf) for d, tf in current.items() if tf)
        if len(pairs) == before[0] and dict(pairs) == before[1]:
            return None
        return row_of(pairs)
    posting = Posting.of_rows([row])
    changed = np.fromiter(part, dtype=np.int64, count=len(part))
    keep = ~np.isin(posting.docs, changed)
    added = sorted((d, tf) for d, tf in part.items() if tf)
    docs = np.concatenate([posting.docs[keep].astype(np.int64), np.array([d for d, _ in added], dtype=np.int64)])
    tfs = np.concatenate([posting.tfs[keep].astype(np.int64), np.array([tf for _, tf in added], dtype=np.int64)])
    order = np.argsort(docs, kind="stable")
    return Posting(docs[order], tfs[order]).row()
