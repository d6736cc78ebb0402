"""A workspace folder's retrieval index on disk: one SQLite file, queried in place, so the
server's memory does not grow with the workspace.

Tables: `files` (one row a file: its document number, id, stamp, fingerprint, BM25 lengths and
its indexed form, `core.retrieval.filedata.FileData`, for scoring the windows of the files a
query ranks best) and `postings` (term, chunk) → the documents of that chunk holding the term
and their term frequencies, as little-endian arrays. A chunk is CHUNK documents: a term's
posting is a few rows however common the term, and a file changed rewrites one row per term it
holds, not the term's whole posting. Path terms are postings too, under PATH + term.

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
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from margin.adapters import index_rows
from margin.core.retrieval import DEFAULT_WEIGHTS, Hit, Signals, Weights, filedata, ranking
from margin.core.retrieval.dense import Posting, bm25
from margin.core.retrieval.filedata import FileData
from margin.core.retrieval.terms import path_terms
from margin.core.workspace_files import Stamp

FORMAT = 4
"""the layout's version, in `meta`: a file of another version is made anew"""
CHUNK = 2048
"""documents a postings row covers (at most 65,536: a row holds them as 2-byte offsets)"""
PATH = "/"
"""what path terms are prefixed with in `postings` (terms never hold a '/')"""
NAMES_KEPT = 50_000
"""file ids kept by document number (and back) between queries, at most"""
CACHE_KB = 16 * 1024
"""SQLite's page cache for the index (its default is 2 MB): a build's chunk of postings rows
written in key order touches each page once while it is cached"""
CONTENT_B, PATH_B = 0.75, 0.3
"""BM25's b for the code and the path fields (core.retrieval.index's; k1 is dense.K1)"""

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

class DiskIndex:
    """The index in one SQLite file: a core.index_store.WorkspaceIndex, ranked by
    core.retrieval.ranking as the index in memory is. Thread-safe. Queries and writes have a
    connection each (WAL: a query reads the last commit while a build's batch is written), each
    taken in turn."""

    def __init__(self, path: Path, weights: Weights = DEFAULT_WEIGHTS) -> None:
        self.path = path
        self.weights = weights
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer, self._write_lock = self._connect(), threading.Lock()
        with self._write_lock:
            self._prepare()
        self._db, self._lock = self._connect(), threading.RLock()
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

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA busy_timeout = 5000")
        db.execute(f"PRAGMA cache_size = -{CACHE_KB}")
        return db

    def _prepare(self) -> None:
        """The tables, made anew when the file holds another version's (or none)."""
        with self._transaction():
            self._writer.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID")
            row = self._writer.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None or row[0] != FORMAT:
                for table in ("files", "forms", "postings"):
                    self._writer.execute(f"DROP TABLE IF EXISTS {table}")
                self._writer.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self._writer.execute(statement)

    def close(self) -> None:
        with self._write_lock:
            self._writer.close()
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The writer's connection in one write transaction (the caller holds `_write_lock`)."""
        self._writer.execute("BEGIN IMMEDIATE")
        try:
            yield self._writer
        except BaseException:
            self._writer.execute("ROLLBACK")
            raise
        self._writer.execute("COMMIT")

    # ---- the documents' lengths -----------------------------------------------------------

    def _current(self) -> None:
        """The lengths as the file holds them: read again after any commit (the writer's
        connection is another connection too)."""
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
            return self._count

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
        with self._lock:
            row = self._db.execute("SELECT files.doc, fingerprint, lines, data FROM files JOIN forms USING (doc) "
                                   "WHERE file_id = ?",
                                   (file_id,)).fetchone()
        if row is None:
            return None
        entry = index_rows.unpack_file(row[3], row[1], row[2])
        entry.doc = row[0]
        return entry

    def docs_of(self, file_ids: Iterable[str]) -> dict[str, int]:
        """The document numbers of the files indexed among `file_ids`."""
        return self._pairs("SELECT file_id, doc FROM files WHERE file_id IN ", file_ids, self._docs)

    def names_of(self, docs: Iterable[int]) -> dict[int, str]:
        """The file ids of the documents among `docs`."""
        return self._pairs("SELECT doc, file_id FROM files WHERE doc IN ", docs, self._names)

    def _pairs(self, select: str, keys: Iterable[Any], kept: dict[Any, Any]) -> dict[Any, Any]:
        """`select`'s pairs for `keys`, those looked up lately from `kept` (a query asks for the
        names of the same best documents as the last: the files a common term ranks first)."""
        with self._lock:
            self._current()
            found = {key: kept[key] for key in keys if key in kept}
            wanted = [key for key in dict.fromkeys(keys) if key not in found]
            for start in range(0, len(wanted), 500):  # under SQLite's limit of variables a statement
                part = wanted[start:start + 500]
                found.update(self._db.execute(f"{select}({','.join('?' * len(part))})", part).fetchall())
            if len(kept) > NAMES_KEPT:
                kept.clear()
            kept.update(found)
        return found

    def _postings(self, keys: Iterable[str]) -> dict[str, Posting]:
        found = {}
        for key in dict.fromkeys(keys):
            rows = self._db.execute(self._by_term("chunk, data"), (key,)).fetchall()
            if rows:
                parts = [index_rows.decode(chunk * CHUNK, data) for chunk, data in rows]
                found[key] = parts[0] if len(parts) == 1 else Posting(
                    np.concatenate([p.docs for p in parts]), np.concatenate([p.tfs for p in parts]))
        return found

    def content_scores(self, terms: Sequence[str], pool: int) -> dict[int, float]:
        """The best `pool` documents by the code's BM25, as `Postings.score` scores them."""
        with self._lock:
            self._current()
            postings = self._postings(terms)
            self._dfs = {term: len(postings[term].docs) if term in postings else 0 for term in terms}
            return bm25(postings, self._count, self._total, self._lengths, CONTENT_B, pool)

    def path_scores(self, terms: Sequence[str], pool: int) -> dict[int, float]:
        """The best `pool` documents by the path's BM25, as `bm25.Field.score` scores them."""
        with self._lock:
            self._current()
            found = {key[len(PATH):]: p for key, p in self._postings(PATH + t for t in terms).items()}
            return bm25(found, self._count, self._path_total, self._path_lengths, PATH_B, pool)

    def df(self, term: str) -> int:
        with self._lock:
            self._current()
            rows = self._db.execute(self._by_term("data"), (term,)).fetchall()
        return sum(index_rows.size(r[0]) for r in rows)

    def idf(self, term: str) -> float:
        """The code field's idf of `term`, as `Postings.idf` (the document frequency the last
        `content_scores` read, when it read the term: a query asks both)."""
        with self._lock:
            self._current()
            df = self._dfs[term] if term in self._dfs else self.df(term)
            n = self._count
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5)) if df else 0.0

    def search(self, query: str, *, limit: int = 8, signals: Signals | None = None,
               exclude: Collection[str] = ()) -> list[Hit]:
        return ranking.search(self, query, limit=limit, signals=signals, exclude=exclude)

    def save(self, pause: Callable[[], None]) -> None:
        """Nothing to do: every write has landed in the file."""

    # ---- writing ----------------------------------------------------------------------------

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp | None = None) -> bool:
        """Index `text` as the file's; False (only the stamp kept) when the fingerprint is the
        one indexed."""
        with self._write_lock:
            row = self._writer.execute("SELECT doc, fingerprint FROM files WHERE file_id = ?", (file_id,)).fetchone()
            if row is not None and row[1] == fingerprint:
                with self._transaction() as db:
                    db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE doc = ?",
                               (*(stamp or (None, None)), row[0]))
                return False
        self.write([(file_id, filedata.from_text(text, fingerprint), stamp)])
        return True

    def remove(self, file_id: str) -> bool:
        with self._write_lock, self._transaction() as db:
            row = db.execute("SELECT files.doc, data FROM files JOIN forms USING (doc) WHERE file_id = ?",
                                   (file_id,)).fetchone()
            if row is None:
                return False
            doc = row[0]
            self._apply({key: {doc: 0} for key in _keys(index_rows.file_terms(row[1]), file_id)})
            db.execute("DELETE FROM files WHERE doc = ?", (doc,))
            db.execute("DELETE FROM forms WHERE doc = ?", (doc,))
        return True

    def write(self, entries: Sequence[tuple[str, FileData, Stamp | None]]) -> None:
        """Files indexed anew (each replacing its earlier form), in one transaction. A build
        writes a chunk's files at once: the rows of a chunk past every document there was are
        new, and are inserted without being looked for."""
        with self._write_lock, self._transaction() as db:
            changes: dict[str, dict[int, int]] = {}
            """postings key → {doc: its new tf, 0 to drop it}"""
            start = self._next_doc()
            fresh, rows = -(-start // CHUNK), index_rows.FreshRows(CHUNK)  # the first chunk no document was in
            for file_id, entry, stamp in entries:
                row = db.execute("SELECT files.doc, data, fingerprint, lines FROM files JOIN forms USING (doc) "
                                       "WHERE file_id = ?",
                                       (file_id,)).fetchone()
                paths = Counter(path_terms(file_id))
                counts = entry.counts
                length, path_length = sum(counts), sum(paths.values())
                new = dict(zip(entry.term_list(), counts, strict=True))
                if row is not None:  # only the terms whose count changed: an edit changes a few
                    doc = row[0]
                    before = index_rows.unpack_file(row[1], row[2], row[3])
                    old = dict(zip(before.term_list(), before.counts, strict=True))
                    for term in old.keys() | new.keys():
                        if (tf := new.get(term, 0)) != old.get(term, 0):
                            changes.setdefault(term, {})[doc] = tf
                else:
                    doc, start = start, start + 1
                    counted = chain(new.items(), ((PATH + term, tf) for term, tf in paths.items()))
                    if doc // CHUNK >= fresh:
                        rows.add(doc, counted)
                    else:
                        for key, tf in counted:
                            changes.setdefault(key, {})[doc] = tf
                db.execute(
                    "INSERT OR REPLACE INTO files (doc, file_id, size, mtime_ns, fingerprint, length, path_length, "
                    "lines) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc, file_id, *(stamp or (None, None)), entry.fingerprint, length, path_length, entry.lines))
                db.execute("INSERT OR REPLACE INTO forms (doc, data) VALUES (?, ?)",
                                 (doc, index_rows.pack_file(entry)))
            self._apply(changes)
            # in key order, past every row there was: the B-tree grows at its end
            db.executemany("INSERT INTO postings (chunk, term, data) VALUES (?, ?, ?)", rows.rows())

    def _next_doc(self) -> int:
        row = self._writer.execute("SELECT max(doc) FROM files").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def _apply(self, changes: dict[str, dict[int, int]]) -> None:
        """Each key's postings changed, a row per chunk: documents added, changed or (tf 0)
        dropped."""
        for key, docs in changes.items():
            by_chunk: dict[int, dict[int, int]] = {}
            for doc, tf in docs.items():
                by_chunk.setdefault(doc // CHUNK, {})[doc] = tf
            for chunk, part in by_chunk.items():
                row = self._writer.execute("SELECT data FROM postings WHERE chunk = ? AND term = ?", (chunk, key)).fetchone()
                changed = index_rows.merged(chunk * CHUNK, row[0] if row else None, part)
                if changed:
                    self._writer.execute("INSERT OR REPLACE INTO postings (chunk, term, data) VALUES (?, ?, ?)",
                                     (chunk, key, changed))
                elif changed is not None and row is not None:
                    self._writer.execute("DELETE FROM postings WHERE chunk = ? AND term = ?", (chunk, key))

    def _by_term(self, columns: str) -> str:
        """A select of a key's rows, chunk by chunk: the rows are keyed by chunk first (a build
        appends), so each chunk is one look-up."""
        chunks = -(-len(self._lengths) // CHUNK)
        return f"SELECT {columns} FROM postings WHERE chunk IN ({','.join(map(str, range(chunks)))}) AND term = ? " \
               "ORDER BY chunk"


def _keys(terms: str, file_id: str) -> Iterator[str]:
    """The postings keys a file's row stands in: its terms and its path's."""
    if terms:
        yield from terms.split(" ")
    for term in dict.fromkeys(path_terms(file_id)):
        yield PATH + term
