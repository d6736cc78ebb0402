"""The memory use cases: remember for the document's workspace folder or for every workspace,
forget, list, and what a prompt shows; nothing stored when a memory is refused; kept in memory
when the database cannot be used."""

from __future__ import annotations

import logging

import pytest

from margin.services.errors import RequestError
from tests.fakes.fake_provider import FakeProvider, close, fake_services

WS, OTHER = "file:///ws", "file:///other"


async def test_remember_list_forget_across_two_workspace_folders(tmp_path):
    services = fake_services(tmp_path, FakeProvider(), folders=(WS, OTHER))
    memories = services.memories
    try:
        local = await memories.remember("we use pytest, never unittest", "workspace", f"{WS}/tests/test_a.py")
        shared = await memories.remember("the API base is /v2", "global", f"{OTHER}/b.py")
        theirs = await memories.remember("tabs", text_document=f"{OTHER}/b.py")
        assert (local.workspace, shared.workspace, theirs.workspace) == (WS, "", OTHER)
        assert [m.text for m in await memories.memories(f"{WS}/a.py")] == ["the API base is /v2",
                                                                         "we use pytest, never unittest"]
        assert [m.text for m in await memories.for_prompt(f"{WS}/a.py")] == ["we use pytest, never unittest",
                                                                           "the API base is /v2"]
        assert [m.id for m in await memories.memories(f"{OTHER}/b.py")] == [theirs.id, shared.id]
        assert await memories.forget(shared.id) is True and await memories.forget(shared.id) is False
        assert [m.id for m in await memories.memories(f"{OTHER}/b.py")] == [theirs.id]
        assert memories.persistent and memories.problem is None
    finally:
        await close(services)


async def test_a_refused_memory_says_why_and_stores_nothing(tmp_path):
    services = fake_services(tmp_path, FakeProvider())
    try:
        with pytest.raises(RequestError, match=r"^A memory needs some text"):
            await services.memories.remember("   ")
        with pytest.raises(RequestError, match=r"at most 2,000 characters; this one has 2,001"):
            await services.memories.remember("x" * 2001)
        with pytest.raises(RequestError, match=r"not 'team'"):
            await services.memories.remember("x", "team")
        assert await services.memories.memories() == []
    finally:
        await close(services)


async def test_a_workspace_memory_without_any_workspace_folder_asks_for_global(tmp_path):
    services = fake_services(tmp_path, FakeProvider(), folders=())
    try:
        with pytest.raises(RequestError, match=r"no workspace folder.*scope \"global\""):
            await services.memories.remember("x", "workspace", "file:///loose/file.py")
        everywhere = await services.memories.remember("x", "global", "file:///loose/file.py")
        assert await services.memories.memories("file:///loose/file.py") == [everywhere]
    finally:
        await close(services)


async def test_an_unusable_database_keeps_memories_in_memory_and_says_so(tmp_path):
    database = tmp_path / "threads.db"
    database.write_bytes(b"not a database" * 100)
    services = fake_services(tmp_path, FakeProvider(), MARGIN_DATABASE=str(database))
    told: list[str] = []
    services.app.tell_user = told.append
    try:
        memory = await services.memories.remember("still kept", "workspace", f"{WS}/a.py")
        assert await services.memories.memories(f"{WS}/a.py") == [memory]
        assert not services.memories.persistent and "not a valid SQLite database" in services.memories.problem
        assert len(told) == 1 and "memories are kept only until Margin stops" in told[0]
    finally:
        await close(services)


async def test_logs_hold_ids_and_counts_never_the_text(tmp_path, caplog):
    services = fake_services(tmp_path, FakeProvider())
    try:
        with caplog.at_level(logging.DEBUG, logger="margin"):
            memory = await services.memories.remember("the secret handshake is 4-2-7", "global")
            await services.memories.forget(memory.id)
            await services.memories.memories()
        margins = [r.getMessage() for r in caplog.records if r.name.startswith("margin")]
        assert f"memory remembered id={memory.id} scope=global chars=29" in margins
        assert not [line for line in margins if "secret handshake" in line]
    finally:
        await close(services)
