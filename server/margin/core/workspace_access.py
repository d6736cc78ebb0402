"""The outside things retrieval and the instruction files read, as the composition root
(margin.wiring) provides them: a workspace folder's files, its git history and the stored
retrieval index, each made for one local folder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from margin.core.git_history import GitHistory
    from margin.core.index_store import IndexStore
    from margin.core.workspace_files import FolderFiles


@dataclass(frozen=True)
class WorkspaceAccess:
    files: Callable[[Path], FolderFiles]
    """the files of the folder at a local path"""
    git: Callable[[Path], GitHistory]
    """the git history of the folder at a local path"""
    index_store: Callable[[str, Path], IndexStore]
    """where the index of a workspace folder (its URI) is kept, in a directory of indexes"""
