"""adapters.workspace_scan and adapters.local_files on a real folder: what retrieval indexes
(git's ignore rules, no symlinks, no binary or huge files)."""

from __future__ import annotations

import os
from pathlib import Path

from margin.adapters.local_files import LocalFolderFiles
from margin.adapters.workspace_scan import indexable, scan
from margin.core.workspace_files import MAX_FILE_BYTES, read_for_index


def tree(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def test_git_ignore_rules_nested_files_symlinks_binary_and_huge_files(tmp_path):
    tree(tmp_path, {
        ".gitignore": "node_modules/\n*.log\n!keep.log\n/top_only.py\n",
        "a/.gitignore": "secret.py\n",
        "a/b/c.py": "x = 1\n", "a/secret.py": "s\n", "a/b/secret.py": "s\n",
        "a/top_only.py": "kept: the rule is anchored to the root\n", "top_only.py": "ignored\n",
        "debug.log": "l\n", "keep.log": "k\n", "node_modules/m/index.js": "n\n",
        ".git/config": "[core]\n", ".git/info/exclude": "excluded_by_git.py\n", "excluded_by_git.py": "e\n",
        "image.png": b"\x89PNG\r\n\x1a\n\0\0\0", "huge.txt": "x" * (MAX_FILE_BYTES + 1),
    })
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "far.py").write_text("far\n")
    os.symlink(outside, tmp_path / "linked")
    os.symlink(outside / "far.py", tmp_path / "far.py")
    files = LocalFolderFiles(tmp_path)
    found = [f.file_id for f in files.scan()]
    readable = [f for f in found if read_for_index(files, f) is not None]
    assert sorted(readable) == [".gitignore", "a/.gitignore", "a/b/c.py", "a/top_only.py", "keep.log"]
    assert "image.png" in found and read_for_index(files, "image.png") is None  # binary: never read as text
    assert read_for_index(files, "huge.txt") is None and read_for_index(files, "missing.py") is None
    assert [f.stamp for f in scan(tmp_path) if f.file_id == "a/b/c.py"] == [files.stamp("a/b/c.py")]
    every = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_dir() or p.is_symlink()}
    for file_id in every:  # a file reported changed later is judged as the scan judged it
        assert indexable(tmp_path, file_id) == (file_id in found), file_id



def test_a_changed_ignore_file_is_read_again(tmp_path):
    """Ignore rules are compiled once for each text of an ignore file (instruction files are
    checked against them on every request): a new text, in place or replaced, is used at once,
    also of the same size within the file system's time tick."""
    from margin.adapters.workspace_scan import ignored

    (tmp_path / "sub").mkdir()
    (tmp_path / ".gitignore").write_text(".env\n")
    assert ignored(tmp_path, ".env") and not ignored(tmp_path, "AGENTS.md")
    (tmp_path / ".gitignore").write_text("*.md\n")  # the same size, the same inode
    assert not ignored(tmp_path, ".env") and ignored(tmp_path, "AGENTS.md")
    replaced = tmp_path / "new-ignore"
    replaced.write_text("sub/\n")
    os.replace(replaced, tmp_path / ".gitignore")
    assert ignored(tmp_path, "sub/AGENTS.md") and not ignored(tmp_path, "AGENTS.md")
    (tmp_path / "sub" / ".gitignore").write_text("*.md\n")
    (tmp_path / ".gitignore").unlink()
    assert ignored(tmp_path, "sub/AGENTS.md") and not ignored(tmp_path, "AGENTS.md")
