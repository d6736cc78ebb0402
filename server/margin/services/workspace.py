"""The workspace folders, and what a file is called inside them (the `file_id` models see)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from margin import deferred

with deferred.imports():
    from urllib import request


class Workspace:
    def __init__(self, folders: Callable[[], Sequence[str]] = lambda: ()) -> None:
        self.folders = folders
        """the workspace folder URIs, asked afresh each time (the editor may add and remove them)"""

    def folder_of(self, uri: str | None) -> str:
        """The workspace folder holding `uri` (the deepest one), else the first folder, else ''."""
        folders = sorted(self.folders(), key=len, reverse=True)
        for folder in folders:
            if uri and (uri == folder or uri.startswith(folder.rstrip("/") + "/")):
                return folder
        return folders[-1] if folders else ""

    def file_id(self, uri: str) -> str:
        """The path relative to its workspace folder, or the URI for a file outside every folder."""
        folder = self.folder_of(uri)
        if folder and uri.startswith(folder.rstrip("/") + "/"):
            return unquote(uri[len(folder.rstrip("/")) + 1 :])
        return uri

    def root_of(self, uri: str | None) -> Path | None:
        """The local folder of the workspace folder holding `uri` (as folder_of), if it has one."""
        return path_of(self.folder_of(uri))


def path_of(uri: str) -> Path | None:
    """The local path a `file:` URI names; None for any other URI."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or not parts.path:
        return None
    return Path(request.url2pathname(unquote(parts.path)))

