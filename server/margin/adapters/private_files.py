"""Margin's own files readable by the user alone: threads, memories and the retrieval index hold
the text of the user's code and conversations. Folders Margin makes are 0700, its SQLite files
and their journals 0600 — set on files made by an earlier version too. A folder the user chose
that exists already (the parent of a `database` they named) is left as it is."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600
JOURNALS = ("-wal", "-shm", "-journal")
"""the files SQLite keeps beside a database (it makes them with the database file's mode)"""


def folder(path: Path, *, own: bool) -> None:
    """`path` made with only the user able to enter it, and so is every folder above it that
    Margin makes on the way (mkdir's parents would get the umask's mode); `own`: a folder only
    Margin uses (its data folder, the index folder), set so when it exists already."""
    missing = [path, *(p for p in path.parents)]
    missing = missing[: next((i for i, p in enumerate(missing) if p.exists()), len(missing))]
    for step in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another server made it meanwhile
            step.mkdir(mode=FOLDER_MODE)
            _chmod(step, FOLDER_MODE)  # the umask may have taken more than group and other
    if own:
        _chmod(path, FOLDER_MODE)


def sqlite_file(path: Path) -> None:
    """The database at `path` made empty with mode 0600 when missing — before SQLite makes it with
    the umask's mode, and its journals after it — and it and its journals set to 0600 when they
    exist."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
    for name in (str(path), *(f"{path}{suffix}" for suffix in JOURNALS)):
        _chmod(Path(name), FILE_MODE)


def _chmod(path: Path, mode: int) -> None:
    try:
        if path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)
    except FileNotFoundError:
        pass
    except PermissionError:  # not the user's own (a shared folder): what it is stays
        pass
