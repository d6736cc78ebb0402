"""Memories through the real margin-lsp process on a real SQLite file: remember, list, forget;
workspace and global scope across two workspace folders; kept across a restart; bad params
refused by name with nothing stored; an unusable database that still keeps them for the session."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from tests.conftest import until
from tests.e2e.lsp_client import margin_client, request

API, APP = Path("/work/api"), Path("/work/app")


def start(fake, tmp_path, folders=(API, APP), **extra):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
           "MARGIN_LOG_FILE": str(tmp_path / "margin.log"), **extra}
    return margin_client(env=env, folders=folders)


def doc(folder: Path, name: str = "main.py") -> dict[str, str]:
    return {"uri": (folder / name).as_uri()}


async def listed(client, folder: Path | None) -> list[tuple[str, str]]:
    params = {"textDocument": doc(folder)} if folder else {}
    return [(m["text"], m["scope"]) for m in (await request(client, "margin/memories", params))["memories"]]


async def test_remember_list_forget_round_trip(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        assert "margin/remember" in client.init_result.capabilities.experimental["margin"]["methods"]
        made = await request(client, "margin/remember", {"text": " we use pytest, never unittest ",
                                                         "textDocument": doc(API)})
        assert set(made) == {"id"} and made["id"].isdigit()
        found = await request(client, "margin/memories", {"textDocument": doc(API)})
        (memory,) = found["memories"]
        assert memory["id"] == made["id"] and memory["text"] == "we use pytest, never unittest"
        assert memory["scope"] == "workspace" and isinstance(memory["created"], float)
        assert found["persistent"] is True
        assert await request(client, "margin/forget", {"id": made["id"]}) == {"removed": True}
        assert await request(client, "margin/forget", {"id": made["id"]}) == {"removed": False}
        assert await listed(client, API) == []
    assert "never unittest" not in (tmp_path / "margin.log").read_text()  # the log holds ids, not text


async def test_workspace_memories_stay_in_their_folder_and_global_ones_go_everywhere(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        await request(client, "margin/remember", {"text": "the API base is /v2", "scope": "workspace",
                                                  "textDocument": doc(API, "routes/users.py")})
        await request(client, "margin/remember", {"text": "answer in English", "scope": "global",
                                                  "textDocument": doc(APP)})
        await request(client, "margin/remember", {"text": "the UI uses React", "textDocument": doc(APP, "ui/app.tsx")})
        assert await listed(client, API) == [("answer in English", "global"), ("the API base is /v2", "workspace")]
        assert await listed(client, APP) == [("the UI uses React", "workspace"), ("answer in English", "global")]


async def test_memories_are_kept_across_a_restart(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        first = await request(client, "margin/remember", {"text": "we use pytest", "textDocument": doc(API)})
        second = await request(client, "margin/remember", {"text": "be brief", "scope": "global"})
    async with start(fake, tmp_path) as client:
        found = (await request(client, "margin/memories", {"textDocument": doc(API)}))["memories"]
        assert [(m["id"], m["text"]) for m in found] == [(second["id"], "be brief"), (first["id"], "we use pytest")]
        assert await request(client, "margin/forget", {"id": first["id"]}) == {"removed": True}
    async with start(fake, tmp_path) as client:
        assert await listed(client, API) == [("be brief", "global")]


@pytest.mark.parametrize("params, named", [
    ({"text": ""}, "text: Value error, a memory needs some text"),
    ({"text": " \n\t "}, "text: Value error, a memory needs some text"),
    ({"text": "x" * 2001}, "text: Value error, a memory holds at most 2,000 characters; this one has 2,001"),
    ({"text": "fine", "scope": "team"}, "scope: Value error, a memory's scope is \"workspace\""),
    ({"text": 42}, "text: Input should be a valid string"),
    ({"scope": "global"}, "text: Field required"),
    ({"text": "fine", "pinned": True}, "pinned: unknown field"),
])
async def test_bad_remember_params_name_the_problem_and_store_nothing(fake, tmp_path, params, named):
    async with start(fake, tmp_path) as client:
        with pytest.raises(JsonRpcInvalidParams) as caught:
            await request(client, "margin/remember", params)
        assert caught.value.message.startswith("margin/remember: invalid params: ")
        assert named in caught.value.message
        assert await listed(client, API) == [] and await listed(client, None) == []


async def test_bad_forget_and_memories_params_are_named(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        with pytest.raises(JsonRpcInvalidParams, match="margin/forget: invalid params: id: Field required"):
            await request(client, "margin/forget", {})
        with pytest.raises(JsonRpcInvalidParams, match="id: String should have at least 1 character"):
            await request(client, "margin/forget", {"id": ""})
        with pytest.raises(JsonRpcInvalidParams, match="margin/memories: invalid params: textDocument.uri"):
            await request(client, "margin/memories", {"textDocument": {}})
        assert await request(client, "margin/forget", {"id": "12345"}) == {"removed": False}


async def test_no_workspace_folder_asks_for_a_global_memory(fake, tmp_path):
    async with start(fake, tmp_path, folders=()) as client:
        with pytest.raises(JsonRpcException) as caught:
            await request(client, "margin/remember", {"text": "we use pytest"})
        assert caught.value.code == -32803  # RequestFailed: the params were fine, there is no folder
        assert 'no workspace folder to remember this for' in caught.value.message
        assert 'scope "global"' in caught.value.message
        await request(client, "margin/remember", {"text": "we use pytest", "scope": "global"})
        assert await listed(client, None) == [("we use pytest", "global")]


async def test_an_unusable_database_keeps_memories_for_the_session_and_says_so(fake, tmp_path):
    (tmp_path / "threads.db").write_bytes(b"definitely not sqlite" * 100)
    async with start(fake, tmp_path) as client:
        made = await request(client, "margin/remember", {"text": "still works", "textDocument": doc(API)})
        found = await request(client, "margin/memories", {"textDocument": doc(API)})
        assert [m["id"] for m in found["memories"]] == [made["id"]] and found["persistent"] is False
        await until(lambda: any(m.type == types.MessageType.Warning for m in client.messages))
        (warning,) = [m.message for m in client.messages if m.type == types.MessageType.Warning]
        assert "not a valid SQLite database" in warning
        assert "threads and memories are kept only until Margin stops" in warning
        assert await request(client, "margin/forget", {"id": made["id"]}) == {"removed": True}
    assert (tmp_path / "threads.db").read_bytes() == b"definitely not sqlite" * 100
