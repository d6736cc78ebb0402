"""Where a workspace folder's on-disk retrieval index lives (core.index_store.IndexStore): one
SQLite file per folder, `index/<folder hash>.db` beside the thread database, shared by every
server of the folder. A rebuild (each start-up) walks the folder's scan against it: a file whose
stamp is the one indexed is taken as it is (nothing read), a new or changed one is read and
written in batches, and what the scan no longer finds is removed when it ends. Each batch lands
as it is written, so the index answers from what is indexed so far while it builds."""

from __future__ import annotations

import hashlib
from pathlib import Path

from margin.adapters.index_db import CHUNK, DiskIndex
from margin.core.retrieval import filedata
from margin.core.retrieval.filedata import FileData
from margin.core.workspace_files import Stamp

STORE_SUFFIX = ".db"


class DiskIndexStore:
    def __init__(self, folder: str, directory: Path) -> None:
        self.folder = folder
        self.path = directory / (hashlib.sha256(folder.encode()).hexdigest()[:16] + STORE_SUFFIX)

    def rebuild(self) -> DiskRebuild:
        return DiskRebuild(DiskIndex(self.path))


class DiskRebuild:
    """A rebuild of the index in place (core.index_store.IndexRebuild)."""

    def __init__(self, index: DiskIndex, batch: int = CHUNK) -> None:
        self.index = index
        self._stamps = index.stamps()
        """file id → the stamp indexed, as the rebuild began"""
        self._seen: set[str] = set()
        self._pending: list[tuple[str, FileData, Stamp | None]] = []
        self._batch = batch

    def reuse(self, file_id: str, stamp: Stamp) -> bool:
        if self._stamps.get(file_id) != stamp:
            return False
        self._seen.add(file_id)
        return True

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp) -> None:
        self._seen.add(file_id)
        if self.index.fingerprint(file_id) == fingerprint:
            self.index.put(file_id, text, fingerprint, stamp)  # the stamp alone
            return
        self._pending.append((file_id, filedata.from_text(text, fingerprint), stamp))
        if len(self._pending) >= self._batch:
            self.flush()

    def flush(self) -> None:
        """Write what was read since the last batch (it answers queries from now on)."""
        if self._pending:
            self.index.write(self._pending)
            self._pending = []

    def finish(self) -> DiskIndex:
        self.flush()
        for file_id in self._stamps.keys() - self._seen:  # gone from the folder since
            self.index.remove(file_id)
        return self.index
