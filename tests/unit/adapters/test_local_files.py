"""adapters.local_files on a real folder: stamps, bounded reads, what stays inside the folder
once symlinks are resolved, and which folders are not ones to index."""

from __future__ import annotations

import os
from pathlib import Path

from margin.adapters.local_files import LocalFolderFiles, why_not_indexed
from tests.unit.adapters.test_workspace_scan import tree


def test_stamps_and_reads(tmp_path):
    tree(tmp_path, {"a.txt": "hello world", "sub/b.txt": ""})
    files = LocalFolderFiles(tmp_path)
    stat = (tmp_path / "a.txt").stat()
    assert files.stamp("a.txt") == (stat.st_size, stat.st_mtime_ns) and files.stamp("gone.txt") is None
    assert files.read("a.txt", 5) == b"hello" and files.read("a.txt", 100) == b"hello world"
    assert files.read("sub", 10) is None and files.read("gone.txt", 10) is None
    assert files.is_folder() and not LocalFolderFiles(tmp_path / "a.txt").is_folder()


def test_a_path_or_a_symlink_on_it_that_leads_outside_is_not_inside(tmp_path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    tree(root, {"x.py": "x\n", "away2/AGENTS.md": "in\n"})
    tree(outside, {"AGENTS.md": "out\n", "notes.md": "out\n"})
    os.symlink(outside / "AGENTS.md", root / "AGENTS.md")
    os.symlink(outside, root / "away")
    os.symlink(root / "x.py", root / "alias.py")  # a symlink that stays inside
    files = LocalFolderFiles(root)
    assert files.inside("x.py") and files.inside("away2/AGENTS.md") and files.inside("alias.py")
    assert files.inside("missing/file.md")  # not there, but inside: reading it finds nothing
    for leaving in ("AGENTS.md", "away/notes.md", "../outside/notes.md", str(outside / "notes.md"), "/etc/hostname"):
        assert not files.inside(leaving), leaving


def test_the_home_folder_and_the_file_systems_root_are_not_ones_to_index(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert why_not_indexed(tmp_path) == "it is your home folder"
    assert why_not_indexed(tmp_path / ".." / tmp_path.name) == "it is your home folder"
    (tmp_path / "project").mkdir()
    assert why_not_indexed(tmp_path / "project") is None
    assert LocalFolderFiles(tmp_path / "project").why_not_indexed() is None
    assert why_not_indexed(Path("/")) == "it is the file system's root"
