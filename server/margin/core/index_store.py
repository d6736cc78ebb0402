"""A workspace folder's retrieval index and where it is kept between runs: the ports the
retrieval service works through, and an index in memory behind them.

- `WorkspaceIndex`: what a folder is searched with. A file is put (from the editor's buffer, or
  from the disk with its `Stamp`) or removed one at a time; `search` ranks (core.retrieval);
  `save(pause)` keeps the index for the next run.
- `IndexStore`: where a folder's index is kept. At start-up `rebuild(pause)` makes the index
  anew as the folder's scan offers each file (work done in its own thread, `pause()` called
  between files, its writes included): `reuse(file_id, stamp)` takes a file over from what was
  kept when its stamp still matches (nothing read), else the file is read and `put`;
  `finish()` gives the new index, which replaces the one searched so far. An index kept on
  disk and written in place answers while it is rebuilt (`live`); one in memory only once built.

The server's index is kept on disk and queried in place (adapters.index_db, kept by
adapters.disk_index_store): `reuse` checks the stamp where it is kept, `put` and `remove`
update one file, `search` queries, `save` has nothing left to do. `MemoryIndex` holds an index
in memory (core.retrieval.RetrievalIndex, with the stamp of each file read from disk beside it),
for a server whose thread store is not on disk either (`NoStoredIndex`: kept nowhere) and for
the tests, which keep it as each file's exported form (`StoredFile`).

A kept index may fail to answer a request (another server of the folder holding the file's write
lock too long, a full disk): it raises `IndexUnavailable`, and the request goes on without
snippets.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from margin.core.retrieval import Hit, RetrievalIndex, Signals
from margin.core.workspace_files import Stamp

Pause = Callable[[], None]
"""called before each file by work done in a thread, to give way to other work (it may raise
to stop that work)"""


class IndexUnavailable(Exception):
    """The kept index could not be read or written just now (nothing was half-applied)."""


class WorkspaceIndex(Protocol):
    def __len__(self) -> int: ...

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp | None = None) -> bool:
        """Index `text` as the file's (in time proportional to the file; nothing when the
        fingerprint is unchanged: False). `stamp`: the text is the file's on disk with this
        stamp; without one (a buffer's text) a changed text no longer matches any stamp."""
        ...

    def remove(self, file_id: str) -> bool:
        """The file out of the index (False: it was not in it)."""
        ...

    def search(self, query: str, *, limit: int, signals: Signals | None,
               exclude: Collection[str]) -> list[Hit]: ...

    def save(self, pause: Pause) -> None:
        """Keep the index for the next run (calling `pause()` before each file)."""
        ...


class IndexRebuild(Protocol):
    live: WorkspaceIndex | None
    """the index to search while the rebuild runs (what it holds so far), or None: nothing to
    search until `finish()`"""
    expected: int
    """how many files the kept index held as the rebuild began (what a warm start will find)"""

    def reuse(self, file_id: str, stamp: Stamp) -> bool:
        """Take the file over from the kept index if it was read from disk with this very stamp."""
        ...

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp) -> None: ...

    def flush(self) -> None:
        """What was put so far answers from `live` from now on."""
        ...

    def finish(self) -> WorkspaceIndex: ...


class IndexStore(Protocol):
    def rebuild(self, pause: Pause = lambda: None) -> IndexRebuild:
        """Start a new index, reusing what was kept (read here: called in a worker thread);
        `pause()` is called between files of the rebuild's writes too."""
        ...


@dataclass(frozen=True)
class StoredFile:
    """One file of a kept index: the stamp of the text indexed, its fingerprint, and its
    indexed form (RetrievalIndex.export_file: JSON-serialisable)."""

    stamp: Stamp
    fingerprint: str
    data: Mapping[str, Any]


Keep = Callable[[Iterator[tuple[str, StoredFile]]], None]
"""writes a kept index from its files, taken one at a time"""


class MemoryIndex:
    """A WorkspaceIndex in memory, kept by `keep` (None: not kept)."""

    def __init__(self, keep: Keep | None = None) -> None:
        self.index = RetrievalIndex()
        self.stamps: dict[str, Stamp] = {}
        """file id → the stamp of the file on disk whose text is indexed"""
        self._keep = keep

    def __len__(self) -> int:
        return len(self.index)

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp | None = None) -> bool:
        changed = self.index.put(file_id, text, fingerprint)
        if stamp is not None:
            self.stamps[file_id] = stamp
        elif changed:
            self.stamps.pop(file_id, None)
        return changed

    def remove(self, file_id: str) -> bool:
        self.stamps.pop(file_id, None)
        return self.index.remove(file_id)

    def search(self, query: str, *, limit: int, signals: Signals | None, exclude: Collection[str]) -> list[Hit]:
        return self.index.search(query, limit=limit, signals=signals, exclude=exclude)

    def save(self, pause: Pause) -> None:
        if self._keep is not None:
            self._keep(self.stored_files(pause))

    def stored_files(self, pause: Pause = lambda: None) -> Iterator[tuple[str, StoredFile]]:
        """Each file read from disk, as kept (`pause()` before each)."""
        for file_id, stamp in list(self.stamps.items()):
            if file_id not in self.index:
                continue
            pause()
            fingerprint = self.index.fingerprint(file_id)
            if fingerprint is not None:
                yield file_id, StoredFile(stamp, fingerprint, self.index.export_file(file_id))


class MemoryRebuild:
    """A MemoryIndex made anew, taking files over from `kept` (what the last run stored)."""

    def __init__(self, kept: Mapping[str, StoredFile], keep: Keep | None = None) -> None:
        self.kept = kept
        self.index = MemoryIndex(keep)
        self.live: WorkspaceIndex | None = None
        self.expected = len(kept)

    def reuse(self, file_id: str, stamp: Stamp) -> bool:
        known = self.kept.get(file_id)
        if known is None or known.stamp != stamp:
            return False
        if not self.index.index.import_file(file_id, known.fingerprint, known.data):
            return False  # an older format, or damaged: read the file again
        self.index.stamps[file_id] = stamp
        return True

    def put(self, file_id: str, text: str, fingerprint: str, stamp: Stamp) -> None:
        self.index.put(file_id, text, fingerprint, stamp)

    def flush(self) -> None:
        """Nothing answers before `finish()`."""

    def finish(self) -> MemoryIndex:
        return self.index


class NoStoredIndex:
    """An IndexStore that keeps nothing (the thread store is not on disk either)."""

    def rebuild(self, pause: Pause = lambda: None) -> MemoryRebuild:
        return MemoryRebuild({})
