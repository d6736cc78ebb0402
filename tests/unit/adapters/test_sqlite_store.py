"""The thread stores: one contract for SQLite and memory, then what only a real file can show."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time

import aiosqlite
import pytest

from margin.adapters.sqlite_store import MIGRATIONS, SQLiteThreadStore
from margin.core.threads import FILE_CONTEXT, MemoryThreadStore, NewMessage, StoreUnavailable


@pytest.fixture(params=["sqlite", "memory"])
async def store(request, tmp_path):
    s = SQLiteThreadStore(tmp_path / "threads.db") if request.param == "sqlite" else MemoryThreadStore()
    await s.open()
    yield s
    await s.close()


async def test_canonical_thread_is_created_once_and_newest_wins(store):
    first = await store.canonical_thread("file:///ws", "chat")
    assert (await store.canonical_thread("file:///ws", "chat")).id == first.id
    other = await store.canonical_thread("file:///other", "chat")
    assert other.id != first.id
    await asyncio.sleep(0.01)
    newer = await store.new_thread("file:///ws", "chat", title="fresh start")
    assert (await store.canonical_thread("file:///ws", "chat")).id == newer.id
    assert {t.id for t in await store.list_threads("file:///ws")} == {first.id, newer.id}


async def test_messages_keep_order_metadata_and_token_counts(store):
    thread = await store.canonical_thread("file:///ws", "chat")
    added = await store.append(thread.id, [
        NewMessage("user", "hello 😀", tokens={"tiktoken:o200k_base": 3, "heuristic": 5}),
        NewMessage("assistant", "hi", meta={"ops": [{"op": "insert"}]}),
        NewMessage("assistant", '{"type":"virtual_file_context"}', hidden=True, kind=FILE_CONTEXT,
                   uri="file:///ws/a.py", fingerprint="sha256:ab"),
    ])
    assert [m.id for m in added] == sorted(m.id for m in added)
    stored = await store.messages(thread.id)
    assert [m.content for m in stored] == ["hello 😀", "hi", '{"type":"virtual_file_context"}']
    assert stored[0].tokens == {"tiktoken:o200k_base": 3, "heuristic": 5}
    assert stored[1].meta == {"ops": [{"op": "insert"}]}
    assert (stored[2].hidden, stored[2].kind, stored[2].uri, stored[2].fingerprint) == (
        True, FILE_CONTEXT, "file:///ws/a.py", "sha256:ab")
    visible = await store.messages(thread.id, include_hidden=False)
    assert [m.content for m in visible] == ["hello 😀", "hi"]


async def test_delete_messages_and_threads(store):
    thread = await store.canonical_thread("file:///ws", "chat")
    added = await store.append(thread.id, [NewMessage("user", "a"), NewMessage("user", "b")])
    await store.delete_messages([added[0].id])
    assert [m.content for m in await store.messages(thread.id)] == ["b"]
    assert await store.delete_thread(thread.id) is True
    assert await store.get_thread(thread.id) is None and await store.messages(thread.id) == []
    assert await store.delete_thread(thread.id) is False


async def test_append_to_a_missing_thread_is_refused(store):
    with pytest.raises(KeyError):
        await store.append("no-such-thread", [NewMessage("user", "x")])


async def test_inactive_threads_are_purged(store):
    old = await store.new_thread("file:///ws", "chat")
    await asyncio.sleep(0.02)
    cutoff = time.time()
    await asyncio.sleep(0.02)
    fresh = await store.new_thread("file:///ws", "chat")
    await store.append(fresh.id, [NewMessage("user", "recent")])
    assert await store.purge_inactive(cutoff) == 1
    assert await store.get_thread(old.id) is None and await store.get_thread(fresh.id) is not None


async def test_sqlite_uses_wal_and_a_versioned_schema(tmp_path):
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    reopened = SQLiteThreadStore(path)  # migrations are not run twice
    await reopened.open()
    await reopened.close()


async def test_sqlite_survives_restart(tmp_path):
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    thread = await store.canonical_thread("file:///ws", "chat")
    await store.append(thread.id, [NewMessage("user", "remember me", tokens={"h": 4})])
    await store.close()
    again = SQLiteThreadStore(path)
    assert (await again.canonical_thread("file:///ws", "chat")).id == thread.id
    assert [(m.content, m.tokens) for m in await again.messages(thread.id)] == [("remember me", {"h": 4})]
    await again.close()


async def test_corrupt_file_is_named_and_not_touched(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    before = path.read_bytes()
    with pytest.raises(StoreUnavailable) as caught:
        await SQLiteThreadStore(path).open()
    assert str(path) in str(caught.value) and "not a valid SQLite database" in str(caught.value)
    assert path.read_bytes() == before


async def test_read_only_database_is_named(tmp_path):
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    await store.open()
    await store.close()
    # A read-only mount, as SQLite's read-only mode (this test may run as root, who ignores chmod).
    ro = SQLiteThreadStore(path)
    ro._db = await aiosqlite.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    with pytest.raises(StoreUnavailable) as caught:
        await ro.new_thread("file:///ws", "chat")
    assert "cannot be written" in str(caught.value) and str(path) in str(caught.value)
    await ro.close()


async def test_locked_database_is_named(tmp_path):
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    await store.open()
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")  # another process holding the write lock
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.new_thread("file:///ws", "chat")
        assert "locked by another process" in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await store.new_thread("file:///ws", "chat")).id  # usable again once released
    await store.close()


WRITER = """
import asyncio, sys
from pathlib import Path
from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.threads import NewMessage

async def main():
    store = SQLiteThreadStore(Path(sys.argv[1]))
    thread = await store.canonical_thread("file:///ws", "chat")
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        await store.append(thread.id, [NewMessage("user", "u" * 2000, tokens={"a": 1, "b": 2}),
                                       NewMessage("assistant", "r" * 2000, tokens={"a": 3, "b": 4})])

asyncio.run(main())
"""


async def test_process_killed_mid_write_leaves_a_consistent_database(tmp_path):
    path = tmp_path / "t.db"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready"
    await asyncio.sleep(0.5)
    writer.kill()
    writer.wait()
    store = SQLiteThreadStore(path)
    thread = await store.canonical_thread("file:///ws", "chat")
    stored = await store.messages(thread.id)
    await store.close()
    assert len(stored) > 0 and len(stored) % 2 == 0  # whole exchanges only
    assert all(m.tokens == ({"a": 1, "b": 2} if m.role == "user" else {"a": 3, "b": 4}) for m in stored)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_writes_at_the_same_time_take_turns_and_all_land(tmp_path):
    """A turn stored while a background summary is stored: each append is its own transaction, on
    one connection, so they wait for each other instead of nesting (which SQLite refuses)."""
    store = SQLiteThreadStore(tmp_path / "t.db")
    await store.open()
    try:
        thread = await store.new_thread("file:///ws", "chat")
        batches = [[NewMessage("user", f"q{i}"), NewMessage("assistant", f"a{i}")] for i in range(20)]
        await asyncio.gather(*(store.append(thread.id, batch) for batch in batches))
        contents = [m.content for m in await store.messages(thread.id)]
        assert sorted(contents) == sorted(m.content for batch in batches for m in batch)
        for i in range(20):  # each batch landed whole and in order
            assert contents.index(f"a{i}") == contents.index(f"q{i}") + 1
    finally:
        await store.close()


async def test_full_database_is_named_and_the_failed_write_leaves_no_trace(tmp_path):
    """SQLite rolls a transaction back itself on SQLITE_FULL: the store must not then fail on
    its own ROLLBACK (which once hid the real error behind `cannot rollback`)."""
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    thread = await store.canonical_thread("file:///ws", "chat")
    await store.append(thread.id, [NewMessage("user", "kept")])
    pages = (await (await store._db.execute("PRAGMA page_count")).fetchone())[0]
    await store._db.execute(f"PRAGMA max_page_count = {pages + 1}")  # as a full disk would
    with pytest.raises(StoreUnavailable) as caught:
        await store.append(thread.id, [NewMessage("user", "q" * 50_000), NewMessage("assistant", "a")])
    assert "the disk it is on is full" in str(caught.value) and str(path) in str(caught.value)
    assert [m.content for m in await store.messages(thread.id)] == ["kept"]
    exported = await store.export()
    assert [t.id for t in exported.threads] == [thread.id]
    assert [m.content for m in exported.messages[thread.id]] == ["kept"]
    await store.close()


async def test_a_writer_cancelled_at_any_moment_leaves_no_transaction_behind(store):
    """A background summary's write is cancelled when the user's request comes first; wherever
    the cancellation lands (even while its BEGIN is on its way to SQLite), the next write works
    and nothing of the cancelled one is half there."""
    thread = await store.new_thread("file:///ws", "chat")
    kept = 0
    for pause in range(40):
        writing = asyncio.ensure_future(store.append(thread.id, [NewMessage("user", "cancelled"),
                                                                  NewMessage("assistant", "never half")]))
        for _ in range(pause % 8):
            await asyncio.sleep(0)
        writing.cancel()
        await asyncio.gather(writing, return_exceptions=True)
        await store.append(thread.id, [NewMessage("user", f"kept {pause}")])  # never StoreUnavailable
        kept += 1
    contents = [m.content for m in await store.messages(thread.id)]
    assert [c for c in contents if c.startswith("kept")] == [f"kept {i}" for i in range(kept)]
    assert contents.count("cancelled") == contents.count("never half")  # whole or absent
