"""adapters.workspace_scan: what retrieval indexes (git's ignore rules, no symlinks, no binary or
huge files), and the stored index reused at start-up for files whose size and time are unchanged."""

from __future__ import annotations

import os
from pathlib import Path

from margin.adapters.workspace_scan import MAX_FILE_BYTES, indexable, read_text, scan
from margin.core.vfs import fingerprint
from margin.services.retrieval import _build, _save


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
    found = [f.file_id for f in scan(tmp_path)]
    readable = [f for f in found if read_text(tmp_path / f) is not None]
    assert sorted(readable) == [".gitignore", "a/.gitignore", "a/b/c.py", "a/top_only.py", "keep.log"]
    assert "image.png" in found and read_text(tmp_path / "image.png") is None  # binary: never read as text
    every = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if not p.is_dir() or p.is_symlink()}
    for file_id in every:  # a file reported changed later is judged as the scan judged it
        assert indexable(tmp_path, file_id) == (file_id in found), file_id


def test_a_restart_reuses_stored_files_whose_size_and_time_are_unchanged(tmp_path):
    root, stored = tmp_path / "ws", tmp_path / "index.json.gz"
    tree(root, {"a.py": "def alpha_walrus():\n    pass\n", "b.py": "def beta():\n    pass\n"})
    index, disk, reused = _build(root, stored)
    assert reused == 0 and len(index) == 2
    _save(stored, "file:///ws", index, disk)

    stat = (root / "a.py").stat()  # same size, same time, other text: only a stored index still knows the old
    (root / "a.py").write_text("def gamma_orcas2():\n    pass\n")
    os.utime(root / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (root / "b.py").write_text("def beta_changed():\n    return 1\n")  # changed: read again
    again, _, reused = _build(root, stored)
    assert reused == 1
    assert again.fingerprint("a.py") == fingerprint("def alpha_walrus():\n    pass\n")
    assert again.fingerprint("b.py") == fingerprint("def beta_changed():\n    return 1\n")
    assert [h.file_id for h in again.search("walrus")] == ["a.py"]

    stored.write_bytes(b"not gzip")  # a damaged store is ignored, never fatal
    fresh, _, reused = _build(root, stored)
    assert reused == 0 and fresh.fingerprint("a.py") == fingerprint("def gamma_orcas2():\n    pass\n")


def test_building_and_storing_the_index_wait_between_files_while_other_work_runs(tmp_path):
    """Indexing gives way between files (services.background): the thread stops at the gate
    while it is shut, goes on when it opens, and ends at its next file once cancelled."""
    import threading

    import pytest

    from margin.services.retrieval import _Pause, _Stopped

    root, stored = tmp_path / "ws", tmp_path / "index.json.gz"
    tree(root, {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(5)})
    calls: list[str] = []
    index, disk, _ = _build(root, None, lambda: calls.append("file"))
    assert calls == ["file"] * 5  # once before each file
    _save(stored, "file:///ws", index, disk, lambda: calls.append("stored"))
    assert calls[5:] == ["stored"] * 5
    assert _build(root, stored)[2] == 5  # what was written a file at a time reads back whole

    may_run, stop = threading.Event(), threading.Event()
    pause = _Pause(may_run, stop)
    built: list[int] = []
    worker = threading.Thread(target=lambda: built.append(len(_build(root, None, pause)[0])))
    worker.start()
    worker.join(0.3)
    assert worker.is_alive() and built == []  # held at the first file
    may_run.set()
    worker.join()
    assert built == [5] and pause.seconds > 0

    may_run.clear()
    stop.set()
    with pytest.raises(_Stopped):
        _build(root, None, pause)
