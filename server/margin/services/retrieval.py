"""Workspace snippets for chat and edit-ops: one retrieval index (core.index_store) per workspace
folder, kept up to date without a rescan per request. The folder's files, its git history and
where its index is kept are ports (core.workspace_files, core.git_history, core.index_store)
that margin.wiring provides.

- Start-up: each folder is scanned once in the background (what git would not ignore, text
  files only). A file whose size and modification time match the stored index (kept beside the
  thread database) is taken over from it without being read; the others are read and indexed.
  The new index replaces the old one when the scan ends, and is stored again.
- While the user works: open buffers are indexed as they are now at each request (only those
  whose fingerprint changed: a cost proportional to the changed files); a saved or closed file
  is read again from disk at the next request.
- Git: where the folder is in a repository, its recent history (read again when HEAD moves)
  gives each file's recency, co-change with the files being worked on, and past commit
  subjects (core.retrieval.signals).

Snippets are windows of lines; each becomes a FileRef whose URI names the lines
(`file:///ws/a.py#L31-60`), so prompts send it, retain it and resend it exactly as a file.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Hashable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from margin import logs
from margin.core.assemble import FileRef
from margin.core.git_history import GitHistory
from margin.core.index_store import IndexStore, NoStoredIndex, Pause, WorkspaceIndex
from margin.core.languages import language_of
from margin.core.retrieval import History, Hit, Signals
from margin.core.vfs import VirtualFile, fingerprint
from margin.core.workspace_files import FolderFiles, read_for_index
from margin.services.app import MarginApp
from margin.services.workspace import path_of

log = logging.getLogger(__name__)

MAX_SNIPPETS = 6
LINES_KEPT = 32
"""files whose lines are kept for snippet windows, per folder (the hits of the last few requests)"""


@dataclass
class FolderIndex:
    """One workspace folder's index, and the outside things it is made from."""

    folder: str
    files: FolderFiles
    git: GitHistory
    index: WorkspaceIndex | None = None
    """None until the first scan has built it"""
    dirty: set[str] = field(default_factory=set)
    """file ids to read again from disk (saved or closed since)"""
    history: History | None = None
    head: float | None = None
    """when git's HEAD last moved, as the history was read"""
    scanning: asyncio.Task[Any] | None = None
    lines: OrderedDict[str, tuple[Hashable, list[str] | None]] = field(default_factory=OrderedDict)
    """the lines of files snippets were cut from lately, by file id, with what they were read at
    (an open file's fingerprint, a file's stamp on disk): read again once that changes"""

    @property
    def prefix(self) -> str:
        """what the URIs of the folder's files start with"""
        return self.folder.rstrip("/") + "/"


class Retrieval:
    def __init__(self, app: MarginApp) -> None:
        self.app = app
        self._folders: dict[str, FolderIndex] = {}
        self._refused: set[str] = set()
        """workspace folders not to index (FolderFiles.why_not_indexed), told once"""

    def folder(self, folder: str) -> FolderIndex | None:
        """The index of a workspace folder, its scan started on first use (None: not local, or
        not a folder to index, which the user is told once)."""
        known = self._folders.get(folder)
        if known is None:
            root = path_of(folder) if folder else None
            if root is None or folder in self._refused:
                return None
            files = self.app.workspace_access.files(root)
            if not files.is_folder():
                return None
            if (why := files.why_not_indexed()) is not None:
                self._refused.add(folder)
                log.warning("workspace folder not indexed folder=%s", logs.name(folder))
                self.app.tell_user(f"Margin does not index {root} for workspace snippets: {why}. Open a "
                                   "project's folder instead; chat and edits work as usual, without snippets.")
                return None
            known = self._folders[folder] = FolderIndex(folder, files, self.app.workspace_access.git(root))
        if known.scanning is None:
            known.scanning = self.app.run_in_background(self._scan(known), f"index {folder}")
        return known

    def warm(self, folders: Collection[str]) -> None:
        """Start indexing the workspace folders (at start-up, when retrieval is on)."""
        if self.app.settings.current.globals.retrieval:
            for folder in folders:
                self.folder(folder)

    async def indexed(self, text_document: str | None) -> None:
        """Until the index of `text_document`'s workspace folder is built (the terminal waits:
        its one request should see what the editor's would)."""
        if self.app.settings.current.globals.retrieval:
            index = self.folder(self.app.workspace.folder_of(text_document))
            if index is not None and index.scanning is not None and index.index is None:
                await asyncio.wait([index.scanning])

    def touched(self, uri: str) -> None:
        """A file was closed, or changed on disk: read it from disk at the next request."""
        for index in self._folders.values():
            if uri.startswith(index.prefix):
                index.dirty.add(self.app.workspace.file_id(uri))

    async def snippets(self, message: str, text_document: str | None, shown: Collection[str],
                       limit: int = MAX_SNIPPETS) -> list[FileRef]:
        """Windows of workspace files relevant to `message`, most relevant first; never of the
        files in `shown` (URIs the prompt may show whole)."""
        if not self.app.settings.current.globals.retrieval or not message.strip():
            return []
        index = self.folder(self.app.workspace.folder_of(text_document))
        if index is None or index.index is None:
            return []
        started = time.perf_counter()
        self._refresh(index, index.index)
        if (head := index.git.head_moved()) != index.head:  # a commit or checkout since: read it anew
            index.head = head
            self.app.run_in_background(self._read_history(index, head), f"git history {index.folder}")
        file_id = self.app.workspace.file_id
        mine = [f for f in self.app.files.files() if f.uri.startswith(index.prefix)]
        active = [file_id(text_document)] if text_document else []
        edited = [file_id(f.uri) for f in self.app.files.recently_edited() if f in mine]
        signals = Signals(index.history, active + [file_id(f.uri) for f in mine], edited)
        hits = index.index.search(message, limit=limit, signals=signals, exclude={file_id(uri) for uri in shown})
        lines: dict[str, list[str] | None] = {}  # a file's lines, read once for its windows
        refs = [ref for hit in hits if hit.similarity > 0 and (ref := self._ref(index, hit, lines)) is not None]
        log.info("retrieval files=%d hits=%d snippets=%d ms=%.1f", len(index.index), len(hits), len(refs),
                 (time.perf_counter() - started) * 1000)
        return refs

    # --- keeping the index current ----------------------------------------------------------

    def _refresh(self, index: FolderIndex, searched: WorkspaceIndex) -> None:
        for file in self.app.files.files():
            if file.uri.startswith(index.prefix):
                searched.put(self.app.workspace.file_id(file.uri), file.text, file.fingerprint)
        for file_id in list(index.dirty):
            index.dirty.discard(file_id)
            if f"{index.prefix}{quote(file_id)}" in self.app.files:
                continue
            text = read_for_index(index.files, file_id) if index.files.indexable(file_id) else None
            if text is None:
                searched.remove(file_id)
                continue
            searched.put(file_id, text, fingerprint(text), index.files.stamp(file_id))

    @staticmethod
    async def _read_history(index: FolderIndex, head: float | None) -> None:
        commits = await index.git.commits() if head is not None else None
        index.history = History(commits) if commits is not None else None

    async def _scan(self, index: FolderIndex) -> None:
        """Build the folder's index in a thread that gives way between files to every other kind
        of work (services.background), then store it the same way."""
        started = time.perf_counter()
        store = self._store(index)
        stop = threading.Event()
        pause = _Pause(self.app.queue.indexing_may_run, stop)
        try:
            fresh, reused = await asyncio.to_thread(_build, index.files, store, pause)
            index.index = fresh
            log.info("index ready files=%d reused=%d paused_ms=%.0f ms=%.0f", len(fresh), reused,
                     pause.seconds * 1000, (time.perf_counter() - started) * 1000)
            index.head = index.git.head_moved()
            await self._read_history(index, index.head)
            await asyncio.to_thread(fresh.save, pause)
        except asyncio.CancelledError:
            stop.set()  # the thread ends at its next file rather than run on after shutdown
            raise

    def _store(self, index: FolderIndex) -> IndexStore:
        """Where the folder's index is kept: beside the thread database, or nowhere when that
        is not on disk either."""
        if not self.app.storage.persistent:
            return NoStoredIndex()
        return self.app.workspace_access.index_store(index.folder, self.app.storage.path.parent / "index")

    def _ref(self, index: FolderIndex, hit: Hit, read: dict[str, list[str] | None]) -> FileRef | None:
        uri = f"{index.prefix}{quote(hit.file_id)}"
        if hit.file_id not in read:
            read[hit.file_id] = self._lines(index, hit.file_id, uri)
        if (every_line := read[hit.file_id]) is None:
            return None
        lines = every_line[hit.start_line:hit.end_line]
        if not "".join(lines).strip():
            return None
        first, last = hit.start_line + 1, hit.start_line + len(lines)
        language = language_of(hit.file_id, "text")
        return FileRef(VirtualFile(f"{uri}#L{first}-{last}", language, 0, "".join(lines)),
                       f"{hit.file_id} lines {first}-{last}")


    def _lines(self, index: FolderIndex, file_id: str, uri: str) -> list[str] | None:
        """The file's lines: the open file's, else the file's on disk; kept while the file stays
        as it was (a stat, not a read, for a file hit again by the next request)."""
        open_file = self.app.files.get(uri)
        version: Hashable = ("open", open_file.fingerprint) if open_file is not None else index.files.stamp(file_id)
        kept = index.lines.pop(file_id, None)
        if kept is not None and kept[0] == version and version is not None:
            lines = kept[1]
        else:
            text = open_file.text if open_file is not None else read_for_index(index.files, file_id)
            lines = text.splitlines(keepends=True) if text is not None else None
        index.lines[file_id] = (version, lines)
        while len(index.lines) > LINES_KEPT:
            index.lines.popitem(last=False)
        return lines


class _Stopped(Exception):
    """indexing was cancelled (shutdown)"""


class _Pause:
    """Called by the indexing thread between files: returns when indexing may go on (waiting
    while other work runs), raises _Stopped once indexing is cancelled."""

    def __init__(self, may_run: threading.Event, stop: threading.Event) -> None:
        self.may_run, self.stop, self.seconds = may_run, stop, 0.0

    def __call__(self) -> None:
        if not self.may_run.is_set():
            started = time.perf_counter()
            while not self.may_run.wait(0.1):
                if self.stop.is_set():
                    raise _Stopped
            self.seconds += time.perf_counter() - started
        if self.stop.is_set():
            raise _Stopped


def _build(files: FolderFiles, store: IndexStore, pause: Pause = lambda: None) -> tuple[WorkspaceIndex, int]:
    """A new index of the folder's files, taking over from `store` each file whose stamp is
    unchanged (and how many were); `pause()` is called before each file."""
    rebuild, reused = store.rebuild(), 0
    for found in files.scan():
        pause()
        if rebuild.reuse(found.file_id, found.stamp):
            reused += 1
            continue
        text = read_for_index(files, found.file_id)
        if text is not None:
            rebuild.put(found.file_id, text, fingerprint(text), found.stamp)
    return rebuild.finish(), reused
