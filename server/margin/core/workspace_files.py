"""A workspace folder's files as Margin reads them from disk (the port; adapters.local_files
reads the local disk), and which of their texts the retrieval index takes: at most
MAX_FILE_BYTES, without a NUL byte in the first SNIFF_BYTES (a binary file)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

MAX_FILE_BYTES = 512 * 1024
SNIFF_BYTES = 8192


class Stamp(NamedTuple):
    """What tells a file on disk changed without reading it: its size and modification time."""

    size: int
    mtime_ns: int


@dataclass(frozen=True)
class FoundFile:
    file_id: str
    """the path relative to the scanned folder, with '/'"""
    stamp: Stamp


class FolderFiles(Protocol):
    """One workspace folder's files. A `file_id` is a path relative to the folder, with '/'."""

    def is_folder(self) -> bool:
        """Whether the folder exists (and is a folder)."""
        ...

    def why_not_indexed(self) -> str | None:
        """Why the folder is not one to index (read every file of), for a person; None when it is."""
        ...

    def scan(self) -> Iterable[FoundFile]:
        """Every file the retrieval index may take (what git would not ignore, no symlink, at
        most MAX_FILE_BYTES), in a stable order; read one at a time, so it may be stopped."""
        ...

    def indexable(self, file_id: str) -> bool:
        """Whether the scan would take `file_id` (a file that changed since the scan)."""
        ...

    def stamp(self, file_id: str) -> Stamp | None:
        """The file's stamp; None when there is no such file."""
        ...

    def read(self, file_id: str, limit: int) -> bytes | None:
        """The file's first `limit` bytes; None when it cannot be read (missing, a folder), is not
        a regular file (a FIFO, a device: never a read that can block) or leads outside the
        folder."""
        ...

    def git_ignores(self, file_id: str) -> bool:
        """Whether git would ignore `file_id` (its folders' `.gitignore` files, the repository's
        exclude file), or it lies in a folder never scanned (`.git`)."""
        ...

    def inside(self, file_id: str) -> bool:
        """Whether `file_id` (which may be absolute or climb with '..') names a path inside
        the folder once every symlink on the way is resolved."""
        ...

    def listing(self, folder_id: str) -> list[tuple[str, bool]] | None:
        """What a folder of the folder holds, as git would show it: (name, is a folder) sorted,
        without what git ignores, `.git`, or symlinks; None when `folder_id` ('' for the top) is
        no folder inside."""
        ...


def index_text(data: bytes | None) -> str | None:
    """The text the index takes from a file's first MAX_FILE_BYTES + 1 bytes: None when it
    could not be read, is too large or is binary."""
    if data is None or len(data) > MAX_FILE_BYTES or b"\0" in data[:SNIFF_BYTES]:
        return None
    return data.decode("utf-8", errors="replace")


def read_for_index(files: FolderFiles, file_id: str) -> str | None:
    """The file's text as the retrieval index takes it (index_text), or None."""
    return index_text(files.read(file_id, MAX_FILE_BYTES + 1))
