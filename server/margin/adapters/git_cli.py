"""A workspace folder's git history (core.git_history.GitHistory) from the `git` program: when
HEAD last moved from `.git`'s files, the recent commits from `git log`, their paths made
relative to the folder when it is a repository's subfolder; and a file's text at HEAD (`margin
next-edit`).

Every git command Margin runs goes through `git_command`: a repository's `.git/config` and
`.gitattributes` come with any repository shared as an archive or a folder, and can make git run
programs of their choosing. Margin runs only commands that read objects and refs (`log`,
`rev-parse`, `cat-file blob`: never a filter, a diff driver, a pager or a hook), with every
setting that names a program it could reach switched off on the command line, and git told not
to prompt, page or take optional locks."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from pathlib import Path

from margin.core.retrieval import GIT_LOG_ARGS, Commit, parse_git_log

GIT_NO_PROGRAMS = (
    "--no-pager",
    "-c", "log.showSignature=false",  # else git log runs gpg.program (or gpg.ssh.program) on signed commits
    "-c", "core.fsmonitor=false",  # run whenever the index is read
    "-c", "core.hooksPath=/dev/null",
    "-c", "diff.external=",
    "-c", "core.pager=cat",
    "-c", "core.askPass=",
    "-c", "credential.helper=",
    "-c", "core.sshCommand=",
    "-c", "protocol.allow=never",
)
"""Settings a repository's own `.git/config` can use to make git run a program, each switched
off whatever the repository says."""

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_ASKPASS": "",
           "SSH_ASKPASS": "", "GIT_EXTERNAL_DIFF": "", "GIT_NO_REPLACE_OBJECTS": "1"}
"""git's environment on top of Margin's: no prompt, no pager, no write of the index behind the
user's back (optional locks), no replaced objects (a repository's `refs/replace` would change
what a commit says)."""


def git_command(folder: Path | str, *args: str) -> list[str]:
    """The command line of `git ARGS` run in `folder`, with every program switched off."""
    return ["git", *GIT_NO_PROGRAMS, "-C", str(folder), *args]


def git_env() -> dict[str, str]:
    return {**os.environ, **GIT_ENV}


def head_text(path: Path, timeout_s: float = 30) -> bytes:
    """`path`'s content at HEAD, as stored (`git cat-file blob`: no filter, no line-ending
    conversion). Raises RuntimeError with git's message when there is none."""
    done = subprocess.run(git_command(path.parent, "cat-file", "blob", f"HEAD:./{path.name}"), check=False,
                          capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL, env=git_env())
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode("utf-8", errors="replace").strip()[:300])
    return done.stdout


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
        process = await asyncio.create_subprocess_exec(*git_command(self.root, *args),
                                                       stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.DEVNULL,
                                                       stdin=asyncio.subprocess.DEVNULL, env=git_env())
        out, _ = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"git exited {process.returncode}")
        return out.decode("utf-8", errors="replace")
