"""The thread stores: one contract for SQLite and memory, then what only a real file can show."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time

import aiosqlite
import pytest

from margin.adapters.sqlite_schema import MIGRATIONS
from margin.adapters.sqlite_store import SQLiteThreadStore
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
    synchronous = await (await store._conn()).execute_fetchall("PRAGMA synchronous")
    assert list(synchronous) == [(1,)]  # NORMAL: safe with WAL, and no sync on each commit
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


async def fresh_view(path, thread_id):
    """The thread as a new connection reads it from the file (nothing kept in memory)."""
    other = SQLiteThreadStore(path)
    try:
        return await other.messages(thread_id)
    finally:
        await other.close()


@pytest.fixture
async def stores(tmp_path):
    """SQLite stores on one file (each its own connection), closed whatever the test does."""
    made: list[SQLiteThreadStore] = []

    def make() -> SQLiteThreadStore:
        made.append(SQLiteThreadStore(tmp_path / "t.db"))
        return made[-1]

    yield make
    for store in made:
        await store.close()


async def test_messages_kept_in_memory_are_what_the_file_holds(tmp_path, stores):
    """Reads are answered from memory between writes: after appends (with metadata, counts and
    hidden contexts), deletions, a failed write and cancelled writes, every read is what a new
    connection reads from the file."""
    path = tmp_path / "t.db"
    store = stores()
    thread = await store.new_thread("file:///ws", "chat")
    other = await store.new_thread("file:///ws", "chat")
    for i in range(6):
        await store.append(thread.id, [
            NewMessage("assistant", f"file {i}", hidden=True, kind=FILE_CONTEXT, uri="file:///ws/a.py",
                       fingerprint=f"sha256:{i}", meta={"file_id": "a.py"}, tokens={"heuristic": i}),
            NewMessage("user", f"q{i} 😀", meta={"display": f"q{i}"}, tokens={"tiktoken:o200k_base": i, "x": 2}),
            NewMessage("assistant", f"a{i}", meta={"ops": [{"op": "insert", "n": 1.5}]})])
        await store.append(other.id, [NewMessage("user", f"elsewhere {i}")])
        assert await store.messages(thread.id) == await fresh_view(path, thread.id)
        assert await store.messages(thread.id, include_hidden=False) == [
            m for m in await fresh_view(path, thread.id) if not m.hidden]
    first = (await store.messages(thread.id))[0].id
    await store.delete_messages([first])
    assert await store.messages(thread.id) == await fresh_view(path, thread.id)
    assert first not in [m.id for m in await store.messages(thread.id)]
    for pause in range(12):
        writing = asyncio.ensure_future(store.append(thread.id, [NewMessage("user", "cancelled")]))
        for _ in range(pause % 6):
            await asyncio.sleep(0)
        writing.cancel()
        read = await store.messages(thread.id)  # perhaps while the cancelled writer's rows are open
        await store.append(thread.id, [NewMessage("user", f"kept {pause}")])
        assert await store.messages(thread.id) == await fresh_view(path, thread.id), read
    pages = (await (await store._db.execute("PRAGMA page_count")).fetchone())[0]
    await store._db.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(StoreUnavailable):
        await store.append(thread.id, [NewMessage("user", "q" * 50_000)])
    assert await store.messages(thread.id) == await fresh_view(path, thread.id)
    await store.delete_thread(thread.id)
    assert await store.messages(thread.id) == []


async def test_a_write_by_another_connection_is_read_at_once(stores):
    """The `margin` command line (or a second editor) writing the same file: the next read
    sees it, though the thread was kept in memory."""
    store, writer = stores(), stores()
    thread = await store.new_thread("file:///ws", "chat")
    await store.append(thread.id, [NewMessage("user", "mine")])
    assert [m.content for m in await store.messages(thread.id)] == ["mine"]
    await writer.append(thread.id, [NewMessage("user", "theirs")])
    assert [m.content for m in await store.messages(thread.id)] == ["mine", "theirs"]
    await writer.delete_messages([m.id for m in await writer.messages(thread.id)][:1])
    assert [m.content for m in await store.messages(thread.id)] == ["theirs"]
    await store.append(thread.id, [NewMessage("user", "mine again")])
    assert [m.content for m in await store.messages(thread.id)] == ["theirs", "mine again"]


async def test_a_thread_read_again_comes_from_memory(stores):
    """What the request path gains: reading a thread again after this store's own append runs
    one query (data_version), not the thread's rows."""
    store = stores()
    thread = await store.new_thread("file:///ws", "chat")
    await store.append(thread.id, [NewMessage("user", "q"), NewMessage("assistant", "a")])
    await store.messages(thread.id)
    await store.append(thread.id, [NewMessage("user", "q2"), NewMessage("assistant", "a2")])
    queries: list[str] = []
    await store._db.set_trace_callback(queries.append)
    read = await store.messages(thread.id)
    assert [m.content for m in read] == ["q", "a", "q2", "a2"]
    assert queries == ["PRAGMA data_version"]
    read.clear()  # the caller's own list
    assert len(await store.messages(thread.id)) == 4


async def test_a_requests_reads_look_for_other_writers_once(stores):
    """A chat request reads its canonical thread, its timeline and its workspace's memories:
    inside `reading()` that is one query (data_version) once they are kept, not one a read."""
    store = stores()
    thread = await store.canonical_thread("file:///ws", "chat")
    await store.add_memory("tabs", "workspace", "file:///ws")
    await store.append(thread.id, [NewMessage("user", "q"), NewMessage("assistant", "a")])
    async with store.reading():  # what a first request keeps
        await store.canonical_thread("file:///ws", "chat")
        await store.messages(thread.id)
        await store.list_memories("file:///ws")
    queries: list[str] = []
    await store._db.set_trace_callback(queries.append)
    async with store.reading():
        async with store.reading():  # nested: the outer block's look
            found = await store.canonical_thread("file:///ws", "chat")
        timeline = await store.messages(thread.id)
        remembered = await store.list_memories("file:///ws")
    assert queries == ["PRAGMA data_version"]
    assert found.id == thread.id and [m.content for m in timeline] == ["q", "a"]
    assert [m.text for m in remembered] == ["tabs"]
    queries.clear()
    await store.canonical_thread("file:///ws", "chat")  # outside a block: a look a read
    await store.list_memories("file:///ws")
    assert queries == ["PRAGMA data_version"] * 2


async def test_what_is_kept_follows_every_writer(stores):
    """Threads and memories kept for requests are what the file holds after this store's own
    writes (which do not change data_version) and after another connection's commits."""
    store, writer = stores(), stores()

    async def read() -> tuple[object, ...]:
        async with store.reading():
            thread = await store.canonical_thread("file:///ws", "chat")
            return thread, [m.text for m in await store.list_memories("file:///ws")]

    async def on_file() -> tuple[object, ...]:
        fresh = stores()
        return (await fresh.canonical_thread("file:///ws", "chat"),
                [m.text for m in await fresh.list_memories("file:///ws")])

    first, _ = await read()  # made
    assert await read() == (first, [])  # and kept
    await store.append(first.id, [NewMessage("user", "q")])  # the thread's time moves on
    assert await read() == await on_file()
    memory = await store.add_memory("mine", "workspace", "file:///ws")
    assert await read() == await on_file() and (await read())[1] == ["mine"]
    await writer.add_memory("theirs", "global", "file:///ws")
    newer = await writer.new_thread("file:///ws", "chat")
    assert await read() == await on_file() and (await read())[0].id == newer.id
    await store.remove_memory(memory.id)
    await writer.append(newer.id, [NewMessage("user", "theirs")])
    assert await read() == await on_file() and (await read())[1] == ["theirs"]
    mine = await store.new_thread("file:///ws", "chat")
    assert (await read())[0].id == mine.id
    await writer.delete_thread(mine.id)
    assert await read() == await on_file() and (await read())[0].id == newer.id


async def test_a_block_never_uses_a_look_from_before_it_began(stores):
    """Requests run side by side: a block that begins after another connection commits sees
    the commit, though a block that began before it is still open."""
    store, writer = stores(), stores()
    await store.list_memories("file:///ws")
    entered, written = asyncio.Event(), asyncio.Event()

    async def long_request() -> list[str]:
        async with store.reading():
            entered.set()
            await written.wait()
            return [m.text for m in await store.list_memories("file:///ws")]

    async def later_request() -> list[str]:
        await entered.wait()
        await writer.add_memory("new", "workspace", "file:///ws")
        written.set()
        async with store.reading():
            return [m.text for m in await store.list_memories("file:///ws")]

    _, later = await asyncio.gather(long_request(), later_request())
    assert later == ["new"]


async def test_a_read_while_a_write_is_open_is_not_kept(tmp_path, stores):
    """Reads share the writer's connection, so they see rows not yet committed: a turn half
    written, or the rows a writer cancelled mid-way leaves open until the next write rolls them
    back. Such a read is answered but not kept; nor is a turn whose write failed."""
    path = tmp_path / "t.db"
    store = stores()
    for pause in range(10):
        thread = await store.new_thread("file:///ws", "chat")  # nothing kept for it yet
        writing = asyncio.ensure_future(store.append(thread.id, [NewMessage("user", f"q{pause}"),
                                                                  NewMessage("assistant", f"a{pause}")]))
        for _ in range(pause):
            await asyncio.sleep(0)
        await store.messages(thread.id)  # perhaps halfway through the turn
        await writing
        assert await store.messages(thread.id) == await fresh_view(path, thread.id)

    cancelled = await store.new_thread("file:///ws", "chat")  # its writer took what was kept
    await store.append(cancelled.id, [NewMessage("user", "first")])
    await store._db.execute("BEGIN IMMEDIATE")  # as a writer cancelled mid-way leaves it
    await store._db.execute("INSERT INTO messages (thread_id, role, content, created_at) VALUES (?, 'user', "
                            "'never committed', 0)", (cancelled.id,))
    assert [m.content for m in await store.messages(cancelled.id)] == ["first", "never committed"]
    await store.append(cancelled.id, [NewMessage("user", "next")])  # rolls the open one back first
    assert await store.messages(cancelled.id) == await fresh_view(path, cancelled.id)

    fetch = store._db.execute_fetchall

    async def write_fails(sql, *args):
        if sql.startswith("INSERT"):
            raise sqlite3.OperationalError("disk I/O error")
        return await fetch(sql, *args)

    await store.messages(thread.id)
    store._db.execute_fetchall = write_fails
    with pytest.raises(StoreUnavailable, match="disk I/O error"):
        await store.append(thread.id, [NewMessage("user", "lost")])
    store._db.execute_fetchall = fetch
    assert await store.messages(thread.id) == await fresh_view(path, thread.id)
    assert "lost" not in [m.content for m in await store.messages(thread.id)]


async def test_reads_and_writes_interleaved_keep_what_the_file_holds(tmp_path, stores):
    """Chat requests, summaries and the history view reading while turns are stored, in every
    order the event loop gives them: each read kept is what the file holds."""
    path = tmp_path / "t.db"
    store = stores()
    thread = await store.new_thread("file:///ws", "chat")

    async def after(pauses: int, work):
        for _ in range(pauses):
            await asyncio.sleep(0)
        return await work

    for step in range(60):
        await asyncio.gather(
            after(step % 5, store.append(thread.id, [NewMessage("user", f"q{step}"), NewMessage("assistant", "a")])),
            after(step % 3, store.messages(thread.id)), after(step % 7, store.messages(thread.id)))
        assert await store.messages(thread.id) == await fresh_view(path, thread.id), step


async def test_two_stores_opening_one_new_file_together_both_open(tmp_path):
    """Two servers started together on a new database (two editor windows): the schema is made
    once, and neither falls back to memory."""
    path = tmp_path / "threads.db"
    for _ in range(5):
        path.unlink(missing_ok=True)
        stores = [SQLiteThreadStore(path) for _ in range(4)]
        await asyncio.gather(*(s.open() for s in stores))
        threads = [await s.new_thread("/ws", "chat") for s in stores]
        assert {t.id for t in await stores[0].list_threads("/ws")} == {t.id for t in threads}
        for s in stores:
            await s.close()


async def test_appending_to_a_deleted_thread_writes_nothing(tmp_path):
    store = SQLiteThreadStore(tmp_path / "threads.db")
    thread = await store.new_thread("/ws", "chat")
    await store.append(thread.id, [NewMessage("user", "first", tokens={"t": 1})])
    await store.delete_thread(thread.id)
    with pytest.raises(KeyError):
        await store.append(thread.id, [NewMessage("user", "lost", tokens={"t": 1})])
    rows = await (await store._conn()).execute_fetchall("SELECT count(*) FROM messages")
    assert list(rows) == [(0,)]
    await store.close()


async def test_first_requests_at_once_share_one_canonical_thread(tmp_path):
    """Chat and edit-ops asked together in a new workspace, in one server and in two: each finds
    no thread, and one is made, not one each (a turn stored in the other would drop out of the
    thread the user sees)."""
    path = tmp_path / "threads.db"
    before = set(threading.enumerate())
    stores = [SQLiteThreadStore(path) for _ in range(2)]
    try:
        for round_ in range(5):
            workspace = f"file:///ws{round_}"
            found = await asyncio.gather(*(s.canonical_thread(workspace, "chat") for s in stores for _ in range(4)))
            assert len({t.id for t in found}) == 1
            assert len(await stores[0].list_threads(workspace)) == 1
        # The stores opened on first use, four uses at once: one connection each, no more.
        assert sum(t.name.endswith("(_connection_worker_thread)") for t in set(threading.enumerate()) - before) == 2
    finally:
        for s in stores:
            await s.close()


async def test_the_first_write_after_opening_follows_another_servers_commit(tmp_path):
    """Opening leaves no statement holding a read snapshot: a server's first turn, stored just
    after another server on the same file committed, is not refused (SQLITE_BUSY_SNAPSHOT)."""
    path = tmp_path / "t.db"
    first, second = SQLiteThreadStore(path), SQLiteThreadStore(path)
    thread = await first.new_thread("file:///ws", "chat")
    await second.open()
    await first.append(thread.id, [NewMessage("user", "from the first server")])
    await second.append(thread.id, [NewMessage("user", "from the second server")])
    assert [m.content for m in await first.messages(thread.id)] == ["from the first server", "from the second server"]
    await first.close()
    await second.close()
