"""Workspace snippets for chat and edit-ops: one retrieval index (core.index_store) per workspace
folder, kept up to date without a rescan per request. The folder's files, its git history and
where its index is kept are ports (core.workspace_files, core.git_history, core.index_store)
that margin.wiring provides.

- Start-up: each folder is scanned once in the background (what git would not ignore, text
  files only), the files of its recent commits first. A file whose size and modification time
  match the stored index (kept beside the thread database, shared by the folder's servers) is
  taken over from it without being read; the others are read and indexed. An index kept on
  disk answers from what it holds while the scan runs; one in memory once the scan ends.
  `progress` tells how far it is (margin/status).
- While the user works: open buffers are indexed as they are now at each request (only those
  whose fingerprint changed: a cost proportional to the changed files); a saved or closed file
  is read again from disk at the next request after the scan. In a large folder a request's
  indexing and search run in a thread, one request of a folder at a time, so the editor's other
  requests are answered meanwhile; an index that cannot answer (IndexUnavailable) gives no
  snippets.
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
from margin.core.index_store import IndexRebuild, IndexStore, IndexUnavailable, NoStoredIndex, Pause, WorkspaceIndex
from margin.core.languages import language_of
from margin.core.retrieval import History, Hit, Signals
from margin.core.vfs import VirtualFile, fingerprint
from margin.core.workspace_files import FolderFiles, Stamp, read_for_index
from margin.services.app import MarginApp
from margin.services.workspace import path_of

log = logging.getLogger(__name__)

MAX_SNIPPETS = 6
LINES_KEPT = 32
"""files whose lines are kept for snippet windows, per folder (the hits of the last few requests)"""
RECENT_FIRST = 2000
"""files of the latest commits indexed before the rest of the folder"""
INLINE_FILES = 5000
"""up to this many files in a folder, a request's indexing and search run on the event loop
(about 2 ms on disk at 20 files, 5 ms at 2,000: less than handing them to a thread costs in
CPU, measured by benchmarks/bench_request_overhead.py); beyond, in a thread, so that a slower
query never holds up the editor's other requests"""


@dataclass
class Progress:
    """How far a folder's index is built."""

    scanned: int = 0
    """files found so far"""
    reused: int = 0
    """of them, taken over from the kept index unread"""
    expected: int | None = None
    """files the kept index held as the build began (None: not known yet)"""
    ready: bool = False
    """the scan has ended"""


@dataclass
class FolderIndex:
    """One workspace folder's index, and the outside things it is made from."""

    folder: str
    files: FolderFiles
    git: GitHistory
    index: WorkspaceIndex | None = None
    """None until the first scan answers (as it begins for an index kept on disk, else once built)"""
    progress: Progress = field(default_factory=Progress)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """held by the request whose indexing and search run in a thread"""
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

    def progress(self) -> dict[str, Progress]:
        """How far each workspace folder's index is built, by folder URI (those asked for)."""
        return {folder: index.progress for folder, index in self._folders.items()}

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
            if index is not None and index.scanning is not None and not index.progress.ready:
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
        if index is None or (searched := index.index) is None:
            return []
        started = time.perf_counter()
        if (head := index.git.head_moved()) != index.head:  # a commit or checkout since: read it anew
            index.head = head
            self.app.run_in_background(self._read_history(index, head), f"git history {index.folder}")
        file_id = self.app.workspace.file_id
        mine = [f for f in self.app.files.files() if f.uri.startswith(index.prefix)]
        buffers = [(file_id(f.uri), f.text, f.fingerprint) for f in mine]
        active = [file_id(text_document)] if text_document else []
        edited = [file_id(f.uri) for f in self.app.files.recently_edited() if f in mine]
        signals = Signals(index.history, active + [file_id(f.uri) for f in mine], edited)
        exclude = {file_id(uri) for uri in shown}
        async with index.lock:
            opened = {file_id for file_id, _, _ in buffers}  # indexed from their buffers
            dirty = index.dirty - opened if index.progress.ready else set()
            index.dirty -= dirty | opened
            work = (index.files, searched, buffers, dirty, message, limit, signals, exclude)
            try:
                if max(index.progress.scanned, index.progress.expected or 0) <= INLINE_FILES:
                    hits, files = _refresh_and_search(*work)
                else:
                    hits, files = await asyncio.to_thread(_refresh_and_search, *work)
            except IndexUnavailable as error:
                index.dirty |= dirty
                log.warning("retrieval unavailable error=%s", error)
                return []
        lines: dict[str, list[str] | None] = {}  # a file's lines, read once for its windows
        refs = [ref for hit in hits if hit.similarity > 0 and (ref := self._ref(index, hit, lines)) is not None]
        log.info("retrieval files=%d hits=%d snippets=%d ms=%.1f", files, len(hits), len(refs),
                 (time.perf_counter() - started) * 1000)
        return refs

    # --- keeping the index current ----------------------------------------------------------

    @staticmethod
    async def _read_history(index: FolderIndex, head: float | None) -> None:
        commits = await index.git.commits() if head is not None else None
        index.history = History(commits) if commits is not None else None

    async def _scan(self, index: FolderIndex) -> None:
        """Build the folder's index in a thread that gives way between files to every other kind
        of work (services.background), then store it the same way. The files of the latest
        commits and the open ones go first (what a request most likely asks for)."""
        started = time.perf_counter()
        stop = threading.Event()
        pause = _Pause(self.app.queue.indexing_may_run, stop)
        try:
            rebuild = await asyncio.to_thread(self._store(index).rebuild, pause)
            index.progress.expected = rebuild.expected
            if rebuild.live is not None:
                index.index = rebuild.live
            index.head = index.git.head_moved()
            await self._read_history(index, index.head)
            recent = [self.app.workspace.file_id(f.uri) for f in self.app.files.files() if f.uri.startswith(index.prefix)]
            if index.history is not None:
                recent += [path for commit in index.history.commits for path in commit.paths]
            first = list(dict.fromkeys(recent))[:RECENT_FIRST]
            fresh, reused = await asyncio.to_thread(_fill, index.files, rebuild, pause, index.progress, first)
            index.index = fresh
            index.progress.ready = True
            log.info("index ready files=%d reused=%d paused_ms=%.0f ms=%.0f", len(fresh), reused,
                     pause.seconds * 1000, (time.perf_counter() - started) * 1000)
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


def _refresh_and_search(files: FolderFiles, searched: WorkspaceIndex, buffers: list[tuple[str, str, str]],
                        dirty: Collection[str], message: str, limit: int, signals: Signals,
                        exclude: Collection[str]) -> tuple[list[Hit], int]:
    """(In a thread.) The open buffers and the files changed on disk indexed as they are now,
    then the search (and how many files were searched)."""
    for file_id, buffer, print_ in buffers:
        searched.put(file_id, buffer, print_)
    for file_id in dirty:
        text = read_for_index(files, file_id) if files.indexable(file_id) else None
        if text is None:
            searched.remove(file_id)
        else:
            searched.put(file_id, text, fingerprint(text), files.stamp(file_id))
    return searched.search(message, limit=limit, signals=signals, exclude=exclude), len(searched)


def _build(files: FolderFiles, store: IndexStore, pause: Pause = lambda: None) -> tuple[WorkspaceIndex, int]:
    """A new index of the folder's files, taking over from `store` each file whose stamp is
    unchanged (and how many were); `pause()` is called before each file."""
    return _fill(files, store.rebuild(pause), pause, Progress(), ())


def _fill(files: FolderFiles, rebuild: IndexRebuild, pause: Pause, progress: Progress,
          first: Collection[str]) -> tuple[WorkspaceIndex, int]:
    """`rebuild` given the folder's files, those of `first` before the rest (each a file id,
    taken when the scan would take it), counted in `progress`; `pause()` before each file."""
    done: set[str] = set()

    def take(file_id: str, stamp: Stamp) -> None:
        pause()
        done.add(file_id)
        progress.scanned += 1
        if rebuild.reuse(file_id, stamp):
            progress.reused += 1
        elif (text := read_for_index(files, file_id)) is not None:
            rebuild.put(file_id, text, fingerprint(text), stamp)

    for file_id in first:
        if file_id not in done and files.indexable(file_id) and (stamp := files.stamp(file_id)) is not None:
            take(file_id, stamp)
    rebuild.flush()  # they answer from now on, where the index answers while it builds
    for found in files.scan():
        if found.file_id not in done:
            take(found.file_id, found.stamp)
    return rebuild.finish(), progress.reused
