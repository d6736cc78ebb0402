"""Edit-ops proposals against the fake backend: the success path and every safe failure."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from margin.core.editops import apply_edits, reply_json_schema
from margin.core.vfs import Position, Range
from margin.services.chat import ChatParams, ChatService
from margin.services.editops import EditOpsService
from margin.wiring import build_app
from tests.conftest import until
from tests.fakes.fake_openai import raw, reply, status, stream

WS = "file:///ws"
A = f"{WS}/a.py"
TEXT = "def f():\n    return 1\n\ndef g():\n    return 1 + 1\n"


def answer(ops, message="Done.") -> str:
    return json.dumps({"assistant_message": message, "ops": ops})


@pytest.fixture
async def editops(fake, tmp_path):
    app = build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
                     "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"})
    app.files.open(A, "python", 3, TEXT)
    service = EditOpsService(ChatService(app, workspace_folders=lambda: [WS]))
    yield service
    await app.aclose()


async def visible(service):
    store_run = service.chat.app.threads.run
    thread = await store_run(lambda s: s.canonical_thread(WS, "chat"))
    return await store_run(lambda s: s.messages(thread.id))


async def test_a_valid_answer_becomes_ops_edits_and_fingerprints(editops, fake):
    fake.script(reply(answer([{"op": "replace", "target_file": "a.py", "target": "match",
                               "match": "    return 1\n\n", "content": "    return 2\n\n"}], "Now f returns 2.")))
    outcome = await editops.propose(ChatParams("make f return 2", text_document=A))
    assert outcome.enabled and outcome.assistant_message == "Now f returns 2."
    assert [(o.op, o.target_file, o.target) for o in outcome.ops] == [("replace", A, "match")]
    assert apply_edits(outcome.bases[A].text, outcome.edits[A]).startswith("def f():\n    return 2\n")
    expected = "sha256:" + hashlib.sha256(TEXT.encode("utf-8")).hexdigest()  # over the exact bytes
    assert outcome.base_fingerprints == {A: expected}
    sent = fake.requests[0]
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "margin_edit_ops", "schema": reply_json_schema()}}
    assert json.dumps(reply_json_schema(), separators=(",", ":")) in sent["messages"][0]["content"]
    stored = await visible(editops)
    assert [m.role for m in stored if not m.hidden] == ["user", "assistant"]
    assert stored[-1].meta["ops"][0]["target_file"] == "a.py"
    assert editops.snapshots.get(expected).text == TEXT  # kept for a later rebase


async def test_selection_and_cursor_targets_use_the_request(editops, fake):
    fake.script(reply(answer([{"op": "replace", "target_file": "a.py", "target": "selection", "content": "return 7"}])))
    selection = Range(Position(1, 4), Position(1, 12))
    outcome = await editops.propose(ChatParams("seven", text_document=A, selection=selection))
    assert apply_edits(TEXT, outcome.edits[A]).startswith("def f():\n    return 7\n")


@pytest.mark.parametrize("step,message", [
    (reply("Sure! Here is the change: replace return 1"), "did not answer with valid JSON"),
    (reply(answer([{"op": "rewrite", "target_file": "a.py", "target": "document"}])), "does not follow the edit schema (ops.0.op"),
    (reply(answer([{"op": "replace", "target_file": "a.py", "target": "match", "match": "return 1", "content": "x"}])),
     "op 1 (replace match in a.py): the match text occurs 2 times"),
    (reply(answer([{"op": "delete", "target_file": "b.py", "target": "document"}])), "was not shown"),
    (reply('{"assistant_message": "x", "ops": [', finish_reason="length"), "cut off at maxOutputTokens (2048)"),
    (status(503, {"error": {"message": "loading model"}}), "HTTP 503"),
    (status(400, {"error": {"type": "exceed_context_size_error", "message": "too big",
                            "n_prompt_tokens": 9000, "n_ctx": 8192}}), "the prompt is 9000 tokens"),
])
async def test_every_failure_is_no_ops_a_message_and_an_unchanged_thread(editops, fake, step, message):
    fake.script(step)
    outcome = await editops.propose(ChatParams("change it", text_document=A))
    assert outcome.ops == [] and outcome.edits == {} and message in outcome.assistant_message
    assert await visible(editops) == []


async def test_over_budget_calls_no_model(editops, fake):
    outcome = await editops.propose(ChatParams("word " * 9000, text_document=A))
    assert outcome.ops == [] and "Too large to send" in outcome.assistant_message
    assert fake.requests == [] and await visible(editops) == []


async def test_disabled_profile_says_how_to_enable_it(fake, tmp_path):
    app = build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
                     "MARGIN_CHAT_OPS_ENABLED": "false"})
    outcome = await EditOpsService(ChatService(app)).propose(ChatParams("x"))
    assert outcome.enabled is False and "chatOps.enabled" in outcome.assistant_message
    assert fake.requests == []
    await app.aclose()


async def test_edit_ops_share_the_chat_busy_guard(editops, fake):
    fake.script(stream(["slow ", "reply"], chunk_delay_s=0.5))
    chatting = asyncio.create_task(editops.chat.chat(ChatParams("a chat", text_document=A)))
    await until(lambda: len(fake.requests) == 1)
    outcome = await editops.propose(ChatParams("an edit", text_document=A))
    assert outcome.ops == [] and "still answering" in outcome.assistant_message
    await chatting
