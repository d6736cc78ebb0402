"""The chat use case end to end below the LSP: a real SQLite file, real HTTP to the fake
backend, exact token counts."""

from __future__ import annotations

import asyncio
import json

import pytest

from margin.core.threads import FILE_CONTEXT
from margin.core.vfs import Position, Range, TextChange
from margin.services.chat import Busy, ChatError, ChatParams, ChatService
from margin.wiring import build_app
from tests.conftest import until
from tests.fakes.fake_openai import reply, status, stream

WS = "file:///ws"


@pytest.fixture
async def service(fake, tmp_path):
    app = build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
                     "MARGIN_CHAT_TOKENIZER": "tiktoken:o200k_base"})
    told: list[str] = []
    app.tell_user = told.append
    svc = ChatService(app, workspace_folders=lambda: [WS])
    svc.told = told
    yield svc
    await app.aclose()



async def stored(service, include_hidden=True):
    thread = await service.app.threads.run(lambda s: s.canonical_thread(WS, "chat"))
    return await service.app.threads.run(lambda s: s.messages(thread.id, include_hidden=include_hidden))


def envelopes(request_body) -> list[dict]:
    found = []
    for message in request_body["messages"]:
        for part in message["content"].split("\n\n"):
            if part.startswith('{"type": "virtual_file_context"'):
                found.append(json.loads(part))
    return found


async def test_streams_the_reply_and_stores_the_turn(service, fake):
    fake.script(reply("Hello there, friend.", chunk_size=5))
    deltas: list[str] = []
    outcome = await service.chat(ChatParams("hi"), on_delta=deltas.append)
    assert deltas == ["Hello", " ther", "e, fr", "iend."]
    assert outcome.reply == "Hello there, friend."
    assert outcome.budget["tokenizer"] == {"name": "tiktoken:o200k_base", "exact": True}
    assert outcome.budget["contextWindow"] == 8192
    messages = await stored(service)
    assert [(m.role, m.content) for m in messages] == [("user", "hi"), ("assistant", "Hello there, friend.")]
    assert all(m.tokens.get("tiktoken:o200k_base") for m in messages)  # counted once, stored


async def test_active_file_goes_as_hidden_context_and_is_not_resent_while_unchanged(service, fake):
    service.app.files.open(f"{WS}/a.py", "python", 1, "x = 1\n")
    await service.chat(ChatParams("what is x?", text_document=f"{WS}/a.py"))
    first_context = [m.id for m in await stored(service) if m.hidden]
    await service.chat(ChatParams("sure?", text_document=f"{WS}/a.py"))
    hidden = [m for m in await stored(service) if m.hidden]
    assert [m.id for m in hidden] == first_context  # the same stored context, not a new one
    assert len(hidden) == 1 and hidden[0].kind == FILE_CONTEXT and hidden[0].uri == f"{WS}/a.py"
    assert json.loads(hidden[0].content)["file_id"] == "a.py"
    # Both prompts carried the file exactly once; the second reused the stored context.
    assert [len(envelopes(body)) for body in fake.requests] == [1, 1]
    assert [m.content for m in await stored(service, include_hidden=False)] == [
        "what is x?", "ok", "sure?", "ok"]


async def test_edited_file_is_resent_and_the_stale_context_pruned(service, fake):
    uri = f"{WS}/a.py"
    service.app.files.open(uri, "python", 1, "x = 1\n")
    await service.chat(ChatParams("one", text_document=uri))
    service.app.files.change(uri, 2, [TextChange("2", Range(Position(0, 4), Position(0, 5)))])
    await service.chat(ChatParams("two", text_document=uri))
    sent = envelopes(fake.requests[1])
    assert [e["content"] for e in sent] == ["x = 2\n"]
    hidden = [m for m in await stored(service) if m.hidden]
    assert [m.fingerprint for m in hidden] == [service.app.files.get(uri).fingerprint]


async def test_selection_is_sent_with_the_message_and_history_shows_what_was_typed(service, fake):
    uri = f"{WS}/a.py"
    service.app.files.open(uri, "python", 1, "def f():\n    return 1\n")
    await service.chat(ChatParams("explain", text_document=uri, selection=Range(Position(1, 4), Position(1, 12))))
    user = fake.requests[0]["messages"][-1]["content"]
    assert user.endswith("explain\n\nSelected in a.py, lines 2-2:\n```python\nreturn 1\n```")
    first = (await stored(service, include_hidden=False))[0]
    assert first.meta["display"] == "explain"


@pytest.mark.parametrize("step", [status(500, {"error": {"message": "boom"}}), stream(["par", "tial"], cut_after=1)])
async def test_failure_leaves_the_thread_unchanged_and_the_next_request_works(service, fake, step):
    await service.chat(ChatParams("first"))
    before = await stored(service)
    fake.script(step)
    with pytest.raises(ChatError):
        await service.chat(ChatParams("this one fails"))
    assert await stored(service) == before
    await service.chat(ChatParams("again"))
    assert [m.content for m in await stored(service)][-2:] == ["again", "ok"]


async def test_upstream_context_too_large_is_reported_with_sizes(service, fake):
    fake.script(status(400, {"error": {"code": 400, "message": "too big", "type": "exceed_context_size_error",
                                       "n_prompt_tokens": 9000, "n_ctx": 8192}}))
    outcome = await service.chat(ChatParams("hello"))
    assert outcome.reply == "" and "the prompt is 9000 tokens" in outcome.upstream_error
    assert await stored(service) == []


async def test_over_budget_calls_no_model_and_changes_nothing(service, fake):
    outcome = await service.chat(ChatParams("word " * 10000))
    assert outcome.over_budget and "Too large to send" in outcome.over_budget
    assert "Shorten your message" in outcome.over_budget
    assert fake.requests == [] and await stored(service) == []


async def test_second_request_on_a_busy_thread_is_refused_at_once(service, fake):
    fake.script(stream(["slow ", "reply"], chunk_delay_s=0.5))
    first = asyncio.create_task(service.chat(ChatParams("one")))
    await until(lambda: len(fake.requests) == 1)
    with pytest.raises(Busy, match="still answering"):
        await service.chat(ChatParams("two"))
    assert (await first).reply == "slow reply"
    await service.chat(ChatParams("three"))  # free again


async def test_cancelled_request_leaves_the_thread_unchanged(service, fake):
    fake.script(stream(["a", "b", "c", "d"], chunk_delay_s=0.3))
    task = asyncio.create_task(service.chat(ChatParams("cancel me")))
    await until(lambda: len(fake.requests) == 1)
    await asyncio.sleep(0.4)  # mid-stream
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await stored(service) == []
    await service.chat(ChatParams("after"))  # the guard was released
    assert [m.content for m in await stored(service)] == ["after", "ok"]


async def test_corrupt_database_still_chats_and_says_so(fake, tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"not sqlite" * 500)
    app = build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(path),
                     "MARGIN_CHAT_TOKENIZER": "heuristic"})
    told: list[str] = []
    app.tell_user = told.append
    service = ChatService(app, workspace_folders=lambda: [WS])
    assert (await service.chat(ChatParams("hi"))).reply == "ok"
    assert len(told) == 1 and str(path) in told[0]
    await app.aclose()


async def test_prompts_dir_templates_take_precedence(fake, tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "chat_v1.md").write_text("[required]\nYou are a terse pirate.\n\n{{data_guard}}\n")
    app = build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
                     "MARGIN_CHAT_TOKENIZER": "heuristic", "MARGIN_PROMPTS_DIR": str(prompts)})
    await ChatService(app, workspace_folders=lambda: [WS]).chat(ChatParams("ahoy"))
    system = fake.requests[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are a terse pirate.")
    assert "virtual_file_context" in system["content"]  # the code-owned guard is rendered in
    await app.aclose()
