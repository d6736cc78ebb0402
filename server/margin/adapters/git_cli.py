"""A workspace folder's git history (core.git_history.GitHistory) from the `git` program: when
HEAD last moved from `.git`'s files, the recent commits from `git log`, their paths made
relative to the folder when it is a repository's subfolder."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from margin.core.retrieval import GIT_LOG_ARGS, Commit, parse_git_log

GIT_NO_PROGRAMS = ("-c", "log.showSignature=false", "-c", "core.fsmonitor=false")
"""A repository's own `.git/config` can make git run programs of its choosing: `gpg.program` to
check signatures when `log.showSignature` is on (git log), `core.fsmonitor` whenever the index
is read. Margin's git commands switch both off, whatever the repository says."""


class GitCommandHistory:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._places = [os.path.join(folder, ".git") for folder in (root, *root.parents)]
        """where a `.git` may be, nearest first (asked on every retrieval: strings and os.stat,
        not Path objects)"""

    def head_moved(self) -> float | None:
        """When git's HEAD last moved (its reflog's time), or None outside a repository."""
        for git in self._places:
            try:
                found = os.stat(git)
            except OSError:
                continue
            if not stat.S_ISDIR(found.st_mode):
                return found.st_mtime  # a worktree's or submodule's `.git` file
            try:
                return max(os.stat(os.path.join(git, "logs", "HEAD")).st_mtime,
                           os.stat(os.path.join(git, "HEAD")).st_mtime)
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
