"""adapters.index_file on a real folder: the index kept between runs as one gzipped JSON file,
taken over at the next start for files whose size and time are unchanged, written a file at a
time, and an empty store when damaged."""

from __future__ import annotations

import os
from pathlib import Path

from margin.adapters.index_file import GzipIndexStore
from margin.adapters.local_files import LocalFolderFiles
from margin.core.vfs import fingerprint
from margin.services.retrieval import _build
from tests.unit.adapters.test_workspace_scan import tree


def test_a_restart_reuses_stored_files_whose_size_and_time_are_unchanged(tmp_path):
    root = tmp_path / "ws"
    tree(root, {"a.py": "def alpha_walrus():\n    pass\n", "b.py": "def beta():\n    pass\n"})
    files, store = LocalFolderFiles(root), GzipIndexStore("file:///ws", tmp_path / "index")
    index, reused = _build(files, store)
    assert reused == 0 and len(index) == 2
    index.save(lambda: None)
    assert [p.name for p in (tmp_path / "index").iterdir()] == [store.path.name]

    stat = (root / "a.py").stat()  # same size, same time, other text: only a stored index still knows the old
    (root / "a.py").write_text("def gamma_orcas2():\n    pass\n")
    os.utime(root / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (root / "b.py").write_text("def beta_changed():\n    return 1\n")  # changed: read again
    again, reused = _build(files, GzipIndexStore("file:///ws", tmp_path / "index"))
    assert reused == 1
    assert [h.file_id for h in again.search("walrus", limit=8, signals=None, exclude=())] == ["a.py"]
    assert [h.file_id for h in again.search("beta changed", limit=8, signals=None, exclude=())] == ["b.py"]

    store.path.write_bytes(b"not gzip")  # a damaged store is ignored, never fatal
    fresh, reused = _build(files, store)
    assert reused == 0
    assert [h.file_id for h in fresh.search("gamma orcas2", limit=8, signals=None, exclude=())] == ["a.py"]


def test_the_store_is_written_a_file_at_a_time_and_reads_back_whole(tmp_path):
    root = tmp_path / "ws"
    tree(root, {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(5)})
    files, store = LocalFolderFiles(root), GzipIndexStore("file:///ws", tmp_path / "index")
    index, _ = _build(files, store)
    calls: list[str] = []
    index.save(lambda: calls.append("stored"))
    assert calls == ["stored"] * 5
    kept = store.load()
    assert sorted(kept) == [f"m{i}.py" for i in range(5)]
    assert kept["m3.py"].fingerprint == fingerprint("def f3():\n    return 3\n")
    assert kept["m3.py"].stamp == files.stamp("m3.py")
    assert _build(files, store)[1] == 5


def test_a_store_that_cannot_be_written_is_left_without_an_error(tmp_path):
    root, blocked = tmp_path / "ws", tmp_path / "blocked"
    tree(root, {"a.py": "a = 1\n"})
    blocked.write_text("a file where the index folder would be")
    store = GzipIndexStore("file:///ws", blocked / "index")
    index, _ = _build(LocalFolderFiles(root), store)
    index.save(lambda: None)
    assert store.load() == {} and blocked.read_text().startswith("a file")


def test_each_folder_has_its_own_store(tmp_path):
    one, two = GzipIndexStore("file:///one", tmp_path), GzipIndexStore("file:///two", tmp_path)
    assert one.path != two.path and one.path.parent == two.path.parent == Path(tmp_path)
