"""Memories in the thread stores: one contract for SQLite and memory, then what only a real file
can show (ids and memories across a restart, the migration of a database Margin 0.1.0 wrote)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest

from margin.adapters.sqlite_schema import MIGRATIONS
from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.memories import InvalidMemory
from margin.core.threads import MemoryThreadStore, NewMessage

WS, OTHER = "file:///ws", "file:///other"
OLD_DATABASE = Path(__file__).parents[2] / "fixtures" / "data" / "threads-0.1.0.db"


@pytest.fixture(params=["sqlite", "memory"])
async def store(request, tmp_path):
    s = SQLiteThreadStore(tmp_path / "threads.db") if request.param == "sqlite" else MemoryThreadStore()
    await s.open()
    yield s
    await s.close()


async def test_a_workspace_sees_its_own_memories_and_the_global_ones_newest_first(store):
    pytest_first = await store.add_memory("  we use pytest, never unittest \n", "workspace", WS)
    api = await store.add_memory("the API base is /v2", "global", "ignored for a global memory")
    elsewhere = await store.add_memory("tabs, not spaces", "workspace", OTHER)
    assert (pytest_first.text, pytest_first.scope, pytest_first.workspace) == (
        "we use pytest, never unittest", "workspace", WS)
    assert (api.scope, api.workspace) == ("global", "")
    assert len({pytest_first.id, api.id, elsewhere.id}) == 3
    assert all(m.id.isdigit() for m in (pytest_first, api, elsewhere))
    assert await store.list_memories(WS) == [api, pytest_first]  # newest first
    assert await store.list_memories(OTHER) == [elsewhere, api]
    assert await store.list_memories("") == [api]  # no workspace folder: the global ones


async def test_memories_made_in_the_same_instant_keep_their_order(store, monkeypatch):
    monkeypatch.setattr("time.time", lambda: 1_700_000_000.0)
    made = [await store.add_memory(f"fact {i}", "workspace", WS) for i in range(12)]
    assert [m.text for m in await store.list_memories(WS)] == [m.text for m in reversed(made)]


async def test_remove_memory_says_whether_there_was_one(store):
    kept = await store.add_memory("kept", "global", "")
    doomed = await store.add_memory("doomed", "workspace", WS)
    assert await store.remove_memory(doomed.id) is True
    assert await store.remove_memory(doomed.id) is False
    for never in ("999", "", "abc", "²", "9" * 40):
        assert await store.remove_memory(never) is False
    assert await store.list_memories(WS) == [kept]


async def test_an_invalid_memory_is_refused_and_nothing_is_stored(store):
    for text, scope, workspace, says in [
        ("   ", "workspace", WS, "empty"),
        ("x" * 2001, "workspace", WS, "at most 2,000 characters; this one has 2,001"),
        ("fine", "project", WS, "not 'project'"),
        ("fine", "workspace", "", 'scope "global"'),
    ]:
        with pytest.raises(InvalidMemory, match=says):
            await store.add_memory(text, scope, workspace)
    assert await store.list_memories(WS) == []
    assert (await store.add_memory("y" * 2000, "workspace", WS)).text == "y" * 2000  # the limit itself is fine


async def test_memories_and_their_ids_survive_a_restart_and_ids_are_never_reused(tmp_path):
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    first = await store.add_memory("first", "workspace", WS)
    second = await store.add_memory("second", "global", "")
    await store.close()
    again = SQLiteThreadStore(path)
    assert await again.list_memories(WS) == [second, first]
    assert await again.remove_memory(second.id) is True
    third = await again.add_memory("third", "global", "")
    assert int(third.id) > int(second.id)  # a forgotten id never comes back as another memory
    await again.close()


async def test_writes_at_the_same_time_all_land(tmp_path):
    store = SQLiteThreadStore(tmp_path / "t.db")
    await store.open()
    try:
        made = await asyncio.gather(*(store.add_memory(f"fact {i}", "workspace", WS) for i in range(20)))
        assert len({m.id for m in made}) == 20
        assert sorted(m.text for m in await store.list_memories(WS)) == sorted(f"fact {i}" for i in range(20))
    finally:
        await store.close()


async def test_a_database_margin_0_1_0_wrote_migrates_and_keeps_its_threads(tmp_path):
    path = tmp_path / "threads.db"
    shutil.copy(OLD_DATABASE, path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        threads_before = db.execute("SELECT id, workspace FROM threads").fetchall()
        messages_before = db.execute("SELECT id, content FROM messages ORDER BY id").fetchall()
        counts_before = db.execute("SELECT message_id, tokenizer, tokens FROM token_counts ORDER BY 1").fetchall()
    assert len(counts_before) == len(messages_before) == 4
    store = SQLiteThreadStore(path)
    memory = await store.add_memory("we use pytest", "workspace", "file:///ws")
    assert await store.list_memories("file:///ws") == [memory]
    (thread_id, workspace), = threads_before
    assert (await store.canonical_thread(workspace, "chat")).id == thread_id
    migrated = await store.messages(thread_id)
    assert [(m.id, m.content) for m in migrated] == messages_before
    assert [(m.id, *m.tokens.items()) for m in migrated] == [(i, (name, n)) for i, name, n in counts_before]
    before = (await store.get_thread(thread_id)).updated_at
    (added,) = await store.append(thread_id, [NewMessage("user", "and now?", tokens={"tiktoken:o200k_base": 3})])
    assert (await store.get_thread(thread_id)).updated_at == added.created_at > before  # the schema's trigger
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 3
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT name FROM sqlite_schema WHERE name = 'token_counts'").fetchall() == []


async def test_a_locked_database_is_named_when_remembering(tmp_path):
    from margin.core.threads import StoreUnavailable

    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    await store.open()
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable, match="locked by another process"):
            await store.add_memory("x", "global", "")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await store.add_memory("x", "global", "")).text == "x"
    await store.close()
