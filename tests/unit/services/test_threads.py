"""Thread storage falls back to memory when the database cannot be used, and says so once; the
thread use cases (which thread, history as a person sees it, new, list, delete) over it."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.settings import Source
from margin.core.settings_state import SettingsState
from margin.core.threads import FILE_CONTEXT, NewMessage
from margin.core.vfs import Position, Range
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.errors import NotFound, RequestError
from margin.services.thread_storage import DAY_S, ThreadStorage
from tests.fakes.fake_provider import BASE_URL, WS, FakeProvider, close, fake_app, fake_services


async def test_corrupt_database_falls_back_to_memory_with_one_message(tmp_path):
    path = tmp_path / "threads.db"
    path.write_bytes(b"garbage" * 1000)
    told: list[str] = []
    threads = ThreadStorage(SQLiteThreadStore, path, ttl_days=30, tell_user=told.append)
    thread = await threads.run(lambda s: s.canonical_thread("file:///ws", "chat"))
    await threads.run(lambda s: s.append(thread.id, [NewMessage("user", "still works")]))
    messages = await threads.run(lambda s: s.messages(thread.id))
    assert [m.content for m in messages] == ["still works"]
    assert not threads.persistent and len(told) == 1
    assert str(path) in told[0] and "threads and memories are kept only until Margin stops" in told[0]
    assert path.read_bytes() == b"garbage" * 1000  # the user's file is left alone
    await threads.close()


async def test_requests_that_come_together_at_start_up_share_one_store(tmp_path):
    """The first requests of a session may come at once (an editor asks for threads and status
    together): the database is opened once, and the session keeps it."""
    made: list[SQLiteThreadStore] = []

    def make(path):
        made.append(SQLiteThreadStore(path))
        return made[-1]

    told: list[str] = []
    threads = ThreadStorage(make, tmp_path / "threads.db", ttl_days=30, tell_user=told.append)
    await asyncio.gather(*(threads.run(lambda s: s.list_threads()) for _ in range(8)))
    assert len(made) == 1 and threads.persistent and told == []
    await threads.close()


async def test_stale_threads_are_removed_when_the_store_opens(tmp_path):
    path = tmp_path / "threads.db"
    seed = SQLiteThreadStore(path)
    old = await seed.new_thread("file:///ws", "chat")
    recent = await seed.new_thread("file:///ws", "chat")
    await seed.close()
    with sqlite3.connect(path) as db:  # last active 31 days ago
        db.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (time.time() - 31 * DAY_S, old.id))
    threads = ThreadStorage(SQLiteThreadStore, path, ttl_days=30)
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
        threads = ThreadStorage(SQLiteThreadStore, path, ttl_days=30, tell_user=told.append)
        thread = await threads.run(lambda s: s.canonical_thread("file:///ws", "chat"))
        await threads.run(lambda s: s.append(thread.id, [NewMessage("user", "kept in memory")]))
        assert [m.content for m in await threads.run(lambda s: s.messages(thread.id))] == ["kept in memory"]
        assert len(told) == 1 and "locked by another process" in told[0] and not threads.persistent
        await threads.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# --- the thread use cases ------------------------------------------------------------------

A = f"{WS}/a.py"


@pytest.fixture(autouse=True)
def open_file(services):
    services.app.files.open(A, "python", 1, "def f():\n    return 1\n")


async def test_history_shows_what_the_user_typed_and_never_hidden_messages(services, provider):
    selection = Range(Position(1, 4), Position(1, 12))
    provider.script(["It returns one."])
    await services.chat.chat(Ask("explain", Where(A, selection=selection)))
    await services.chat.chat(Ask("and then?", Where(A)))
    history = await services.threads.history(Where(A))
    assert [(m.role, m.content) for m in history.messages] == [
        ("user", "explain"), ("assistant", "It returns one."), ("user", "and then?"), ("assistant", "ok")]
    assert [m.id for m in history.messages] == sorted(m.id for m in history.messages)
    # What is stored holds more: the selected code in the message, and the file as a hidden context.
    stored = await services.app.storage.run(lambda s: s.messages(history.thread.id, include_hidden=True))
    assert [m.kind for m in stored if m.hidden] == [FILE_CONTEXT]
    first_user = next(m for m in stored if not m.hidden)
    assert first_user.content.startswith("explain\n\nSelected in a.py") and first_user.meta["display"] == "explain"
    assert len(stored) == len(history.messages) + 1
    assert history.thread == await services.threads.thread_for(Where(A))


async def test_history_of_a_named_thread_and_of_a_workspace_with_none_yet(services):
    empty = await services.threads.history()
    assert empty.messages == [] and empty.thread.workspace == WS
    other = await services.threads.new(Where(A), "Elsewhere")
    await services.chat.chat(Ask("hello", Where(thread_id=other.id)))
    named = await services.threads.history(Where(thread_id=other.id))
    assert named.thread.id == other.id and [m.content for m in named.messages] == ["hello", "ok"]


async def test_new_thread_becomes_canonical_and_list_and_delete_work(services, provider):
    first = await services.threads.thread_for(Where(A))
    await services.chat.chat(Ask("in the first thread", Where(A)))
    second = await services.threads.new(Where(A), "Second")
    assert (second.workspace, second.context, second.title) == (WS, "chat", "Second")
    assert second.id != first.id
    assert (await services.threads.thread_for(Where(A))).id == second.id  # canonical from now on
    await services.chat.chat(Ask("in the second thread", Where(A)))
    assert [m.content for m in (await services.threads.history(Where(A))).messages] == [
        "in the second thread", "ok"]

    listed = await services.threads.list_threads(WS)
    assert {t.id for t in listed.threads} == {first.id, second.id}
    assert listed.threads[0].id == second.id  # newest activity first
    assert listed.persistent and listed.problem is None
    assert (await services.threads.list_threads("file:///other")).threads == []
    assert {t.id for t in (await services.threads.list_threads()).threads} == {first.id, second.id}

    assert await services.threads.delete(second.id) is True
    assert await services.threads.delete(second.id) is False  # already gone
    assert [t.id for t in (await services.threads.list_threads(WS)).threads] == [first.id]
    assert (await services.threads.thread_for(Where(A))).id == first.id  # the older one again


async def test_a_thread_that_does_not_exist_is_not_found_by_name(services, provider):
    gone = await services.threads.new(Where(A))
    await services.threads.delete(gone.id)
    for where in (Where(thread_id=gone.id), Where(A, thread_id=gone.id)):
        with pytest.raises(NotFound, match=f"There is no thread {gone.id} "):
            await services.threads.history(where)
    with pytest.raises(NotFound, match=r"\(deleted, or expired after 30 days\)"):
        await services.threads.thread_for(Where(thread_id="no-such-thread"))
    with pytest.raises(NotFound, match="There is no thread no-such-thread") as failed:
        await services.chat.chat(Ask("hi", Where(A, thread_id="no-such-thread")))
    assert isinstance(failed.value, RequestError)
    assert provider.requests == []  # nothing was sent
    assert not any(t.id == "no-such-thread" for t in (await services.threads.list_threads()).threads)


async def test_the_list_says_when_threads_are_not_being_saved(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"not sqlite" * 500)
    services = fake_services(tmp_path, FakeProvider(), MARGIN_DATABASE=str(path))
    await services.chat.chat(Ask("hi", Where(A)))
    listed = await services.threads.list_threads(WS)
    assert len(listed.threads) == 1 and not listed.persistent
    assert listed.problem and str(path) in listed.problem
    await close(services)


async def test_a_database_left_by_a_settings_change_is_closed_at_shutdown(tmp_path):
    """The `database` setting changed mid-session: the store left behind (a request begun on it
    may still be writing) is closed with the app, so SQLite folds its write-ahead log back in."""
    app = fake_app(tmp_path, FakeProvider())
    app.settings = SettingsState({"MARGIN_DEFAULTS_BASE_URL": BASE_URL})  # the database comes from settings
    assert not app.settings.update("init", Source("initializationOptions", {"database": str(tmp_path / "threads.db")}))
    first = app.storage
    await first.run(lambda s: s.canonical_thread(WS, "chat"))
    assert (tmp_path / "threads.db-wal").exists()  # open, in WAL mode
    assert not app.settings.update("init", Source("initializationOptions", {"database": str(tmp_path / "b.db")}))
    second = app.storage
    await second.run(lambda s: s.canonical_thread(WS, "chat"))
    assert second is not first and second.path == tmp_path / "b.db"
    await close(app)
    assert not (tmp_path / "threads.db-wal").exists() and not (tmp_path / "b.db-wal").exists()
