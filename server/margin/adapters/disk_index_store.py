"""Where a workspace folder's on-disk retrieval index lives (core.index_store.IndexStore): one
SQLite file per folder, `index/<folder hash>.db` beside the thread database, shared by every
server of the folder. A rebuild (each start-up) walks the folder's scan against it: a file whose
stamp is the one indexed is taken as it is (nothing read), a new or changed one is read and
written in batches, and what the scan no longer finds is removed when it ends. Each batch lands
as it is written, so the index answers from what is indexed so far while it builds (`live`).

A file that is not an index SQLite can open (damaged) is made anew; one of another layout's
version is emptied by adapters.index_writer. What earlier versions of Margin kept for the folder
(`<folder hash>.json.gz`, the index in memory's) is deleted."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
import time
from pathlib import Path

from margin.adapters.index_db import CHUNK, DiskIndex
from margin.core.index_store import Pause, WorkspaceIndex
from margin.core.retrieval import filedata
from margin.core.retrieval.filedata import FileData
from margin.core.workspace_files import Stamp

log = logging.getLogger(__name__)

STORE_SUFFIX = ".db"
FLUSH_S = 1.0
PENDING_LINES = 400_000
"""a build's batch is written when it fills the chunk its first document is in (a chunk's rows
are then written whole, as blocks: adapters.index_writer), or holds this many lines, or — until
a batch has filled a chunk — is older than its time (FLUSH_S for the first, then twice the last
one's): a cold start answers from what it has read within a second, and later batches are
whole. What a batch holds in memory until it is written stays near 100 MB whatever the files'
sizes (benchmarks/bench_retrieval.py: the process's growth)"""
EARLIER_SUFFIXES = (".json.gz", ".json.partial")
"""what earlier versions kept a folder's index in"""


class DiskIndexStore:
    def __init__(self, folder: str, directory: Path) -> None:
        self.folder = folder
        self.path = directory / (hashlib.sha256(folder.encode()).hexdigest()[:16] + STORE_SUFFIX)

    def rebuild(self, pause: Pause = lambda: None) -> DiskRebuild:
        for suffix in EARLIER_SUFFIXES:
            with contextlib.suppress(OSError):
                self.path.with_suffix(suffix).unlink(missing_ok=True)
        try:
            return DiskRebuild(DiskIndex(self.path), pause=pause)
        except sqlite3.DatabaseError:  # not a database (damaged): made anew
            log.warning("workspace index unreadable, made anew name=%s", self.path.name)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            return DiskRebuild(DiskIndex(self.path), pause=pause)


class DiskRebuild:
    """A rebuild of the index in place (core.index_store.IndexRebuild)."""

    def __init__(self, index: DiskIndex, batch: int = CHUNK, pause: Pause = lambda: None) -> None:
        self.index = index
        self._pause = pause
        self._stamps = index.stamps()
        """file id → the stamp indexed, as the rebuild began"""
        self._seen: set[str] = set()
        self._pending: list[tuple[str, FileData, Stamp | None]] = []
        self._lines = 0
        self._batch = batch
        self._next = index.writer.next_doc()
        """the document number the next batch's first new file takes"""
        self._flushed, self._wait = time.monotonic(), FLUSH_S
        self._filled = False
        """a batch has filled a chunk: batches are no longer written by age"""
        self.live: WorkspaceIndex | None = index
        self.expected = len(self._stamps)

    def reuse(self, file_id: str, stamp: Stamp) -> bool:
        if self._stamps.get(file_id) != stamp:
            return False
        self._seen.add(file_id)
        return True

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp) -> None:
        self._seen.add(file_id)
        # as indexed: the stamp alone (a file unknown as the rebuild began is not looked up: were it
        # indexed since, writing it again changes nothing)
        if file_id in self._stamps and self.index.writer.keep_stamp(file_id, fingerprint, stamp):
            return
        entry = filedata.from_text(text, fingerprint)
        self._pending.append((file_id, entry, stamp))
        self._lines += entry.lines
        room = self._batch - self._next % self._batch  # new files the chunk the batch begins in has room for
        if len(self._pending) >= room or self._lines >= PENDING_LINES:
            self._filled = self._filled or len(self._pending) >= room
            self.flush()
        elif not self._filled and time.monotonic() - self._flushed >= self._wait:
            self.flush()
            self._wait *= 2

    def flush(self) -> None:
        """Write what was read since the last batch (it answers queries from now on)."""
        if self._pending:
            self.index.write(self._pending, self._pause)
            self._pending, self._lines = [], 0
            self._next = self.index.writer.next_doc()
        self._flushed = time.monotonic()

    def finish(self) -> DiskIndex:
        self.flush()
        for file_id in self._stamps.keys() - self._seen:  # gone from the folder since
            self.index.remove(file_id)
        return self.index
