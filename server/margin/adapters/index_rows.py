"""The rows of the on-disk retrieval index (adapters.index_db), compact because a workspace has
a row per (term, chunk) and most terms are held by one file.

A postings row is one blob: a byte giving the width of its term frequencies (2, or 4 when one
is 65,536 or more), the documents as 2-byte offsets from the chunk's first document (a chunk
is index_db.CHUNK ≤ 65,536 documents), then the term frequencies; little-endian. A row is
merged with changes (documents added, changed, or dropped with a term frequency of 0) in
Python while short, in numpy when long.

A file's indexed form (core.retrieval.filedata.FileData: its sorted terms, the lines holding
each) is one zlib-compressed blob: the terms' length, the terms, then the counts and the line
numbers in the FileData's own item size.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from margin.core.retrieval import filedata
from margin.core.retrieval.dense import Posting
from margin.core.retrieval.filedata import FileData

_LITTLE = sys.byteorder == "little"
_WIDE = 1 << 16
_SMALL = 64
"""rows of at most this many documents are merged in Python, longer ones in numpy"""
ZLIB_LEVEL = 3


def _bytes(values: array[int]) -> bytes:
    if not _LITTLE:
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _array(code: str, data: bytes | memoryview) -> array[int]:
    values = array(code)
    values.frombytes(data)
    if not _LITTLE:
        values.byteswap()
    return values


_OFFSETS = [offset.to_bytes(2, "little") for offset in range(1 << 16)]
_SHORT = [tf.to_bytes(2, "little") for tf in range(1024)]


class FreshRows:
    """The postings rows of chunks no document was in before (a build's), made as their
    documents are added in rising order: bytes appended, no row read or merged."""

    def __init__(self, chunk: int) -> None:
        self._chunk = chunk
        self._rows: dict[int, dict[str, list[Any]]] = {}
        """chunk → key → [offsets, term frequencies, their width]"""

    def add(self, doc: int, counts: Iterable[tuple[str, int]]) -> None:
        chunk = doc // self._chunk
        rows = self._rows.setdefault(chunk, {})
        offset = _OFFSETS[doc - chunk * self._chunk]
        for key, tf in counts:
            row = rows.get(key)
            if row is None:
                row = rows[key] = [bytearray(), bytearray(), 2]
            row[0] += offset
            if tf < 1024 and row[2] == 2:
                row[1] += _SHORT[tf]
            else:
                if tf >= _WIDE and row[2] == 2:
                    row[1], row[2] = bytearray(np.frombuffer(row[1], "<u2").astype("<u4").tobytes()), 4
                row[1] += tf.to_bytes(row[2], "little")

    def rows(self) -> list[tuple[int, str, bytes]]:
        """(chunk, key, row), in key order."""
        return [(chunk, key, bytes((row[2],)) + row[0] + row[1])
                for chunk, rows in sorted(self._rows.items()) for key, row in sorted(rows.items())]


def size(row: bytes) -> int:
    """How many documents a postings row holds."""
    return (len(row) - 1) // (2 + row[0])


def encode(chunk_start: int, pairs: Sequence[tuple[int, int]]) -> bytes:
    """A row of (document, term frequency) pairs, sorted by document."""
    width = 4 if any(tf >= _WIDE for _, tf in pairs) else 2
    return bytes((width,)) + _bytes(array("H", [d - chunk_start for d, _ in pairs])) + \
        _bytes(array("I" if width == 4 else "H", [tf for _, tf in pairs]))


def encode_arrays(chunk_start: int, docs: np.ndarray, tfs: np.ndarray) -> bytes:
    """`encode` of documents and term frequencies given as arrays, sorted by document."""
    width = 4 if len(tfs) and int(tfs.max()) >= _WIDE else 2
    return bytes((width,)) + (docs - chunk_start).astype("<u2").tobytes() + \
        tfs.astype("<u4" if width == 4 else "<u2").tobytes()


def decode(chunk_start: int, row: bytes) -> Posting:
    n, width = size(row), row[0]
    offsets = np.frombuffer(row, dtype="<u2", count=n, offset=1)
    tfs = np.frombuffer(row, dtype="<u4" if width == 4 else "<u2", count=n, offset=1 + 2 * n)
    return Posting(offsets.astype(np.int64) + chunk_start, tfs)


def decode_rows(chunk_starts: Sequence[int], rows: Sequence[bytes]) -> Posting:
    """One term's rows of several chunks (in chunk order) as one posting: `decode` of each,
    concatenated, in a few numpy passes over all of them rather than a few per row."""
    if len(rows) == 1:
        return decode(chunk_starts[0], rows[0])
    if any(row[0] != 2 for row in rows):  # a term frequency of 65,536 or more: rare
        parts = [decode(start, row) for start, row in zip(chunk_starts, rows, strict=True)]
        return Posting(np.concatenate([p.docs for p in parts]), np.concatenate([p.tfs for p in parts]))
    # each row is a width byte, then n 2-byte offsets, then n 2-byte tfs: 4n + 1 bytes
    counts = [(len(row) - 1) // 4 for row in rows]
    offsets = np.frombuffer(b"".join([row[1:1 + 2 * n] for row, n in zip(rows, counts, strict=True)]), dtype="<u2")
    tfs = np.frombuffer(b"".join([row[1 + 2 * n:] for row, n in zip(rows, counts, strict=True)]), dtype="<u2")
    return Posting(offsets.astype(np.int64) + np.repeat(np.asarray(chunk_starts, dtype=np.int64), counts), tfs)


def _pairs(chunk_start: int, row: bytes) -> dict[int, int]:
    n, view = size(row), memoryview(row)
    offsets = _array("H", view[1:1 + 2 * n])
    tfs = _array("I" if row[0] == 4 else "H", view[1 + 2 * n:])
    return {chunk_start + offset: tf for offset, tf in zip(offsets, tfs, strict=True)}


def merged(chunk_start: int, row: bytes | None, part: dict[int, int]) -> bytes | None:
    """A row with `part` applied (tf 0: dropped): b"" when no document is left, None when
    nothing changes."""
    if row is None or size(row) <= _SMALL:
        current = _pairs(chunk_start, row) if row is not None else {}
        pairs = sorted((d, tf) for d, tf in {**current, **part}.items() if tf)
        if row is not None and len(pairs) == len(current) and dict(pairs) == current:
            return None
        return encode(chunk_start, pairs) if pairs else b""
    posting = decode(chunk_start, row)
    keep = ~np.isin(posting.docs, np.fromiter(part, dtype=np.int64, count=len(part)))
    added = sorted((d, tf) for d, tf in part.items() if tf)
    docs = np.concatenate([posting.docs[keep], np.array([d for d, _ in added], dtype=np.int64)])
    tfs = np.concatenate([posting.tfs[keep].astype(np.int64), np.array([tf for _, tf in added], dtype=np.int64)])
    order = np.argsort(docs, kind="stable")
    return encode_arrays(chunk_start, docs[order], tfs[order]) if len(docs) else b""


def pack_file(entry: FileData) -> bytes:
    terms = entry.terms.encode()
    return zlib.compress(struct.pack("<I", len(terms)) + terms + _bytes(entry.counts) + _bytes(entry.positions),
                         ZLIB_LEVEL)


def file_terms(packed: bytes) -> str:
    """The terms of a packed file, space-separated (as FileData.terms)."""
    data = zlib.decompress(packed)
    (length,) = struct.unpack_from("<I", data)
    return data[4:4 + length].decode()


def unpack_file(packed: bytes, fingerprint: str, lines: int) -> FileData:
    data = zlib.decompress(packed)
    (length,) = struct.unpack_from("<I", data)
    terms = data[4:4 + length].decode()
    code = filedata.typecode(lines)
    item = array(code).itemsize
    count = terms.count(" ") + 1 if terms else 0
    view = memoryview(data)[4 + length:]
    return FileData(fingerprint, lines, terms, _array(code, view[:count * item]), _array(code, view[count * item:]))
