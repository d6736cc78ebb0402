"""The writing side of the on-disk retrieval index (adapters.index_db): the file's layout, and
the one connection that writes it — a file's rows replaced, its postings changed term by term,
a build's chunk of new files appended.

Tables: `files` (a row a file: its document number, id, stamp, fingerprint, BM25 lengths),
`forms` (each file's indexed form, core.retrieval.filedata.FileData, packed: what windows are
scored from and what a change is compared with) and `postings` (chunk, term) → the documents of
that chunk holding the term, with their term frequencies (index_rows). Path terms are postings
too, under PATH + term.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from margin.adapters import index_rows
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.terms import path_terms
from margin.core.workspace_files import Stamp

FORMAT = 5
"""the layout's version, in `meta`: a file of another version is made anew"""
CHUNK = 2048
"""documents a postings row covers (at most 65,536: a row holds them as 2-byte offsets)"""
PATH = "/"
"""what path terms are prefixed with in `postings` (terms never hold a '/')"""
CACHE_KB = 16 * 1024
"""SQLite's page cache for the index (its default is 2 MB): a build's chunk of postings rows
written in key order touches each page once while it is cached"""
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
CREATE TABLE IF NOT EXISTS postings (
    term TEXT NOT NULL,
    chunk INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (chunk, term)
) WITHOUT ROWID;
"""



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
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db, self.lock = connect(path), threading.Lock()
        self.db.create_function("margin_appended", 2, index_rows.appended, deterministic=True)
        with self.lock:
            self._prepare()

    def _prepare(self) -> None:
        """The tables, made anew when the file holds another version's (or none)."""
        with self.transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID")
            row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != FORMAT:
                for table in ("files", "forms", "postings"):
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
            self.apply({key: {doc: 0} for key in _keys(index_rows.file_terms(row[1]), file_id)})
            db.execute("DELETE FROM files WHERE doc = ?", (doc,))
            db.execute("DELETE FROM forms WHERE doc = ?", (doc,))
        return True

    def write(self, entries: Sequence[tuple[str, FileData, Stamp | None]],
              pause: Callable[[], None] = lambda: None) -> None:
        """Files indexed anew (each replacing its earlier form), in one transaction. A build
        writes a batch of new files at once: their documents come after every document there
        was, so their rows are made whole in memory and inserted in key order, each appended to
        the row its key already has in its chunk (none but in the chunk the last batch ended
        in), without a look-up per key. `pause()` is called before each file
        (a build gives way to the editor's requests; if it raises, nothing is written)."""
        with self.lock, self.transaction() as db:
            changes: dict[str, dict[int, int]] = {}
            """postings key → {doc: its new tf, 0 to drop it}"""
            start = self._next_doc()
            rows = index_rows.FreshRows(CHUNK)
            for file_id, entry, stamp in entries:
                pause()
                row = db.execute("SELECT files.doc, data, fingerprint, lines FROM files JOIN forms USING (doc) "
                                       "WHERE file_id = ?",
                                       (file_id,)).fetchone()
                paths = Counter(path_terms(file_id))
                counts, names = entry.counts, entry.term_list()
                length, path_length = sum(counts), sum(paths.values())
                if row is not None:  # only the terms whose count changed: an edit changes a few
                    doc = row[0]
                    before = index_rows.unpack_file(row[1], row[2], row[3])
                    old = dict(zip(before.term_list(), before.counts, strict=True))
                    new = dict(zip(names, counts, strict=True))
                    for term in old.keys() | new.keys():
                        if (tf := new.get(term, 0)) != old.get(term, 0):
                            changes.setdefault(term, {})[doc] = tf
                else:
                    doc, start = start, start + 1
                    rows.add(doc, names + [PATH + term for term in paths], [*counts, *paths.values()])
                db.execute(
                    "INSERT OR REPLACE INTO files (doc, file_id, size, mtime_ns, fingerprint, length, path_length, "
                    "lines) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc, file_id, *(stamp or (None, None)), entry.fingerprint, length, path_length, entry.lines))
                db.execute("INSERT OR REPLACE INTO forms (doc, data) VALUES (?, ?)",
                                 (doc, index_rows.pack_file(entry)))
            self.apply(changes)
            # in key order; a key's row in the chunk the last batch ended in has only documents
            # before these: they are appended to it
            db.executemany("INSERT INTO postings (chunk, term, data) VALUES (?, ?, ?) ON CONFLICT (chunk, term) "
                           "DO UPDATE SET data = margin_appended(data, excluded.data)", rows.rows())

    def _next_doc(self) -> int:
        row = self.db.execute("SELECT max(doc) FROM files").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def apply(self, changes: dict[str, dict[int, int]]) -> None:
        """Each key's postings changed, a row per chunk: documents added, changed or (tf 0)
        dropped."""
        for key, docs in changes.items():
            by_chunk: dict[int, dict[int, int]] = {}
            for doc, tf in docs.items():
                by_chunk.setdefault(doc // CHUNK, {})[doc] = tf
            for chunk, part in by_chunk.items():
                row = self.db.execute("SELECT data FROM postings WHERE chunk = ? AND term = ?", (chunk, key)).fetchone()
                changed = index_rows.merged(chunk * CHUNK, row[0] if row else None, part)
                if changed:
                    self.db.execute("INSERT OR REPLACE INTO postings (chunk, term, data) VALUES (?, ?, ?)",
                                     (chunk, key, changed))
                elif changed is not None and row is not None:
                    self.db.execute("DELETE FROM postings WHERE chunk = ? AND term = ?", (chunk, key))


def _keys(terms: str, file_id: str) -> Iterator[str]:
    """The postings keys a file's row stands in: its terms and its path's."""
    if terms:
        yield from terms.split(" ")
    for term in dict.fromkeys(path_terms(file_id)):
        yield PATH + term
