"""A workspace folder's files on the local disk (core.workspace_files.FolderFiles): the scan of
adapters.workspace_scan, stamps from `stat`, reads of regular files inside the folder only
(adapters.workspace_read), and whether a path stays inside the folder once its symlinks are
resolved."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from margin.adapters import workspace_read, workspace_scan
from margin.core.workspace_files import FoundFile, Stamp


class LocalFolderFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._real_root = os.path.realpath(root)

    def is_folder(self) -> bool:
        return self.root.is_dir()

    def why_not_indexed(self) -> str | None:
        return why_not_indexed(self.root)

    def scan(self) -> Iterator[FoundFile]:
        return workspace_scan.scan(self.root)

    def indexable(self, file_id: str) -> bool:
        return workspace_scan.indexable(self.root, file_id)

    def stamp(self, file_id: str) -> Stamp | None:
        try:
            stat = os.stat(os.path.join(self.root, file_id))  # on every retrieval: not a Path
        except OSError:
            return None
        return Stamp(stat.st_size, stat.st_mtime_ns)

    def read(self, file_id: str, limit: int) -> bytes | None:
        return workspace_read.read_regular(self.root, file_id, limit, real_root=self._real_root)

    def git_ignores(self, file_id: str) -> bool:
        return workspace_scan.ignored(self.root, file_id)

    def inside(self, file_id: str) -> bool:
        return workspace_read.inside(self._real_root, os.path.realpath(self.root / file_id))

    def listing(self, folder_id: str) -> list[tuple[str, bool]] | None:
        if folder_id and not self.inside(folder_id):
            return None
        return workspace_scan.listing(self.root, folder_id)


def why_not_indexed(root: Path) -> str | None:
    """Why a workspace folder is not one to index (read every file of), or None when it is: the
    file system's root, the home folder itself (both would take in every project and secret
    below them, slowly), or a folder the user cannot write (a system's or another user's)."""
    try:
        resolved = root.resolve()
    except OSError:
        return "it cannot be read"
    if resolved == Path(resolved.anchor):
        return "it is the file system's root"
    if resolved == Path.home().resolve():
        return "it is your home folder"
    if not os.access(resolved, os.W_OK):
        return "you cannot write to it (a system folder, or another user's)"
    return None
