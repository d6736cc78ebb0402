"""A workspace folder's retrieval index kept between runs as one gzipped JSON file beside the
thread database (`index/<folder hash>.json.gz`): every file read from disk with its size,
modification time, fingerprint and indexed form (core.index_store.StoredFile). Read whole at
start-up, written a file at a time (`.partial`, then renamed) once the index is built; a
missing, damaged or older-version file is an empty store, never an error."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from margin.core.index_store import MemoryRebuild, StoredFile
from margin.core.workspace_files import Stamp

log = logging.getLogger(__name__)

STORE_VERSION = 1


class GzipIndexStore:
    def __init__(self, folder: str, directory: Path) -> None:
        self.folder = folder
        self.path = directory / (hashlib.sha256(folder.encode()).hexdigest()[:16] + ".json.gz")

    def rebuild(self) -> MemoryRebuild:
        return MemoryRebuild(self.load(), self.write)

    def load(self) -> dict[str, StoredFile]:
        try:
            with gzip.open(self.path, "rt", encoding="utf-8") as handle:
                stored = json.load(handle)
            files = stored["files"] if stored.get("version") == STORE_VERSION else {}
            return {file_id: _file(entry) for file_id, entry in files.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def write(self, files: Iterator[tuple[str, StoredFile]]) -> None:
        """The index stored as one JSON document, written a file at a time as `files` gives them."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial")
            with gzip.open(partial, "wt", encoding="utf-8", compresslevel=3) as handle:
                handle.write(json.dumps({"version": STORE_VERSION, "folder": self.folder})[:-1] + ', "files": {')
                first = True
                for file_id, kept in files:
                    entry = {"size": kept.stamp.size, "mtime_ns": kept.stamp.mtime_ns,
                             "fingerprint": kept.fingerprint, "data": kept.data}
                    handle.write(("" if first else ", ") + json.dumps(file_id) + ": " + json.dumps(entry))
                    first = False
                handle.write("}}")
            os.replace(partial, self.path)
        except OSError as error:
            log.warning("index not stored error=%s", type(error).__name__)


def _file(entry: dict[str, Any]) -> StoredFile:
    return StoredFile(Stamp(entry["size"], entry["mtime_ns"]), entry["fingerprint"], entry["data"])
