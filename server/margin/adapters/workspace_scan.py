"""Which of a workspace folder's files retrieval may index: every file under it that git would
not ignore.

Skipped: what `.gitignore` files ignore (the folder's own and nested ones, with git's rules, by
pathspec) and `.git/info/exclude`; the `.git` folder; symlinks (a symlinked file or folder may
lead outside the workspace, and is never followed); files over MAX_FILE_BYTES (binary files are
left out when read: core.workspace_files). A scan stops after MAX_FILES files and says so.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pathspec

from margin.adapters import workspace_read
from margin.core.workspace_files import MAX_FILE_BYTES, FoundFile, Stamp

log = logging.getLogger(__name__)

MAX_FILES = 50_000
MAX_IGNORE_BYTES = 1 << 20
"""a `.gitignore` (or `.git/info/exclude`) is read up to this size"""
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})


class _Ignores:
    """The ignore rules in force in one folder: its parents' and its own `.gitignore`."""

    def __init__(self, specs: tuple[tuple[str, pathspec.PathSpec], ...] = ()) -> None:
        self.specs = specs

    def within(self, folder: Path, prefix: str) -> _Ignores:
        spec = _spec(folder, ".gitignore")
        return self if spec is None else _Ignores((*self.specs, (prefix, spec)))

    def ignored(self, file_id: str, is_dir: bool) -> bool:
        for prefix, spec in self.specs:
            relative = file_id[len(prefix):] if prefix else file_id
            if spec.match_file(relative + "/" if is_dir else relative):
                return True
        return False


def _root_rules(root: Path) -> _Ignores:
    exclude = _spec(root, ".git/info/exclude")
    return _Ignores((("", exclude),) if exclude is not None else ()).within(root, "")


def _spec(folder: Path, name: str) -> pathspec.PathSpec | None:
    """The rules of an ignore file, read workspace_read's way each time and compiled once for
    each text (an instruction file is checked against them on every request)."""
    data = workspace_read.read_regular(folder, name, MAX_IGNORE_BYTES)
    return None if data is None else _compiled(data)


@functools.lru_cache(maxsize=1024)
def _compiled(data: bytes) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(data.decode("utf-8", errors="replace").splitlines())


def _rules_for(root: Path, file_id: str, *, symlinked_folders: bool) -> _Ignores | None:
    """The ignore rules in force in `file_id`'s folder; None when a folder on the way is never
    scanned or is ignored (or is a symlink, unless `symlinked_folders`)."""
    parts = file_id.split("/")
    if any(part in ALWAYS_SKIPPED or part in ("", ".", "..") for part in parts):
        return None
    rules, folder, prefix = _root_rules(root), root, ""
    for part in parts[:-1]:
        folder, name = folder / part, prefix + part
        if (not symlinked_folders and folder.is_symlink()) or rules.ignored(name, True):
            return None
        prefix = name + "/"
        rules = rules.within(folder, prefix)
    return rules


def ignored(root: Path, file_id: str) -> bool:
    """Whether git would ignore `file_id` (by the `.gitignore` files of its folders and
    `.git/info/exclude`), or it lies in a folder never scanned (`.git`)."""
    rules = _rules_for(root, file_id, symlinked_folders=True)
    return rules is None or rules.ignored(file_id, False)


def indexable(root: Path, file_id: str) -> bool:
    """Whether the scan would take `file_id` (a file that changed since): not ignored, not under
    a symlink or a skipped folder, a regular file of at most MAX_FILE_BYTES."""
    rules = _rules_for(root, file_id, symlinked_folders=False)
    if rules is None:
        return False
    path = root / file_id
    try:
        stat = path.lstat()
    except OSError:
        return False
    return not path.is_symlink() and path.is_file() and stat.st_size <= MAX_FILE_BYTES \
        and not rules.ignored(file_id, False)


def scan(root: Path) -> Iterator[FoundFile]:
    """Every file retrieval may index under `root`, in a stable order."""
    found = 0
    stack: list[tuple[Path, str, _Ignores]] = [(root, "", _root_rules(root))]
    while stack:
        folder, prefix, rules = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            file_id = prefix + entry.name
            try:
                if entry.is_symlink() or entry.name in ALWAYS_SKIPPED:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if not rules.ignored(file_id, True):
                        stack.append((Path(entry.path), file_id + "/", rules.within(Path(entry.path), file_id + "/")))
                    continue
                if not entry.is_file(follow_symlinks=False) or rules.ignored(file_id, False):
                    continue
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.st_size > MAX_FILE_BYTES:
                continue
            found += 1
            if found > MAX_FILES:
                log.warning("workspace scan stopped files=%d", MAX_FILES)
                return
            yield FoundFile(file_id, Stamp(stat.st_size, stat.st_mtime_ns))


def listing(root: Path, folder_id: str) -> list[tuple[str, bool]] | None:
    """A folder's entries as the scan sees them (no symlink, nothing ignored, no `.git`): (name,
    is a folder), sorted; None when `folder_id` is ignored, under a skipped folder, or not a folder."""
    if folder_id:
        rules = _rules_for(root, folder_id + "/x", symlinked_folders=False)
        if rules is None or rules.ignored(folder_id, True):
            return None
        rules = rules.within(root / folder_id, folder_id + "/")
    else:
        rules = _root_rules(root)
    folder, prefix = root / folder_id if folder_id else root, folder_id + "/" if folder_id else ""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    found = []
    for entry in entries:
        try:
            if entry.is_symlink() or entry.name in ALWAYS_SKIPPED:
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if (is_dir or entry.is_file(follow_symlinks=False)) and not rules.ignored(prefix + entry.name, is_dir):
            found.append((entry.name, is_dir))
    return sorted(found)
