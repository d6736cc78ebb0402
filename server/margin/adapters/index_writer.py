"""The writing side of the on-disk retrieval index (adapters.index_db): the file's layout, and
the one connection that writes it — a file's rows replaced, its postings changed key by key,
a build's batch of new files added as whole blocks.

Tables: `files` (a row a file: its document number, id, stamp, fingerprint, BM25 lengths),
`forms` (each file's indexed form, core.retrieval.filedata.FileData, packed: what windows are
scored from and what a change is compared with) and `blocks` (chunk, first key) → a run of the
chunk's keys, each with its postings row: the documents of that chunk holding the term, with
their term frequencies (index_blocks, index_rows). Path terms are postings too, under
PATH + term, in chunks of their own (PATH_CHUNK documents, numbered -1, -2, …).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from margin.adapters import index_blocks, index_rows, private_files
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.terms import path_terms
from margin.core.workspace_files import Stamp

FORMAT = 7
"""the layout's version, in `meta`: a file of another version is made anew"""
CHUNK = 2048
"""documents a postings row of the code covers (at most 65,536: a row holds them as 2-byte
offsets)"""
PATH = "/"
"""what path terms are prefixed with in `postings` (terms never hold a '/')"""
PATH_CHUNK = 8 * CHUNK
"""documents a path key's row covers. A query reads a row a key and chunk; path rows are short
(a path has a few terms, and only adding or removing a file changes them), so wider chunks
cost a build little (a batch's path rows are appended to its chunk's) and take a query's
path keys from 49 chunks to 7 at 100,000 files. A multiple of CHUNK, so that a build's batch
(never across a CHUNK) is in one path chunk. Path chunks are numbered -1, -2, … in `blocks`."""
CACHE_KB = 8 * 1024
"""SQLite's page cache for the index (its default is 2 MB): the small index of blocks (about 4 MB at
100,000 files) stays cached, with the blocks a query reads"""
SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    doc INTEGER PRIMARY KEY,
    file_id TEXT NOT NULL UNIQUE,
    size INTEGER,
    mtime_ns INTEGER,
    fingerprint TEXT NOT NULL,
    length INTEGER NOT NULL,
    path_length INTEGER NOT NULL,
    lines INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS forms (
    doc INTEGER PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS blocks (
    id INTEGER PRIMARY KEY,
    chunk INTEGER NOT NULL,
    first TEXT NOT NULL,
    keys TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS blocks_by_first ON blocks (chunk, first);
"""



def chunk_of(key: str, doc: int) -> int:
    """The chunk, as `blocks` numbers it, of `doc`'s row of `key`."""
    return -1 - doc // PATH_CHUNK if key.startswith(PATH) else doc // CHUNK


def chunk_start(chunk: int) -> int:
    """The first document of a chunk as `blocks` numbers it."""
    return (-1 - chunk) * PATH_CHUNK if chunk < 0 else chunk * CHUNK


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA busy_timeout = 5000")
    db.execute(f"PRAGMA cache_size = -{CACHE_KB}")
    return db


class IndexWriter:
    """The connection that writes the index, taken in turn (`lock`)."""

    def __init__(self, path: Path) -> None:
        private_files.folder(path.parent, own=True)  # the index folder: Margin's alone
        private_files.sqlite_file(path)
        self.db, self.lock = connect(path), threading.Lock()
        with self.lock:
            self._prepare()

    def _prepare(self) -> None:
        """The tables, made anew when the file holds another version's (or none)."""
        with self.transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID")
            row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != FORMAT:
                for table in ("files", "forms", "postings", "blocks"):
                    db.execute(f"DROP TABLE IF EXISTS {table}")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)

    def close(self) -> None:
        with self.lock:
            self.db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection in one write transaction (the caller holds `lock`)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def keep_stamp(self, file_id: str, fingerprint: str, stamp: Stamp) -> bool:
        """The stamp set, when the text indexed has this fingerprint (False: it has not)."""
        with self.lock:
            row = self.db.execute("SELECT doc, fingerprint FROM files WHERE file_id = ?", (file_id,)).fetchone()
            if row is None or row[1] != fingerprint:
                return False
            with self.transaction() as db:
                db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE doc = ?", (*stamp, row[0]))
            return True

    def remove(self, file_id: str) -> bool:
        with self.lock, self.transaction() as db:
            row = db.execute("SELECT files.doc, data FROM files JOIN forms USING (doc) WHERE file_id = ?",
                                   (file_id,)).fetchone()
            if row is None:
                return False
            doc = row[0]
            changes: dict[int, dict[str, dict[int, int]]] = {}
            for key in _keys(index_rows.file_terms(row[1]), file_id):
                changes.setdefault(chunk_of(key, doc), {})[key] = {doc: 0}
            self.apply(changes)
            db.execute("DELETE FROM files WHERE doc = ?", (doc,))
            db.execute("DELETE FROM forms WHERE doc = ?", (doc,))
        return True

    def write(self, entries: Sequence[tuple[str, FileData, Stamp | None]],
              pause: Callable[[], None] = lambda: None) -> None:
        """Files indexed anew (each replacing its earlier form), in one transaction. A build
        writes a batch of new files at once: their documents come after every document there
        was, so their rows are made whole in memory and written as blocks, in key order, with
        no look-up — but in a chunk that has blocks already (where the last batch ended), where
        they are appended to the keys' rows there (`apply`). A file indexed before changes only
        the rows of the terms whose count changed. `pause()` is called before each file (a
        build gives way to the editor's requests; if it raises, nothing is written)."""
        # a file named twice: its last text (files already indexed are looked up at once, below)
        entries = list({file_id: (file_id, entry, stamp) for file_id, entry, stamp in entries}.values())
        with self.lock, self.transaction() as db:
            changes: dict[int, dict[str, dict[int, int]]] = {}
            """chunk → postings key → {doc: its new tf, 0 to drop it}"""
            start = fresh = self._next_doc()
            rows, path_rows = index_rows.FreshRows(CHUNK), index_rows.FreshRows(PATH_CHUNK)
            known = {row[0]: row[1:] for row in db.execute(
                "SELECT file_id, files.doc, data, fingerprint, lines FROM files JOIN forms USING (doc) "
                "WHERE file_id IN (SELECT value FROM json_each(?))", (json.dumps([e[0] for e in entries]),))}
            files, forms = [], []
            for file_id, entry, stamp in entries:
                pause()
                paths = Counter(path_terms(file_id))
                counts = entry.counts
                length, path_length = sum(counts), sum(paths.values())
                if (row := known.get(file_id)) is not None:  # only the terms whose count changed: an edit changes a few
                    doc = row[0]
                    before = index_rows.unpack_file(row[1], row[2], row[3])
                    old = dict(zip(before.term_list(), before.counts, strict=True))
                    new = dict(zip(entry.term_list(), counts, strict=True))
                    for term in old.keys() | new.keys():
                        if (tf := new.get(term, 0)) != old.get(term, 0):
                            changes.setdefault(doc // CHUNK, {}).setdefault(term, {})[doc] = tf
                else:
                    doc, start = start, start + 1
                    rows.add(doc, entry.terms, counts)
                    path_rows.add(doc, " ".join(PATH + term for term in paths), list(paths.values()))
                files.append((doc, file_id, *(stamp or (None, None)), entry.fingerprint, length, path_length,
                              entry.lines))
                forms.append((doc, index_rows.pack_file(entry)))
            db.executemany("INSERT OR REPLACE INTO files (doc, file_id, size, mtime_ns, fingerprint, length, "
                           "path_length, lines) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", files)
            db.executemany("INSERT OR REPLACE INTO forms (doc, data) VALUES (?, ?)", forms)
            # the new documents' rows: whole blocks, but in the chunk the last batch ended in
            # (which has blocks), rows appended to the keys' rows there; path chunks numbered
            # as `blocks` numbers them
            blocks, rows_apart = rows.blocks(merged=self._chunks_with_blocks(fresh // CHUNK, fresh // CHUNK))
            path_blocks, path_apart = path_rows.blocks(
                merged=self._chunks_with_blocks(-1 - fresh // PATH_CHUNK, fresh // PATH_CHUNK))
            appended: dict[int, dict[str, bytes]] = {}
            for chunk, key, row in rows_apart:  # documents after every one the key's row there has
                appended.setdefault(chunk, {})[key] = row
            for chunk, key, row in path_apart:
                appended.setdefault(-1 - chunk, {})[key] = row
            self.apply(changes, appended)
            db.executemany("INSERT INTO blocks (chunk, first, keys, data) VALUES (?, ?, ?, ?)",
                           [*blocks, *((-1 - chunk, *block) for chunk, *block in path_blocks)])

    def next_doc(self) -> int:
        """The document number the next new file takes."""
        with self.lock:
            return self._next_doc()

    def _next_doc(self) -> int:
        row = self.db.execute("SELECT max(doc) FROM files").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def _chunks_with_blocks(self, chunk: int, number: int) -> set[int]:
        """{number} (the chunk's number for index_rows.FreshRows) if the chunk `chunk` (as
        `blocks` numbers it: the chunk of the first document to come) has blocks, else {}: the
        chunks after it hold no document yet."""
        return {number} if self.db.execute("SELECT 1 FROM blocks WHERE chunk = ? LIMIT 1", (chunk,)).fetchone() else set()

    def apply(self, changes: dict[int, dict[str, dict[int, int]]],
              appended: dict[int, dict[str, bytes]] | None = None) -> None:
        """Keys' rows changed, chunk by chunk: documents' term frequencies set (`changes`, 0
        drops one), then rows of later documents appended (`appended`). Each block a change
        falls in is read, changed and written again (cut anew when it has grown)."""
        appended = appended or {}
        for chunk in changes.keys() | appended.keys():
            parts, more = changes.get(chunk, {}), appended.get(chunk, {})
            firsts = [row[0] for row in self.db.execute("SELECT first FROM blocks WHERE chunk = ? ORDER BY first",
                                                        (chunk,))]
            by_block: dict[str | None, list[str]] = {}
            # each key's block: the one whose first key is the greatest not after the key (or the first)
            for key in parts.keys() | more.keys():
                by_block.setdefault(firsts[max(bisect_right(firsts, key) - 1, 0)] if firsts else None, []).append(key)
            for first, keys in by_block.items():
                rows: dict[str, bytes] = {}
                if first is not None:
                    found = self.db.execute("SELECT keys, data FROM blocks WHERE chunk = ? AND first = ?",
                                            (chunk, first)).fetchone()
                    rows = index_blocks.decode(*found)
                before = dict(rows)
                for key in keys:
                    row = rows.get(key)
                    if key in parts and (merged := index_rows.merged(chunk_start(chunk), row, parts[key])) is not None:
                        row = merged
                    if key in more:
                        row = index_rows.appended(row, more[key]) if row else more[key]
                    if row:
                        rows[key] = row
                    else:
                        rows.pop(key, None)
                if rows == before:
                    continue
                if first is not None:
                    self.db.execute("DELETE FROM blocks WHERE chunk = ? AND first = ?", (chunk, first))
                names = sorted(rows)
                self.db.executemany("INSERT INTO blocks (chunk, first, keys, data) VALUES (?, ?, ?, ?)",
                                    ((chunk, *block) for block in index_blocks.cut(names, [rows[n] for n in names])))


def _keys(terms: str, file_id: str) -> Iterator[str]:
    """The postings keys a file's row stands in: its terms and its path's."""
    if terms:
        yield from terms.split(" ")
    for term in dict.fromkeys(path_terms(file_id)):
        yield PATH + term
