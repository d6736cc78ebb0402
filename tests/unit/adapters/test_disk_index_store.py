"""The on-disk index's store (adapters/disk_index_store.py): a warm start takes every unchanged
file as it is, reads the changed ones and drops the deleted ones; a cold build answers from the
batches written so far; the result searches as an index built in memory from the same files."""

from __future__ import annotations

import pytest

from margin.adapters import disk_index_store
from margin.adapters.disk_index_store import DiskIndexStore, DiskRebuild
from margin.core.retrieval import RetrievalIndex
from margin.core.workspace_files import Stamp


def build(store: DiskIndexStore, files: dict[str, tuple[str, Stamp]], batch: int = 2048) -> tuple[object, list[str]]:
    rebuild = store.rebuild()
    rebuild._batch, rebuild._wait = batch, float("inf")
    read = []
    for file_id, (text, stamp) in files.items():
        if not rebuild.reuse(file_id, stamp):
            read.append(file_id)
            rebuild.put(file_id, text, str(hash(text)), stamp)
    return rebuild.finish(), read


def files_of(n: int, version: int = 0) -> dict[str, tuple[str, Stamp]]:
    return {f"pkg/mod_{i}.py": (f"def handle_{i}(request):\n    return parse_body(request, {version})\n",
                                Stamp(60 + i, 1000 + i)) for i in range(n)}


def test_a_warm_start_reads_only_what_changed_and_drops_what_is_gone(tmp_path):
    store = DiskIndexStore("file:///ws", tmp_path)
    files = files_of(30)
    index, read = build(store, files)
    assert sorted(read) == sorted(files) and len(index) == 30
    index.close()
    changed = dict(files)
    changed["pkg/mod_3.py"] = ("def stream_reply():\n    pass\n", Stamp(30, 5))
    del changed["pkg/mod_4.py"]
    changed["pkg/new.py"] = ("def new_thing():\n    pass\n", Stamp(27, 6))
    index, read = build(store, changed)
    assert sorted(read) == ["pkg/mod_3.py", "pkg/new.py"]
    memory = RetrievalIndex()
    for file_id, (text, _) in changed.items():
        memory.put(file_id, text, str(hash(text)))
    for query in ("handle request", "stream reply", "parse body 4", "new thing"):
        assert index.search(query, limit=8) == memory.search(query, limit=8)
    assert len(index) == len(changed) and index.fingerprint("pkg/mod_4.py") is None
    index.close()


def test_a_cold_build_answers_from_what_is_written_so_far(tmp_path):
    store = DiskIndexStore("file:///ws", tmp_path)
    rebuild: DiskRebuild = store.rebuild()
    rebuild._batch, rebuild._wait = 10, float("inf")
    for file_id, (text, stamp) in list(files_of(25).items())[:12]:
        rebuild.put(file_id, text, str(hash(text)), stamp)
    assert len(rebuild.index) == 10  # one batch landed, two files pending
    assert [hit.file_id for hit in rebuild.index.search("handle_7", limit=1)] == ["pkg/mod_7.py"]
    assert rebuild.finish() is rebuild.index and len(rebuild.index) == 12
    rebuild.index.close()


def test_a_batch_is_written_once_it_holds_enough_lines_or_is_old_enough(tmp_path, monkeypatch):
    """What a batch holds in memory is bounded by its lines (however few files), and a cold
    start's first files answer within FLUSH_S, later batches waiting twice as long each time."""
    monkeypatch.setattr(disk_index_store, "PENDING_LINES", 10)
    rebuild = DiskIndexStore("file:///ws", tmp_path).rebuild()
    rebuild._wait = float("inf")
    files = list(files_of(12).items())  # 3 lines each
    for file_id, (text, stamp) in files[:4]:
        rebuild.put(file_id, text, str(hash(text)), stamp)
    assert len(rebuild.index) == 4  # 12 lines: written
    monkeypatch.setattr(disk_index_store, "PENDING_LINES", 1000)
    rebuild._wait = disk_index_store.FLUSH_S
    rebuild._flushed -= disk_index_store.FLUSH_S  # as old as a batch may get
    file_id, (text, stamp) = files[4]
    rebuild.put(file_id, text, str(hash(text)), stamp)
    assert len(rebuild.index) == 5 and rebuild._wait == 2 * disk_index_store.FLUSH_S
    file_id, (text, stamp) = files[5]
    rebuild.put(file_id, text, str(hash(text)), stamp)
    assert len(rebuild.index) == 5  # pending: the next batch waits longer
    rebuild.finish().close()


def test_a_builds_writes_give_way_between_files_and_a_stop_writes_nothing(tmp_path):
    """The rebuild's `pause` is called before each file of a batch's write (so indexing waits
    while the editor's requests run); one that raises (shutdown) leaves the batch unwritten."""
    calls = []

    def pause():
        calls.append(len(calls))
        if len(calls) == 5:
            raise RuntimeError("stopped")

    rebuild = DiskIndexStore("file:///ws", tmp_path).rebuild(pause)
    rebuild._batch, rebuild._wait = 3, float("inf")
    files = list(files_of(6).items())
    for file_id, (text, stamp) in files[:3]:
        rebuild.put(file_id, text, str(hash(text)), stamp)
    assert calls == [0, 1, 2] and len(rebuild.index) == 3
    with pytest.raises(RuntimeError):
        for file_id, (text, stamp) in files[3:]:
            rebuild.put(file_id, text, str(hash(text)), stamp)
    assert len(rebuild.index) == 3 and rebuild.index.file_data("pkg/mod_3.py") is None  # rolled back whole
    rebuild.index.close()


def test_two_stores_of_one_folder_share_its_file(tmp_path):
    first, second = DiskIndexStore("file:///ws", tmp_path), DiskIndexStore("file:///ws", tmp_path)
    assert first.path == second.path != DiskIndexStore("file:///other", tmp_path).path
    index, read = build(first, files_of(8))
    again, read_again = build(second, files_of(8))
    assert len(read) == 8 and read_again == []
    assert again.search("handle_5", limit=1) == index.search("handle_5", limit=1)
    index.close()
    again.close()
