"""Margin's own files are the user's alone (adapters.private_files): the thread database, its
journals and the retrieval index, through the real adapters, whatever the umask; files made
before by an earlier version are set so too."""

from __future__ import annotations

import os
import stat

import pytest

from margin.adapters.index_writer import IndexWriter
from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.threads import NewMessage


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    before = os.umask(0o022)
    yield
    os.umask(before)


async def test_the_thread_database_and_its_journals_are_the_users_alone(tmp_path, open_umask):
    data = tmp_path / "share" / "margin"
    store = SQLiteThreadStore(data / "threads.db", own_folder=True)
    thread = await store.new_thread("file:///ws", "chat")
    await store.append(thread.id, [NewMessage("user", "the user's words")])
    files = sorted(p.name for p in data.iterdir())
    assert "threads.db-wal" in files
    assert {p.name: mode(p) for p in data.iterdir()} == {name: 0o600 for name in files}
    assert mode(data) == 0o700
    await store.close()


async def test_files_an_earlier_version_made_readable_are_made_private(tmp_path, open_umask):
    data = tmp_path / "margin"
    earlier = SQLiteThreadStore(data / "threads.db", own_folder=True)
    await earlier.new_thread("file:///ws", "chat")
    data.chmod(0o755)
    for path in data.iterdir():  # as an earlier version left them
        path.chmod(0o644)
    store = SQLiteThreadStore(data / "threads.db", own_folder=True)
    assert len(await store.list_threads()) == 1
    assert mode(data) == 0o700 and {mode(p) for p in data.iterdir()} == {0o600}
    await store.close()
    await earlier.close()


async def test_a_folder_the_user_chose_is_left_as_it_is(tmp_path, open_umask):
    chosen = tmp_path / "projects"
    chosen.mkdir(mode=0o755)
    store = SQLiteThreadStore(chosen / "threads.db")
    await store.new_thread("file:///ws", "chat")
    assert mode(chosen) == 0o755 and mode(chosen / "threads.db") == 0o600
    await store.close()


def test_the_retrieval_index_is_the_users_alone(tmp_path, open_umask):
    index = tmp_path / "margin" / "index"
    index.mkdir(parents=True, mode=0o755)
    writer = IndexWriter(index / "abc.db")
    with writer.transaction() as db:
        db.execute("SELECT 1")
    assert mode(index) == 0o700
    assert {p.name: mode(p) for p in index.iterdir()} == {p.name: 0o600 for p in index.iterdir()}
