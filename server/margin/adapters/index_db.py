"""A workspace folder's retrieval index on disk: one SQLite file, queried in place, so the
server's memory does not grow with the workspace. Its layout and its writes are
adapters.index_writer's; its blocks and rows, adapters.index_blocks' and adapters.index_rows';
what this server's unsaved buffers change, adapters.index_overlay's (the file is shared by the
folder's servers and holds only what is saved).

Scoring is BM25 as `core.retrieval.postings.Postings.score` computes it — the same formula,
with the same operations in the same order, so the same floats — over every document holding
a query term, in numpy (a dense array of scores, one term at a time, rarest first), and the best
`pool` are returned: exact where the in-memory index's MaxScore pruning is exact for its best
`pool`. Only what scoring needs for every document is held in memory: the BM25 lengths of the
documents (8 bytes each), read again when another connection has committed
(`PRAGMA data_version`).

Why not SQLite's FTS5: measured on the generated 10,000-file workspace of
benchmarks/bench_retrieval.py (terms written one per line holding them, so that FTS5's term
frequency is this index's), FTS5 took 106 MB on disk with positions (`detail=full`, which its
`bm25()` needs for term frequencies), answered a query in 29 ms (median of the benchmark's 50;
63 ms at worst) against 7.5 ms for the in-memory index's code field, and its `bm25()` (another
idf, one `b` for every column, no way to plug in ours from Python) agreed with this index on
only 58% of the ten best files. Dense scoring in numpy over the same postings: 0.57 ms, the
same ten best files on all 50 queries.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from margin.adapters import index_blocks, index_rows
from margin.adapters.index_overlay import Overlay, View
from margin.adapters.index_writer import CHUNK, PATH, PATH_CHUNK, IndexWriter, chunk_start, connect
from margin.core.index_store import IndexUnavailable
from margin.core.retrieval import DEFAULT_WEIGHTS, Hit, Signals, Weights, filedata, ranking
from margin.core.retrieval.dense import Scorable, bm25
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.ranking import CONTENT_B, PATH_B
from margin.core.workspace_files import Stamp

NAMES_KEPT = 50_000
"""file ids kept by document number (and back) between queries, at most"""
FORMS_KEPT_LINES = 200_000
"""the indexed forms of the files searched lately are kept unpacked, up to this many lines in
all (a few MB): the next query mostly reads the same files' windows"""

class DiskIndex:
    """The index in one SQLite file: a core.index_store.WorkspaceIndex, ranked by
    core.retrieval.ranking as the index in memory is. Thread-safe. Queries and writes have a
    connection each (WAL: a query reads the last commit while a build's batch is written), each
    taken in turn."""

    def __init__(self, path: Path, weights: Weights = DEFAULT_WEIGHTS) -> None:
        self.path = path
        self.weights = weights
        self.writer = IndexWriter(path)
        self._db, self._lock = connect(path), threading.RLock()
        self._seen = -1
        """the data_version the lengths below were read at"""
        self._lengths = np.zeros(0)
        self._path_lengths = np.zeros(0)
        self._count = self._total = self._path_total = 0
        self._dfs: dict[str, int] = {}
        """the document frequencies of the terms `content_scores` read last"""
        self._names: dict[int, str] = {}
        self._docs: dict[str, int] = {}
        """file ids by document number and back, as looked up lately"""
        self.overlay = Overlay()
        """this server's open buffers whose text is not the file's on disk"""
        self._documents = 0
        """the document count `content_scores` last scored with (the overlay's included)"""
        self._forms: OrderedDict[str, tuple[FileData, int]] = OrderedDict()
        """file id → its indexed form, as read lately, and the data_version it was last found
        current at (checked against the file's fingerprint once the file changed since)"""
        self._pinned = False
        """within a search: the file is taken as it was when the search began"""
        self._read: dict[str, index_rows.Rows | None] = {}
        """within a search: the postings it read first (None: the key has none)"""
        self._form_lines = 0

    def close(self) -> None:
        self.writer.close()
        with self._lock:
            self._db.close()

    # ---- the documents' lengths -----------------------------------------------------------

    def _current(self) -> None:
        """The lengths as the file holds them: read again after any commit (the writer's
        connection is another connection too). Asked once a search (`_pinned`)."""
        if self._pinned:
            return
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._seen:
            return
        self._forget()
        rows = self._db.execute("SELECT doc, length, path_length FROM files").fetchall()
        size = 1 + max((r[0] for r in rows), default=-1)
        self._lengths, self._path_lengths = np.zeros(size), np.zeros(size)
        if rows:
            docs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            self._lengths[docs] = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
            self._path_lengths[docs] = np.fromiter((r[2] for r in rows), dtype=np.float64, count=len(rows))
        self._count = len(rows)
        self._total = int(self._lengths.sum())
        self._path_total = int(self._path_lengths.sum())
        self._seen = version

    def _forget(self) -> None:
        """Drop what was kept of earlier reads: the file changed."""
        self._dfs, self._names, self._docs = {}, {}, {}

    # ---- reading ----------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            self._current()
            return self._count + len(self.overlay.files.keys() - self._disk_docs(self.overlay.files).keys())

    def fingerprint(self, file_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT fingerprint FROM files WHERE file_id = ?", (file_id,)).fetchone()
        return row[0] if row else None

    def stamp(self, file_id: str) -> Stamp | None:
        with self._lock:
            row = self._db.execute("SELECT size, mtime_ns FROM files WHERE file_id = ?", (file_id,)).fetchone()
        return Stamp(row[0], row[1]) if row and row[0] is not None else None

    def stamps(self) -> dict[str, Stamp]:
        """Every file indexed from disk, with the stamp of the text indexed."""
        with self._lock:
            rows = self._db.execute("SELECT file_id, size, mtime_ns FROM files WHERE size IS NOT NULL").fetchall()
        return {file_id: Stamp(size, mtime_ns) for file_id, size, mtime_ns in rows}

    def file_data(self, file_id: str) -> FileData | None:
        if (overlaid := self.overlay.files.get(file_id)) is not None:
            return overlaid.entry
        with self._lock:
            self._current()
            kept = self._forms.pop(file_id, None)
            if kept is not None:
                self._form_lines -= kept[0].lines
            entry = kept[0] if kept is not None and kept[1] == self._seen else \
                self._read_form(file_id, kept[0] if kept is not None else None)
            if entry is None:
                return None
            self._forms[file_id] = (entry, self._seen)
            self._form_lines += entry.lines
            while self._form_lines > FORMS_KEPT_LINES and len(self._forms) > 1:
                self._form_lines -= self._forms.popitem(last=False)[1][0].lines
            return entry

    def _read_form(self, file_id: str, kept: FileData | None) -> FileData | None:
        """The file's indexed form as the file holds it: `kept` while it is still the one indexed
        (its fingerprint and document), else read and unpacked."""
        row = self._db.execute("SELECT doc, fingerprint, lines FROM files WHERE file_id = ?", (file_id,)).fetchone()
        if row is None:
            return None
        doc, print_, lines = row
        if kept is not None and kept.fingerprint == print_ and kept.doc == doc:
            return kept
        found = self._db.execute("SELECT data FROM forms WHERE doc = ?", (doc,)).fetchone()
        if found is None:
            return None
        entry = index_rows.unpack_file(found[0], print_, lines)
        entry.doc = doc
        return entry

    def docs_of(self, file_ids: Iterable[str]) -> dict[str, int]:
        """The document numbers of the files indexed among `file_ids` (an overlaid file's own)."""
        view = self._view()
        if view is None:
            return self._disk_docs(file_ids)
        wanted = list(file_ids)
        return {**self._disk_docs(f for f in wanted if f not in view.docs),
                **{f: view.docs[f] for f in wanted if f in view.docs}}

    def names_of(self, docs: Iterable[int]) -> dict[int, str]:
        """The file ids of the documents among `docs`."""
        view = self._view()
        if view is None:
            return self._pairs("SELECT doc, file_id FROM files WHERE doc IN ", docs, self._names)
        wanted = list(docs)
        return {**self._pairs("SELECT doc, file_id FROM files WHERE doc IN ", (d for d in wanted if d < view.first),
                              self._names),
                **{d: name for d in wanted if (name := view.name(d)) is not None}}

    def _disk_docs(self, file_ids: Iterable[str]) -> dict[str, int]:
        return self._pairs("SELECT file_id, doc FROM files WHERE file_id IN ", file_ids, self._docs)

    def _view(self) -> View | None:
        """The overlay at this query (None: no buffer differs from the disk)."""
        if not self.overlay.files:
            return None
        with self._lock:
            self._current()
            return self.overlay.view(self._disk_docs(self.overlay.files), len(self._lengths))

    def _pairs(self, select: str, keys: Iterable[Any], kept: dict[Any, Any]) -> dict[Any, Any]:
        """`select`'s pairs for `keys`, those looked up lately from `kept` (a query asks for the
        names of the same best documents as the last: the files a common term ranks first)."""
        wanted = dict.fromkeys(keys).keys()
        with self._lock:
            self._current()
            known = wanted & kept.keys()  # set operations in C: a query's few thousand keys, most known
            found = {key: kept[key] for key in known}
            new = dict(self._select_in(lambda n: f"{select}({','.join('?' * n)})", list(wanted - known)))
            if len(kept) + len(new) > NAMES_KEPT:
                kept.clear()
            kept.update(new)
            found.update(new)
        return found

    def _select_in(self, select: Callable[[int], str], keys: list[Any]) -> Iterator[Any]:
        """The rows of `select(n)`, a statement of n variables, for `keys`, 500 at a time (under
        SQLite's limit of variables a statement)."""
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            yield from self._db.execute(select(len(part)), part)

    def _postings(self, keys: Iterable[str]) -> dict[str, index_rows.Rows]:
        """The postings of `keys`, read in one statement (each key's rows in chunk order), or
        taken from what the search in progress read first (`_read`)."""
        wanted = list(dict.fromkeys(keys))
        if self._pinned and all(key in self._read for key in wanted):
            return {key: found for key in wanted if (found := self._read[key]) is not None}
        rows: dict[str, list[tuple[int, bytes]]] = {}
        for term, chunk, names, data, at in self._select_in(self._by_terms, wanted):
            rows.setdefault(term, []).append((chunk_start(chunk), index_blocks.row_at(names, data, at)))
        postings = {}
        for key, parts in rows.items():
            parts.sort(key=itemgetter(0))  # in chunk order (SQLite would sort the blobs themselves)
            postings[key] = index_rows.Rows([start for start, _ in parts], [data for _, data in parts])
        return postings

    def content_scores(self, terms: Sequence[str], pool: int) -> dict[int, float]:
        """The best `pool` documents by the code's BM25, as `Postings.score` scores them."""
        with self._lock:
            self._current()
            found = self._postings(terms)
            postings: Mapping[str, Scorable] = found
            count, total, lengths = self._count, self._total, self._lengths
            if (view := self._view()) is not None:  # the overlay's files merged into the decoded rows
                postings = view.postings({t: rows.posting() for t, rows in found.items()}, list(terms), path=False)
                count, total, lengths = view.totals(count, total, lengths, path=False)
            self._dfs.update((term, postings[term].df if term in postings else 0) for term in terms)
            self._documents = count
            return bm25(postings, count, total, lengths, CONTENT_B, pool)

    def path_scores(self, terms: Sequence[str], pool: int) -> dict[int, float]:
        """The best `pool` documents by the path's BM25, as `bm25.Field.score` scores them."""
        with self._lock:
            self._current()
            found = {key[len(PATH):]: rows for key, rows in self._postings(PATH + t for t in terms).items()}
            postings: Mapping[str, Scorable] = found
            count, total, lengths = self._count, self._path_total, self._path_lengths
            if (view := self._view()) is not None:
                postings = view.postings({t: rows.posting() for t, rows in found.items()}, list(terms), path=True)
                count, total, lengths = view.totals(count, total, lengths, path=True)
            return bm25(postings, count, total, lengths, PATH_B, pool)

    def df(self, term: str) -> int:
        with self._lock:
            self._current()
            found = self._postings([term]).get(term)
        return 0 if found is None else found.df

    def idf(self, term: str) -> float:
        """The code field's idf of `term`, as `Postings.idf` (the document frequency
        `content_scores` read, when it read the term: a query asks both)."""
        with self._lock:
            self._current()
            if term not in self._dfs:
                self.content_scores([term], 1)
            df, n = self._dfs[term], self._documents
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def search(self, query: str, *, limit: int = 8, signals: Signals | None = None,
               exclude: Collection[str] = ()) -> list[Hit]:
        with _unavailable_on_error(), self._lock:
            self._current()
            self._pinned = True
            try:
                terms = ranking.query_terms(query)  # the code's and the path's postings, read at once
                keys = [*terms, *(PATH + term for term in terms)]
                found = self._postings(keys)
                self._read = {key: found.get(key) for key in keys}
                return ranking.search(self, query, limit=limit, signals=signals, exclude=exclude)
            finally:
                self._pinned, self._read = False, {}

    def save(self, pause: Callable[[], None]) -> None:
        """Nothing to do: every write has landed in the file."""

    # ---- writing ----------------------------------------------------------------------------

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp | None = None) -> bool:
        """Index `text` as the file's: with a `stamp`, the file's on disk (written to the shared
        file); without, an editor's buffer (this server's overlay, where it differs from the
        disk). False when the fingerprint is the one indexed (only the stamp kept)."""
        with _unavailable_on_error():
            if stamp is None:
                return self._buffer(file_id, text, fingerprint)
            if self.writer.keep_stamp(file_id, fingerprint, stamp):
                self._overlay_changed(self.overlay.remove(file_id))  # saved; a buffer still other is put again
                return False
            self.writer.write([(file_id, filedata.from_text(text, fingerprint), stamp)])
            self._overlay_changed(self.overlay.remove(file_id))
            return True

    def _buffer(self, file_id: str, text: str, fingerprint: str) -> bool:
        overlaid = self.overlay.files.get(file_id)
        if overlaid is not None and overlaid.entry.fingerprint == fingerprint:
            return False
        if self.fingerprint(file_id) == fingerprint:  # as on disk: nothing over it
            return self._overlay_changed(self.overlay.remove(file_id))
        self.overlay.put(file_id, filedata.from_text(text, fingerprint))
        return self._overlay_changed(True)

    def _overlay_changed(self, changed: bool) -> bool:
        if changed:
            with self._lock:
                self._dfs = {}
        return changed

    def remove(self, file_id: str) -> bool:
        """The file gone from the disk and from the overlay."""
        with _unavailable_on_error():
            on_disk = self.writer.remove(file_id)
            return self._overlay_changed(self.overlay.remove(file_id)) or on_disk

    def write(self, entries: Sequence[tuple[str, FileData, Stamp | None]],
              pause: Callable[[], None] = lambda: None) -> None:
        """Files read from disk indexed anew, in one transaction (IndexWriter.write)."""
        self.writer.write(entries, pause)

    def _by_terms(self, count: int) -> str:
        """A select of `count` keys' blocks (key, chunk, keys, data, where the key is among the
        keys), in no order: for each chunk (the code's chunks for a term, the path chunks for
        a path key) and key, the block whose first key is the greatest not after the key (a
        look-up in the small index of blocks, then one in the blocks), kept when the key is
        among its keys. (Blocks are a rowid table: in one keyed by (chunk, first) each step of
        a look-up read a long block's overflow pages.)"""
        documents = len(self._lengths)
        chunks = ",".join([*(f"({chunk},0)" for chunk in range(max(-(-documents // CHUNK), 1))),
                           *(f"({-1 - chunk},1)" for chunk in range(max(-(-documents // PATH_CHUNK), 1)))])
        return f"WITH q(key) AS (VALUES {','.join(['(?)'] * count)}), c(chunk, path) AS (VALUES {chunks}), " \
               "p AS (SELECT q.key AS key, c.chunk AS chunk, (SELECT id FROM blocks WHERE chunk = c.chunk " \
               f"AND first <= q.key ORDER BY first DESC LIMIT 1) AS id FROM q, c WHERE c.path = (substr(q.key, 1, 1) = '{PATH}')) " \
               "SELECT p.key, p.chunk, b.keys, b.data, instr(b.keys, char(10) || p.key || char(10)) AS at " \
               "FROM p JOIN blocks AS b ON b.id = p.id WHERE at > 0"


@contextlib.contextmanager
def _unavailable_on_error() -> Iterator[None]:
    """SQLite's errors as IndexUnavailable (each write is one transaction: rolled back whole)."""
    try:
        yield
    except sqlite3.Error as error:
        raise IndexUnavailable(type(error).__name__) from error
