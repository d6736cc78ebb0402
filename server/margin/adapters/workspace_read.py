"""The one way Margin reads a file of a workspace folder: a regular file, inside the folder once
every symlink is resolved, at most so many bytes, and never a read that can block.

A repository chooses what its paths are. A `.gitignore` that is a symlink to `/dev/zero` (git
clones symlinks) would be read for ever; one to `/dev/stdin` would read the editor's messages;
a FIFO named `AGENTS.md` would hang whatever opened it; a symlink may lead to `~/.ssh`. So a
file is opened without blocking (O_NONBLOCK: a FIFO's open returns at once), checked on the open
descriptor (a regular file, and where it really is: `/proc/self/fd` on Linux, else its resolved
path), and read up to a limit."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_PROC_FD = sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")


def inside(real_root: str, real: str) -> bool:
    """Whether the resolved path `real` is `real_root` or under it."""
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def read_regular(root: Path, relative: str, limit: int, *, real_root: str | None = None) -> bytes | None:
    """The first `limit` bytes of the regular file `relative` names under `root`; None when it is
    missing, not a regular file (a folder, a FIFO, a device, a socket), leads outside `root` once
    resolved, or cannot be read. `real_root`: `root` resolved, when the caller keeps it."""
    real_root = real_root or os.path.realpath(root)
    path = os.path.join(root, relative)
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        where = os.readlink(f"/proc/self/fd/{fd}") if _PROC_FD else os.path.realpath(path)
        if not inside(real_root, where):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
