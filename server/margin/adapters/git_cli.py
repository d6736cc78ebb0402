"""A workspace folder's git history (core.git_history.GitHistory) from the `git` program: when
HEAD last moved from `.git`'s files, the recent commits from `git log`, their paths made
relative to the folder when it is a repository's subfolder."""

from __future__ import annotations

import asyncio
from pathlib import Path

from margin.core.retrieval import GIT_LOG_ARGS, Commit, parse_git_log

GIT_NO_PROGRAMS = ("-c", "log.showSignature=false", "-c", "core.fsmonitor=false")
"""A repository's own `.git/config` can make git run programs of its choosing: `gpg.program` to
check signatures when `log.showSignature` is on (git log), `core.fsmonitor` whenever the index
is read. Margin's git commands switch both off, whatever the repository says."""


class GitCommandHistory:
    def __init__(self, root: Path) -> None:
        self.root = root

    def head_moved(self) -> float | None:
        """When git's HEAD last moved (its reflog's time), or None outside a repository."""
        for folder in (self.root, *self.root.parents):
            git = folder / ".git"
            if git.exists():
                try:
                    return max((git / "logs" / "HEAD").stat().st_mtime, (git / "HEAD").stat().st_mtime) \
                        if git.is_dir() else git.stat().st_mtime
                except OSError:
                    return None
        return None

    async def commits(self) -> list[Commit] | None:
        try:
            prefix = (await self._git("rev-parse", "--show-prefix")).strip()
            commits = parse_git_log(await self._git(*GIT_LOG_ARGS))
        except (OSError, RuntimeError):
            return None
        if prefix:
            commits = [Commit(c.timestamp, tuple(p[len(prefix):] for p in c.paths if p.startswith(prefix)), c.subject)
                       for c in commits]
        return commits

    async def _git(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec("git", *GIT_NO_PROGRAMS, "-C", str(self.root), *args,
                                                       stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.DEVNULL,
                                                       stdin=asyncio.subprocess.DEVNULL)
        out, _ = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"git exited {process.returncode}")
        return out.decode("utf-8", errors="replace")
