"""A workspace folder's git history as retrieval reads it (core.retrieval.signals turns it into
recency, co-change and commit subjects): the port. adapters.git_cli runs git."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from margin.core.retrieval import Commit


class GitHistory(Protocol):
    def head_moved(self) -> float | None:
        """When HEAD last moved (a commit, a checkout), or None outside a repository. Cheap:
        asked at every request, the history read again when it changes."""
        ...

    async def commits(self) -> list[Commit] | None:
        """The recent commits (core.retrieval.GIT_LOG_ARGS), newest first, their paths relative
        to the folder (commits touching nothing in it keep no path); None when git cannot tell."""
        ...
