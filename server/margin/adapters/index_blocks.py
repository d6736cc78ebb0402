"""Blocks of postings rows, the unit the on-disk retrieval index (adapters.index_db) stores: a
chunk's keys in sorted order, cut into runs of about BLOCK_BYTES, each run one SQLite row
keyed by (chunk, its first key). Most keys are held by one file (a workspace's identifiers
joined whole are mostly its own), so a row per key made a build write ten million rows at
100,000 files, each a B-tree insert; a block holds a hundred of them.

A block is two values: `keys`, its keys each between newlines ("\\nkey\\n...\\nkey\\n": keys never
hold a newline, so SQL finds a key in a block with instr()), and `data`, the little-endian u32
offsets where each key's row begins and the last ends, then the rows (adapters.index_rows'
format), back to back. A key's rows are in the block of its chunk whose first key is the
greatest not after it (the chunk's first block for a key before them all).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from itertools import pairwise

import numpy as np

BLOCK_BYTES = 2048
"""the bytes (keys and rows) a block holds about; a row of half that or more is a block alone,
so that a query for a rare key does not read a common key's long row with it"""


def encode(keys: Sequence[str], rows: Sequence[bytes]) -> tuple[str, bytes]:
    """A block's `keys` and `data` for these keys (sorted) and their rows."""
    ends = np.cumsum([0, *map(len, rows)], dtype=np.int64)
    return "\n" + "\n".join(keys) + "\n", ends.astype("<u4").tobytes() + b"".join(rows)


def key_list(keys: str) -> list[str]:
    return keys[1:-1].split("\n")


def row_at(keys: str, data: bytes, at: int) -> bytes:
    """The row of the key found at `at` in `keys` (instr()'s 1-based place of "\\nkey\\n")."""
    i = keys.count("\n", 0, at - 1)
    head = 4 * keys.count("\n")
    start, end = struct.unpack_from("<II", data, 4 * i)
    return data[head + start:head + end]


def decode(keys: str, data: bytes) -> dict[str, bytes]:
    """Every key of a block with its row, in key order."""
    names = key_list(keys)
    head = 4 * (len(names) + 1)
    ends = struct.unpack_from(f"<{len(names) + 1}I", data)
    return {name: data[head + ends[i]:head + ends[i + 1]] for i, name in enumerate(names)}


def cut(keys: Sequence[str], rows: Sequence[bytes]) -> Iterator[tuple[str, str, bytes]]:
    """Sorted keys and their rows as blocks: (first key, keys, data)."""
    sizes = np.fromiter((len(k) + 1 + len(r) for k, r in zip(keys, rows, strict=True)), np.int64, len(keys))
    starts = starts_of(sizes, np.zeros(len(keys), dtype=np.int64))
    bounds = [*starts.tolist(), len(keys)]
    for a, b in pairwise(bounds):
        yield (keys[a], *encode(keys[a:b], rows[a:b]))


def starts_of(sizes: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """Where blocks begin among rows of these sizes (each key's and row's bytes), sorted by
    chunk and key: at each chunk's first row, where the bytes before a row reach another
    multiple of BLOCK_BYTES within its chunk, and at a large row and the row after it."""
    if not len(sizes):
        return np.zeros(0, dtype=np.int64)
    new_chunk = np.concatenate(([True], chunks[1:] != chunks[:-1]))
    before = np.cumsum(sizes) - sizes
    before -= np.maximum.accumulate(np.where(new_chunk, before, 0))  # bytes before the row within its chunk
    window = before // BLOCK_BYTES
    large = sizes >= BLOCK_BYTES // 2
    start = new_chunk | large | np.concatenate(([True], (window[1:] != window[:-1]) | large[:-1]))
    return np.flatnonzero(start)
