"""The rows of the on-disk retrieval index (adapters.index_db), compact because a workspace has
a row per (term, chunk) and most terms are held by one file. Rows are stored in blocks
(adapters.index_blocks).

A postings row is one blob: a byte giving the width of its term frequencies (1; 2 when one is
256 or more; 4 when one is 65,536 or more), the documents as 2-byte offsets from the chunk's first document (a chunk
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
from collections.abc import Collection, Sequence
from itertools import pairwise

import numpy as np

from margin.adapters import index_blocks
from margin.core.index_store import IndexUnavailable
from margin.core.retrieval import filedata
from margin.core.retrieval.dense import Posting
from margin.core.retrieval.filedata import FileData

_LITTLE = sys.byteorder == "little"
_CODES = {1: "B", 2: "H", 4: "I"}
"""a row's width → the `array` typecode of its term frequencies"""
_DTYPES = {1: "<u1", 2: "<u2", 4: "<u4"}
_SMALL = 64
"""rows of at most this many documents are merged in Python, longer ones in numpy"""
ZLIB_LEVEL = 1


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


def width(largest: int) -> int:
    """The width of a row whose largest term frequency is `largest`."""
    return 1 if largest < 1 << 8 else 2 if largest < 1 << 16 else 4


class KeyNumbers:
    """A number for each distinct key: the Python of core.retrieval._fastterms.KeyNumbers (what
    `FreshRows` uses when the package has it). A new key takes the number counted out for its
    place, so numbers are not consecutive here (they are in C): both give each key one number
    and the same sorted keys."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._counted = 0

    def add(self, keys: str) -> bytes:
        """The numbers of the space-separated `keys` ("" holds none), as native int64s."""
        parts = keys.split(" ") if keys else []
        start, self._counted = self._counted, self._counted + len(parts)
        return np.fromiter(map(self._ids.setdefault, parts, range(start, self._counted)), np.int64,
                           len(parts)).tobytes()

    def sorted(self) -> tuple[list[str], bytes]:
        """Every key in sorted order, and their numbers as native int64s."""
        names = sorted(self._ids)
        return names, np.fromiter(map(self._ids.__getitem__, names), np.int64, len(names)).tobytes()

    def __len__(self) -> int:
        return len(self._ids)


def key_numbers() -> KeyNumbers:
    """The C numbering when the package was built with it, else the Python one."""
    fast = filedata.fast_module()
    return fast.KeyNumbers() if fast is not None else KeyNumbers()


class FreshRows:
    """The postings rows of documents past every document there was (a build's batch), made
    at once from each document's keys and term frequencies: grouped and encoded in numpy, no
    row read or merged."""

    def __init__(self, chunk: int, numbers: KeyNumbers | None = None) -> None:
        self._chunk = chunk
        self._numbers = numbers if numbers is not None else key_numbers()
        """each key once, with a number of its own"""
        self._keys: list[np.ndarray] = []
        self._tfs: list[np.ndarray] = []
        self._docs: list[int] = []
        self._sizes: list[int] = []

    def add(self, doc: int, keys: str, tfs: Sequence[int]) -> None:
        """A document's keys (each once, joined by spaces) and their term frequencies;
        documents come in rising order. Only numbers are kept a key (a batch's memory is its
        distinct keys, once)."""
        numbers = np.frombuffer(self._numbers.add(keys), dtype=np.int64)
        if len(numbers) != len(tfs):
            raise ValueError(f"{len(numbers)} keys but {len(tfs)} term frequencies")
        self._keys.append(numbers)
        self._tfs.append(np.asarray(tfs, dtype=np.int64))
        self._docs.append(doc)
        self._sizes.append(len(numbers))

    def blocks(self, merged: Collection[int] = ()) -> tuple[list[tuple[int, str, str, bytes]], list[tuple[int, str, bytes]]]:
        """The rows as blocks (adapters.index_blocks: (chunk, first key, keys, data), in that
        order), but those of the chunks in `merged` (chunks with blocks already: their rows are
        merged into them) as rows, (chunk, key, row)."""
        laid = self._laid_out()
        if laid is None:
            return [], []
        chunks, keys, at, ends, data = laid
        apart = np.isin(chunks, np.fromiter(merged, np.int64, len(merged)))
        rows = [(int(chunks[i]), keys[i], data[at[i]:ends[i]]) for i in np.flatnonzero(apart).tolist()]
        kept = np.flatnonzero(~apart)
        chunks, at, ends = chunks[kept], at[kept], ends[kept]
        keys = [keys[i] for i in kept.tolist()] if len(rows) else keys
        sizes = ends - at + np.fromiter(map(len, keys), np.int64, len(keys)) + 1
        bounds = [*index_blocks.starts_of(sizes, chunks).tolist(), len(keys)]
        blocks = []
        for a, b in pairwise(bounds):
            offsets = np.concatenate(([at[a]], ends[a:b])) - at[a]
            blocks.append((int(chunks[a]), keys[a], "\n" + "\n".join(keys[a:b]) + "\n",
                           offsets.astype("<u4").tobytes() + data[at[a]:ends[b - 1]]))
        return blocks, rows

    def _laid_out(self) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray, bytes] | None:
        """Every row's chunk, key, where it begins and ends in one buffer, and the buffer: by
        chunk, then key."""
        if not len(self._numbers):
            return None
        names, numbered = self._numbers.sorted()
        numbers = np.frombuffer(numbered, dtype=np.int64)
        rank = np.zeros(int(numbers.max()) + 1, dtype=np.int64)  # a key's number → its place in `names`
        rank[numbers] = np.arange(len(names))
        del numbers
        docs = np.repeat(np.asarray(self._docs, dtype=np.int64), self._sizes)
        low = int(docs[0]) // self._chunk
        # by chunk, then key; a stable sort keeps each key's documents in their rising order
        group = (docs // self._chunk - low) * len(names) + rank[np.concatenate(self._keys)]
        del rank
        order = np.argsort(group, kind="stable")
        group = group[order]
        offsets = (docs[order] % self._chunk).astype(np.int32)
        del docs
        tfs = np.concatenate(self._tfs)[order].astype(np.uint32)
        del order
        starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
        keys = group[starts]
        del group
        counts = np.diff(np.append(starts, len(offsets))).astype(np.int32)
        largest = np.maximum.reduceat(tfs, starts)
        wide = np.where(largest < 1 << 8, 1, np.where(largest < 1 << 16, 2, 4)).astype(np.int32)
        sizes = 1 + counts * (2 + wide)
        ends = np.cumsum(sizes, dtype=np.int64)
        at = ends - sizes  # where each row begins in `out`: its width, its offsets, its term frequencies
        out = np.zeros(int(ends[-1]), dtype=np.uint8)
        out[at] = wide
        row = np.repeat(np.arange(len(starts), dtype=np.int32), counts)
        nth = np.arange(len(offsets), dtype=np.int32) - starts[row].astype(np.int32)
        place = at[row] + 1 + 2 * nth
        out[place], out[place + 1] = offsets & 0xFF, offsets >> 8
        del offsets
        width = wide[row]
        place += 2 * (counts[row] - nth) + width * nth  # now where each term frequency's first byte goes
        del row, nth
        for byte in range(4):
            part = width > byte
            out[place[part] + byte] = tfs[part] >> 8 * byte & 0xFF
        return (keys // len(names) + low, list(map(names.__getitem__, (keys % len(names)).tolist())), at, ends,
                out.tobytes())


def size(row: bytes) -> int:
    """How many documents a postings row holds."""
    return (len(row) - 1) // (2 + row[0])


def encode(chunk_start: int, pairs: Sequence[tuple[int, int]]) -> bytes:
    """A row of (document, term frequency) pairs, sorted by document."""
    wide = width(max((tf for _, tf in pairs), default=0))
    return bytes((wide,)) + _bytes(array("H", [d - chunk_start for d, _ in pairs])) + \
        _bytes(array(_CODES[wide], [tf for _, tf in pairs]))


def encode_arrays(chunk_start: int, docs: np.ndarray, tfs: np.ndarray) -> bytes:
    """`encode` of documents and term frequencies given as arrays, sorted by document."""
    wide = width(int(tfs.max()) if len(tfs) else 0)
    return bytes((wide,)) + (docs - chunk_start).astype("<u2").tobytes() + tfs.astype(_DTYPES[wide]).tobytes()


def decode(chunk_start: int, row: bytes) -> Posting:
    n, wide = size(row), row[0]
    offsets = np.frombuffer(row, dtype="<u2", count=n, offset=1)
    tfs = np.frombuffer(row, dtype=_DTYPES[wide], count=n, offset=1 + 2 * n)
    return Posting(offsets.astype(np.int64) + chunk_start, tfs)


def decode_rows(chunk_starts: Sequence[int], rows: Sequence[bytes]) -> Posting:
    """One term's rows of several chunks (in chunk order) as one posting: `decode` of each,
    concatenated, in a few numpy passes over all of them rather than a few per row."""
    if len(rows) == 1:
        return decode(chunk_starts[0], rows[0])
    # each row is a width byte, then n 2-byte offsets, then n term frequencies of that width
    counts = [(len(row) - 1) // (2 + row[0]) for row in rows]
    offsets = np.frombuffer(b"".join([row[1:1 + 2 * n] for row, n in zip(rows, counts, strict=True)]), dtype="<u2")
    wide = rows[0][0]
    if all(row[0] == wide for row in rows):
        tfs = np.frombuffer(b"".join([row[1 + 2 * n:] for row, n in zip(rows, counts, strict=True)]),
                            dtype=_DTYPES[wide])
    else:  # rows of several widths (a common term's, where a large file holds it on 256 lines or more)
        tfs = np.concatenate([np.frombuffer(row, dtype=_DTYPES[row[0]], count=n, offset=1 + 2 * n)
                              for row, n in zip(rows, counts, strict=True)])
    return Posting(offsets.astype(np.int64) + np.repeat(np.asarray(chunk_starts, dtype=np.int64), counts), tfs)


try:  # BM25 from the rows in C (_fastrows.c), built by the package when a C compiler was there
    from margin.adapters import _fastrows
except ImportError:  # pragma: no cover - a build without a compiler: the rows are decoded for numpy
    _FAST_ROWS = False
else:
    _FAST_ROWS = True


class Rows:
    """One term's rows of several chunks (in chunk order), as read: a posting (core.retrieval.
    dense.Scorable) that adds its BM25 to a query's scores straight from the rows (in C), and
    decodes them (`decode_rows`) only when its documents are asked for."""

    __slots__ = ("_posting", "df", "rows", "starts")

    def __init__(self, starts: list[int], rows: list[bytes]) -> None:
        self.starts, self.rows = starts, rows
        if not all(row and row[0] in _CODES and (len(row) - 1) % (2 + row[0]) == 0 for row in rows):
            raise IndexUnavailable("a damaged postings row (its width or its length)")
        self.df = sum((len(row) - 1) // (2 + row[0]) for row in rows)
        self._posting: Posting | None = None

    def posting(self) -> Posting:
        if self._posting is None:
            try:
                self._posting = decode_rows(self.starts, self.rows)
            except (ValueError, IndexError) as error:  # a damaged file: the query gets no snippets
                raise IndexUnavailable(f"a damaged postings row ({error})") from error
        return self._posting

    @property
    def docs(self) -> np.ndarray:
        return self.posting().docs

    @property
    def tfs(self) -> np.ndarray:
        return self.posting().tfs

    def add_to(self, scores: np.ndarray, lengths: np.ndarray, idf: float, a: float, c: float) -> None:
        try:
            if _FAST_ROWS and self._posting is None:
                _fastrows.accumulate(scores, lengths, self.rows, self.starts, idf, a, c)
            else:
                self.posting().add_to(scores, lengths, idf, a, c)
        except (ValueError, IndexError) as error:  # a damaged file (the scores are this query's own)
            raise IndexUnavailable(f"a damaged postings row ({error})") from error


def appended(row: bytes, more: bytes) -> bytes:
    """A row with the documents of `more` (all after its own) added at its end."""
    n, m = size(row), size(more)
    wide = max(row[0], more[0])
    tfs = [row[1 + 2 * n:], more[1 + 2 * m:]]
    if row[0] != more[0]:
        tfs = [np.frombuffer(tf, _DTYPES[part[0]]).astype(_DTYPES[wide]).tobytes() for tf, part in zip(tfs, (row, more), strict=True)]
    return b"".join((bytes((wide,)), row[1:1 + 2 * n], more[1:1 + 2 * m], *tfs))


def _pairs(chunk_start: int, row: bytes) -> dict[int, int]:
    n, view = size(row), memoryview(row)
    offsets = _array("H", view[1:1 + 2 * n])
    tfs = _array(_CODES[row[0]], view[1 + 2 * n:])
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
