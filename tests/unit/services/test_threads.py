"""Threads fall back to memory when the database cannot be used, and say so once."""

from __future__ import annotations

import sqlite3
import time

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.threads import NewMessage
from margin.services.threads import DAY_S, Threads


async def test_corrupt_database_falls_back_to_memory_with_one_message(tmp_path):
    path = tmp_path / "threads.db"
    path.write_bytes(b"garbage" * 1000)
    told: list[str] = []
    threads = Threads(SQLiteThreadStore, path, ttl_days=30, tell_user=told.append)
    thread = await threads.run(lambda s: s.canonical_thread("file:///ws", "chat"))
    await threads.run(lambda s: s.append(thread.id, [NewMessage("user", "still works")]))
    messages = await threads.run(lambda s: s.messages(thread.id))
    assert [m.content for m in messages] == ["still works"]
    assert not threads.persistent and len(told) == 1
    assert str(path) in told[0] and "threads are kept only until Margin stops" in told[0]
    assert path.read_bytes() == b"garbage" * 1000  # the user's file is left alone
    await threads.close()


async def test_stale_threads_are_removed_when_the_store_opens(tmp_path):
    path = tmp_path / "threads.db"
    seed = SQLiteThreadStore(path)
    old = await seed.new_thread("file:///ws", "chat")
    recent = await seed.new_thread("file:///ws", "chat")
    await seed.close()
    with sqlite3.connect(path) as db:  # last active 31 days ago
        db.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (time.time() - 31 * DAY_S, old.id))
    threads = Threads(SQLiteThreadStore, path, ttl_days=30)
    remaining = await threads.run(lambda s: s.list_threads())
    assert [t.id for t in remaining] == [recent.id] and threads.persistent
    await threads.close()


async def test_locked_database_falls_back_and_names_the_lock(tmp_path):
    path = tmp_path / "threads.db"
    seed = SQLiteThreadStore(path)
    await seed.open()
    await seed.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the database
    told: list[str] = []
    try:
        threads = Threads(SQLiteThreadStore, path, ttl_days=30, tell_user=told.append)
        thread = await threads.run(lambda s: s.canonical_thread("file:///ws", "chat"))
        await threads.run(lambda s: s.append(thread.id, [NewMessage("user", "kept in memory")]))
        assert [m.content for m in await threads.run(lambda s: s.messages(thread.id))] == ["kept in memory"]
        assert len(told) == 1 and "locked by another process" in told[0] and not threads.persistent
        await threads.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
