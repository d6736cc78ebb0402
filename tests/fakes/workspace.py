"""In-memory fakes of the workspace ports, for service tests: a folder's files in a dict
(core.workspace_files.FolderFiles), its git history as a list of commits
(core.git_history.GitHistory), and a kept index that lives as long as the fake
(core.index_store.IndexStore, over the real in-memory index). `FakeWorkspace.access` plugs the
three into an app (tests.fakes.fake_provider.fake_app(..., workspace_access=...))."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from margin.core.index_store import MemoryRebuild, StoredFile
from margin.core.retrieval import Commit
from margin.core.workspace_access import WorkspaceAccess
from margin.core.workspace_files import MAX_FILE_BYTES, FoundFile, Stamp


class FakeFolderFiles:
    """A folder's files by file id. Each write gives the file a new stamp (unless told to keep
    the old one: other text of the same size and time, which only a kept index still knows)."""

    def __init__(self, files: Mapping[str, str | bytes] | None = None, *, ignored: Sequence[str] = ()) -> None:
        self.contents: dict[str, bytes] = {}
        self.stamps: dict[str, Stamp] = {}
        self.ignored = set(ignored)
        """file ids git would ignore"""
        self.outside: set[str] = set()
        """file ids that lead outside the folder (as a symlink to elsewhere would)"""
        self.refused: str | None = None
        """why the folder is not one to index (None: it is)"""
        self.reads: list[str] = []
        """every file id read, in order"""
        self._clock = itertools.count(1)
        for file_id, content in (files or {}).items():
            self.write(file_id, content)

    def write(self, file_id: str, content: str | bytes, *, keep_stamp: bool = False) -> None:
        data = content.encode() if isinstance(content, str) else content
        self.contents[file_id] = data
        if not keep_stamp or file_id not in self.stamps:
            self.stamps[file_id] = Stamp(len(data), next(self._clock))

    def delete(self, file_id: str) -> None:
        del self.contents[file_id], self.stamps[file_id]

    def is_folder(self) -> bool:
        return True

    def why_not_indexed(self) -> str | None:
        return self.refused

    def scan(self) -> Iterator[FoundFile]:
        for file_id in sorted(self.contents):
            if self.indexable(file_id):
                yield FoundFile(file_id, self.stamps[file_id])

    def indexable(self, file_id: str) -> bool:
        return file_id in self.contents and file_id not in self.ignored \
            and len(self.contents[file_id]) <= MAX_FILE_BYTES

    def stamp(self, file_id: str) -> Stamp | None:
        return self.stamps.get(file_id)

    def read(self, file_id: str, limit: int) -> bytes | None:
        self.reads.append(file_id)
        data = self.contents.get(file_id)
        return None if data is None else data[:limit]

    def git_ignores(self, file_id: str) -> bool:
        return file_id in self.ignored

    def inside(self, file_id: str) -> bool:
        return not file_id.startswith("/") and ".." not in file_id.split("/") and file_id not in self.outside

    def listing(self, folder_id: str) -> list[tuple[str, bool]] | None:
        prefix = folder_id + "/" if folder_id else ""
        below = [f[len(prefix):] for f in self.contents if f.startswith(prefix) and f not in self.ignored]
        if folder_id and not below:
            return None
        return sorted({(rest.split("/")[0], "/" in rest) for rest in below})


class FakeGitHistory:
    """A repository's history, newest commit first (None: the folder is not in a repository)."""

    def __init__(self, commits: Sequence[Commit] | None = None) -> None:
        self.log = None if commits is None else list(commits)
        self.moved = None if commits is None else 1.0
        self.reads = 0
        """how many times the history was read"""
        self.gate: asyncio.Event | None = None
        """when set, reading the history waits for it"""

    def commit(self, subject: str, *paths: str) -> None:
        """A new commit: HEAD moves."""
        self.log = [Commit(len(self.log or ()) + 1, paths, subject), *(self.log or ())]
        self.moved = (self.moved or 0.0) + 1

    def head_moved(self) -> float | None:
        return self.moved

    async def commits(self) -> list[Commit] | None:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return None if self.log is None else list(self.log)


class FakeIndexStore:
    """Keeps the index's files in memory, as JSON would (each file's indexed form copied)."""

    def __init__(self) -> None:
        self.kept: dict[str, StoredFile] = {}
        self.saves = 0

    def rebuild(self, pause=lambda: None) -> MemoryRebuild:
        return MemoryRebuild(dict(self.kept), self._keep)

    def _keep(self, files: Iterator[tuple[str, StoredFile]]) -> None:
        self.kept = {file_id: StoredFile(kept.stamp, kept.fingerprint, json.loads(json.dumps(kept.data)))
                     for file_id, kept in files}
        self.saves += 1


@dataclass
class FakeWorkspace:
    """One workspace folder's files, git history and kept index; `roots` records the local
    folders asked for."""

    files: FakeFolderFiles = field(default_factory=FakeFolderFiles)
    git: FakeGitHistory = field(default_factory=FakeGitHistory)
    store: FakeIndexStore = field(default_factory=FakeIndexStore)
    roots: list[Path] = field(default_factory=list)

    @property
    def access(self) -> WorkspaceAccess:
        def files(root: Path) -> FakeFolderFiles:
            self.roots.append(root)
            return self.files

        return WorkspaceAccess(files, lambda root: self.git, lambda folder, directory: self.store)
