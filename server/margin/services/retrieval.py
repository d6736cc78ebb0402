"""Workspace snippets for chat and edit-ops: one retrieval index (core.retrieval) per workspace
folder, kept up to date without a rescan per request.

- Start-up: each folder is scanned once in the background (adapters.workspace_scan: what git
  would not ignore, text files only). A file whose size and modification time match the stored
  index (a gzipped JSON file beside the thread database, `index/<folder hash>.json.gz`) is
  reloaded from it without being read; the others are read and indexed. The new index replaces
  the old one when the scan ends, and is stored again.
- While the user works: open buffers are indexed as they are now at each request (only those
  whose fingerprint changed: a cost proportional to the changed files); a saved or closed file
  is read again from disk at the next request.
- Git: where the folder is in a repository, its recent history (`git log`, read again when HEAD
  moves) gives each file's recency, co-change with the files being worked on, and past commit
  subjects (core.retrieval.signals).

Snippets are windows of lines; each becomes a FileRef whose URI names the lines
(`file:///ws/a.py#L31-60`), so prompts send it, retain it and resend it exactly as a file.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection
from urllib.parse import quote

from margin import logs
from margin.adapters.workspace_scan import indexable, read_text, scan
from margin.core.assemble import FileRef
from margin.core.retrieval import GIT_LOG_ARGS, History, RetrievalIndex, Signals, parse_git_log
from margin.core.vfs import VirtualFile, fingerprint
from margin.services.app import MarginApp
from margin.services.workspace import path_of, why_not_indexed

log = logging.getLogger(__name__)

MAX_SNIPPETS = 6
STORE_VERSION = 1
LANGUAGES = {".py": "python", ".pyi": "python", ".ts": "typescript", ".tsx": "typescriptreact",
             ".js": "javascript", ".jsx": "javascriptreact", ".mjs": "javascript", ".rs": "rust", ".go": "go",
             ".java": "java", ".c": "c", ".h": "c", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp",
             ".rb": "ruby", ".php": "php", ".lua": "lua", ".sh": "shellscript", ".md": "markdown",
             ".toml": "toml", ".json": "json", ".yml": "yaml", ".yaml": "yaml", ".html": "html", ".css": "css"}


@dataclass
class FolderIndex:
    """One workspace folder's index, and what it knows of the files on disk."""

    folder: str
    root: Path
    index: RetrievalIndex = field(default_factory=RetrievalIndex)
    disk: dict[str, tuple[int, int]] = field(default_factory=dict)
    """file id → (size, mtime_ns) of the text indexed from disk"""
    ready: bool = False
    dirty: set[str] = field(default_factory=set)
    """file ids to read again from disk (saved or closed since)"""
    history: History | None = None
    head: float | None = None
    """when git's HEAD last moved, as the history was read"""
    scanning: asyncio.Task[Any] | None = None


class Retrieval:
    def __init__(self, app: MarginApp) -> None:
        self.app = app
        self._folders: dict[str, FolderIndex] = {}
        self._refused: set[str] = set()
        """workspace folders not to index (services.workspace.why_not_indexed), told once"""

    def folder(self, folder: str) -> FolderIndex | None:
        """The index of a workspace folder, its scan started on first use (None: not local, or
        not a folder to index, which the user is told once)."""
        known = self._folders.get(folder)
        if known is None:
            root = path_of(folder) if folder else None
            if root is None or not root.is_dir() or folder in self._refused:
                return None
            if (why := why_not_indexed(root)) is not None:
                self._refused.add(folder)
                log.warning("workspace folder not indexed folder=%s", logs.name(folder))
                self.app.tell_user(f"Margin does not index {root} for workspace snippets: {why}. Open a "
                                   "project's folder instead; chat and edits work as usual, without snippets.")
                return None
            known = self._folders[folder] = FolderIndex(folder, root)
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
            if index is not None and index.scanning is not None and not index.ready:
                await asyncio.wait([index.scanning])

    def touched(self, uri: str) -> None:
        """A file was closed, or changed on disk: read it from disk at the next request."""
        for index in self._folders.values():
            prefix = index.folder.rstrip("/") + "/"
            if uri.startswith(prefix):
                index.dirty.add(self.app.workspace.file_id(uri))

    async def snippets(self, message: str, text_document: str | None, shown: Collection[str],
                       limit: int = MAX_SNIPPETS) -> list[FileRef]:
        """Windows of workspace files relevant to `message`, most relevant first; never of the
        files in `shown` (URIs the prompt may show whole)."""
        if not self.app.settings.current.globals.retrieval or not message.strip():
            return []
        index = self.folder(self.app.workspace.folder_of(text_document))
        if index is None or not index.ready:
            return []
        started = time.perf_counter()
        self._refresh(index)
        if (head := _head_moved(index.root)) != index.head:  # a commit or checkout since: read it anew
            index.head = head
            self.app.run_in_background(self._read_history(index, head), f"git history {index.folder}")
        file_id = self.app.workspace.file_id
        mine = [f for f in self.app.files.files() if f.uri.startswith(index.folder.rstrip("/") + "/")]
        active = [file_id(text_document)] if text_document else []
        edited = [file_id(f.uri) for f in self.app.files.recently_edited() if f in mine]
        signals = Signals(index.history, active + [file_id(f.uri) for f in mine], edited)
        hits = index.index.search(message, limit=limit, signals=signals, exclude={file_id(uri) for uri in shown})
        refs = [ref for hit in hits if hit.similarity > 0 and (ref := self._ref(index, hit)) is not None]
        log.info("retrieval files=%d hits=%d snippets=%d ms=%.1f", len(index.index), len(hits), len(refs),
                 (time.perf_counter() - started) * 1000)
        return refs

    # --- keeping the index current ----------------------------------------------------------

    def _refresh(self, index: FolderIndex) -> None:
        prefix = index.folder.rstrip("/") + "/"
        for file in self.app.files.files():
            if file.uri.startswith(prefix):
                index.index.put(self.app.workspace.file_id(file.uri), file.text, file.fingerprint)
        for file_id in list(index.dirty):
            index.dirty.discard(file_id)
            if f"{prefix}{quote(file_id)}" in self.app.files:
                continue
            path = index.root / file_id
            text = read_text(path) if indexable(index.root, file_id) else None
            if text is None:
                index.index.remove(file_id)
                index.disk.pop(file_id, None)
                continue
            stat = path.stat()
            index.index.put(file_id, text, fingerprint(text))
            index.disk[file_id] = (stat.st_size, stat.st_mtime_ns)

    @staticmethod
    async def _read_history(index: FolderIndex, head: float | None) -> None:
        index.history = await _git_history(index.root) if head is not None else None

    async def _scan(self, index: FolderIndex) -> None:
        """Build the folder's index in a thread that gives way between files to every other kind
        of work (services.background), then store it the same way."""
        started = time.perf_counter()
        stored = self._store_path(index)
        stop = threading.Event()
        pause = _Pause(self.app.queue.indexing_may_run, stop)
        try:
            fresh, disk, reused = await asyncio.to_thread(_build, index.root, stored, pause)
            index.index, index.disk, index.ready = fresh, disk, True
            log.info("index ready files=%d reused=%d paused_ms=%.0f ms=%.0f", len(fresh), reused,
                     pause.seconds * 1000, (time.perf_counter() - started) * 1000)
            index.head = _head_moved(index.root)
            await self._read_history(index, index.head)
            if stored is not None:
                await asyncio.to_thread(_save, stored, index.folder, fresh, disk, pause)
        except asyncio.CancelledError:
            stop.set()  # the thread ends at its next file rather than run on after shutdown
            raise

    def _store_path(self, index: FolderIndex) -> Path | None:
        database = self.app.storage.path
        if not self.app.storage.persistent:
            return None
        return database.parent / "index" / (hashlib.sha256(index.folder.encode()).hexdigest()[:16] + ".json.gz")

    def _ref(self, index: FolderIndex, hit: Any) -> FileRef | None:
        uri = f"{index.folder.rstrip('/')}/{quote(hit.file_id)}"
        open_file = self.app.files.get(uri)
        text = open_file.text if open_file is not None else read_text(index.root / hit.file_id)
        if text is None:
            return None
        lines = text.splitlines(keepends=True)[hit.start_line:hit.end_line]
        if not "".join(lines).strip():
            return None
        first, last = hit.start_line + 1, hit.start_line + len(lines)
        language = LANGUAGES.get(os.path.splitext(hit.file_id)[1].lower(), "text")
        return FileRef(VirtualFile(f"{uri}#L{first}-{last}", language, 0, "".join(lines)),
                       f"{hit.file_id} lines {first}-{last}")


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


def _build(root: Path, stored: Path | None,
           pause: Callable[[], None] = lambda: None) -> tuple[RetrievalIndex, dict[str, tuple[int, int]], int]:
    """A new index of `root`, reusing the stored one's files whose size and time are unchanged;
    `pause()` is called before each file."""
    old = _load(stored) if stored is not None else {}
    index, disk, reused = RetrievalIndex(), {}, 0
    for found in scan(root):
        pause()
        known = old.get(found.file_id)
        if known is not None and (known["size"], known["mtime_ns"]) == (found.size, found.mtime_ns):
            if index.import_file(found.file_id, known["fingerprint"], known["data"]):
                disk[found.file_id] = (found.size, found.mtime_ns)
                reused += 1
                continue
        text = read_text(found.path)
        if text is not None:
            index.put(found.file_id, text, fingerprint(text))
            disk[found.file_id] = (found.size, found.mtime_ns)
    return index, disk, reused


def _load(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            stored = json.load(handle)
        return stored["files"] if stored.get("version") == STORE_VERSION else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _save(path: Path, folder: str, index: RetrievalIndex, disk: dict[str, tuple[int, int]],
          pause: Callable[[], None] = lambda: None) -> None:
    """The index stored as one JSON document, written a file at a time (`pause()` before each)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with gzip.open(partial, "wt", encoding="utf-8", compresslevel=3) as handle:
            handle.write(json.dumps({"version": STORE_VERSION, "folder": folder})[:-1] + ', "files": {')
            first = True
            for file_id, (size, mtime) in disk.items():
                if file_id not in index:
                    continue
                pause()
                entry = {"size": size, "mtime_ns": mtime, "fingerprint": index.fingerprint(file_id),
                         "data": index.export_file(file_id)}
                handle.write(("" if first else ", ") + json.dumps(file_id) + ": " + json.dumps(entry))
                first = False
            handle.write("}}")
        os.replace(partial, path)
    except OSError as error:
        log.warning("index not stored error=%s", type(error).__name__)


def _head_moved(root: Path) -> float | None:
    """When git's HEAD last moved (its reflog's time), or None outside a repository."""
    for folder in (root, *root.parents):
        git = folder / ".git"
        if git.exists():
            try:
                return max((git / "logs" / "HEAD").stat().st_mtime, (git / "HEAD").stat().st_mtime) \
                    if git.is_dir() else git.stat().st_mtime
            except OSError:
                return None
    return None


async def _git_history(root: Path) -> History | None:
    """The folder's recent commits, their paths relative to the folder."""
    try:
        prefix = (await _git(root, "rev-parse", "--show-prefix")).strip()
        commits = parse_git_log(await _git(root, *GIT_LOG_ARGS))
    except (OSError, RuntimeError):
        return None
    if prefix:
        commits = [type(c)(c.timestamp, tuple(p[len(prefix):] for p in c.paths if p.startswith(prefix)), c.subject)
                   for c in commits]
    return History(commits)


GIT_NO_PROGRAMS = ("-c", "log.showSignature=false", "-c", "core.fsmonitor=false")
"""A repository's own `.git/config` can make git run programs of its choosing: `gpg.program` to
check signatures when `log.showSignature` is on (git log), `core.fsmonitor` whenever the index
is read. Margin's git commands switch both off, whatever the repository says."""


async def _git(root: Path, *args: str) -> str:
    process = await asyncio.create_subprocess_exec("git", *GIT_NO_PROGRAMS, "-C", str(root), *args,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
                                                   stdin=asyncio.subprocess.DEVNULL)
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"git exited {process.returncode}")
    return out.decode("utf-8", errors="replace")
