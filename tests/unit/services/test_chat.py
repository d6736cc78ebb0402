"""The chat use case end to end below the LSP: a real SQLite file, exact token counts, and the
in-process fake provider (one test streams over real HTTP to the loopback fake backend, for a
stream the connection cuts)."""

from __future__ import annotations

import asyncio

import pytest

from margin.adapters.http_errors import error_from_body
from margin.core.file_block import FileBlock, parse_file_blocks
from margin.core.llm import BackendTimeout, MalformedStream
from margin.core.threads import FILE_CONTEXT
from margin.core.vfs import Position, Range, TextChange
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.errors import Busy, RequestError
from margin.services.registry import Services
from margin.wiring import build_app
from tests.fakes.fake_openai import stream
from tests.fakes.fake_provider import BASE_URL, WS, FakeProvider, Gate, close, fake_services

A = f"{WS}/a.py"





async def stored(services, include_hidden=True):
    storage = services.app.storage
    thread = await storage.run(lambda s: s.canonical_thread(WS, "chat"))
    return await storage.run(lambda s: s.messages(thread.id, include_hidden=include_hidden))


def file_blocks(request) -> list[FileBlock]:
    return [block for message in request.messages for block in parse_file_blocks(message.content)]


async def test_streams_the_reply_and_stores_the_turn(services, provider):
    provider.script(["Hello", " ther", "e, fr", "iend."])
    deltas: list[str] = []
    outcome = await services.chat.chat(Ask("hi"), on_delta=deltas.append)
    assert deltas == ["Hello", " ther", "e, fr", "iend."]
    assert outcome.reply == "Hello there, friend."
    assert (outcome.budget.tokenizer, outcome.budget.exact) == ("tiktoken:o200k_base", True)
    assert outcome.budget.context_window == 8192
    (request,) = provider.requests
    assert request.max_tokens == outcome.budget.reserved_output == 1024  # chat's maxOutputTokens
    assert request.response_format is None and request.messages[-1].content == "hi"
    assert request.messages[0].role == "system"
    messages = await stored(services)
    assert [(m.role, m.content) for m in messages] == [("user", "hi"), ("assistant", "Hello there, friend.")]
    assert all(m.tokens.get("tiktoken:o200k_base") for m in messages)  # counted once, stored


async def test_a_surrogate_pair_split_across_pieces_or_left_alone_is_stored_as_text(services, provider):
    provider.script(["Smile \ud83d", "\ude00 and a lone \ud83d."])  # as JSON escapes decode, piece by piece
    outcome = await services.chat.chat(Ask("hi"))
    assert outcome.reply == "Smile \U0001f600 and a lone \ufffd."
    messages = await stored(services)
    assert messages[-1].content == outcome.reply


async def test_a_thread_deleted_while_answering_fails_clearly_and_stores_nothing(services, provider):
    gate = Gate()
    provider.script(["Half ", gate, "done."])
    pending = asyncio.ensure_future(services.chat.chat(Ask("hi")))
    await gate.reached.wait()
    thread = await services.threads.thread_for(Where())
    assert await services.threads.delete(thread.id)
    gate.open()
    with pytest.raises(RequestError, match="deleted while Margin was answering"):
        await pending
    after = await services.chat.chat(Ask("again"))  # the next request works, in a new thread
    assert after.reply and after.thread_id != thread.id


async def test_active_file_goes_as_hidden_context_and_is_not_resent_while_unchanged(services, provider):
    services.app.files.open(A, "python", 1, "x = 1\n")
    await services.chat.chat(Ask("what is x?", Where(A)))
    first_context = [m.id for m in await stored(services) if m.hidden]
    await services.chat.chat(Ask("sure?", Where(A)))
    hidden = [m for m in await stored(services) if m.hidden]
    assert [m.id for m in hidden] == first_context  # the same stored context, not a new one
    assert len(hidden) == 1 and hidden[0].kind == FILE_CONTEXT and hidden[0].uri == A
    (block,) = parse_file_blocks(hidden[0].content)
    assert block.file_id == "a.py" and block.text == "x = 1\n" and hidden[0].meta["file_id"] == "a.py"
    assert hidden[0].fingerprint == services.app.files.get(A).fingerprint  # the whole one, in metadata
    # Both prompts carried the file exactly once; the second reused the stored context.
    assert [len(file_blocks(request)) for request in provider.requests] == [1, 1]
    assert [m.content for m in await stored(services, include_hidden=False)] == [
        "what is x?", "ok", "sure?", "ok"]


async def test_edited_file_is_resent_and_the_stale_context_kept_but_not_shown(services, provider):
    services.app.files.open(A, "python", 1, "x = 1\n")
    await services.chat.chat(Ask("one", Where(A)))
    first = services.app.files.get(A).fingerprint
    services.app.files.change(A, 2, [TextChange("2", Range(Position(0, 4), Position(0, 5)))])
    await services.chat.chat(Ask("two", Where(A)))
    sent = file_blocks(provider.requests[1])
    assert [b.text for b in sent] == ["x = 2\n"]  # the stale text is never sent again …
    hidden = [m for m in await stored(services) if m.hidden]
    assert [m.fingerprint for m in hidden] == [first, services.app.files.get(A).fingerprint]  # … but kept


RENAMED = ("def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n",
           "def plus(a, b):\n    return a + b\n\n\nprint(plus(1, 2))\n")


async def test_a_pointer_is_not_shown_where_its_legend_and_tool_cost_more_than_it_saves(tmp_path):
    """A two-turn chat over a five-line file renamed between the turns, at a 4096 window, with the
    recall tool on offer: a pointer to the old snapshot (5 tokens) would bring the legend and the
    tool's definition (~180), so the prompt has neither — and no more tokens than with pointers
    turned off."""
    totals = {}
    for masking in (True, False):
        provider = FakeProvider()
        services = fake_services(tmp_path / str(masking), provider, MARGIN_DEFAULTS_CONTEXT_WINDOW="4096")
        services.chat.masking = masking
        try:
            services.app.files.open(A, "python", 1, RENAMED[0])
            await services.chat.chat(Ask("what does add do?", Where(A)))
            services.app.files.change(A, 2, [TextChange(RENAMED[1], Range(Position(0, 0), Position(5, 0)))])
            outcome = await services.chat.chat(Ask("and now?", Where(A)))
            totals[masking] = outcome.budget.counted
            if masking:
                assert outcome.budget.section("pointers").tokens == 0 and outcome.budget.section("pointers").kept == 0
                assert provider.requests[1].tools in (None, (), [])  # no recall tool without a pointer
                assert "stands for content of an earlier turn" not in provider.requests[1].messages[0].content
        finally:
            await close(services)
    assert totals[True] <= totals[False]


async def test_selection_is_sent_with_the_message_and_history_shows_what_was_typed(services, provider):
    services.app.files.open(A, "python", 1, "def f():\n    return 1\n")
    await services.chat.chat(Ask("explain", Where(A, selection=Range(Position(1, 4), Position(1, 12)))))
    user = provider.requests[0].messages[-1].content
    assert user.endswith("explain\n\nSelected in a.py, lines 2-2:\n```python\nreturn 1\n```")
    first = (await stored(services, include_hidden=False))[0]
    assert first.meta["display"] == "explain"


@pytest.mark.parametrize("step", [
    error_from_body(500, {"error": {"message": "boom"}}, BASE_URL),
    ["par", MalformedStream(f"The backend at {BASE_URL} cut the connection in the middle of the reply.")],
    ["par", BackendTimeout(f"The backend at {BASE_URL} stopped sending for 120 s (timeoutS).", timeout_s=120)],
], ids=["http-500", "stream-cut-after-text", "stalled-after-text"])
async def test_failure_leaves_the_thread_unchanged_and_the_next_request_works(services, provider, step):
    await services.chat.chat(Ask("first"))
    before = await stored(services)
    provider.script(step)
    deltas: list[str] = []
    with pytest.raises(RequestError) as failed:
        await services.chat.chat(Ask("this one fails"), on_delta=deltas.append)
    assert str(failed.value) == str(step if isinstance(step, Exception) else step[-1])
    assert deltas == ([] if isinstance(step, Exception) else ["par"])
    assert await stored(services) == before
    await services.chat.chat(Ask("again"))
    assert [m.content for m in await stored(services)][-2:] == ["again", "ok"]


async def test_a_stream_cut_by_the_connection_leaves_the_thread_unchanged(fake, tmp_path):
    """Real HTTP: the loopback backend drops the connection mid-body, through the adapter."""
    app = build_app({"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
                     "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"})
    app.workspace.folders = lambda: [WS]
    services = Services.over(app)
    try:
        await services.chat.chat(Ask("first"))
        before = await stored(services)
        fake.script(stream(["par", "tial"], cut_after=1))
        with pytest.raises(RequestError, match="cut the connection in the middle of the reply"):
            await services.chat.chat(Ask("this one fails"))
        assert await stored(services) == before
        await services.chat.chat(Ask("again"))
        assert [m.content for m in await stored(services)][-2:] == ["again", "ok"]
    finally:
        await app.aclose()


async def test_upstream_context_too_large_is_reported_with_sizes(services, provider):
    provider.script(error_from_body(400, {"error": {"code": 400, "message": "too big",
                                                    "type": "exceed_context_size_error",
                                                    "n_prompt_tokens": 9000, "n_ctx": 8192}}, BASE_URL))
    outcome = await services.chat.chat(Ask("hello"))
    assert outcome.reply == "" and "the prompt is 9000 tokens" in outcome.upstream_error
    assert outcome.not_sent == outcome.upstream_error and outcome.over_budget is None
    assert outcome.budget.counted > 0  # what was sent is still reported
    assert len(provider.requests) == 1 and await stored(services) == []


async def test_over_budget_calls_no_model_and_changes_nothing(services, provider):
    outcome = await services.chat.chat(Ask("word " * 10000))
    assert outcome.over_budget and "Too large to send" in outcome.over_budget
    assert "Shorten your message" in outcome.over_budget
    assert provider.requests == [] and await stored(services) == []


async def test_second_request_on_a_busy_thread_is_refused_at_once(services, provider):
    gate = Gate()
    provider.script(["slow ", gate, "reply"])
    first = asyncio.create_task(services.chat.chat(Ask("one")))
    await gate.reached.wait()  # the first reply is mid-stream
    with pytest.raises(Busy, match="still answering"):
        await services.chat.chat(Ask("two"))
    assert len(provider.requests) == 1  # refused before anything was sent
    gate.open()
    assert (await first).reply == "slow reply"
    await services.chat.chat(Ask("three"))  # free again
    assert [m.content for m in await stored(services)] == ["one", "slow reply", "three", "ok"]


async def test_cancelled_request_leaves_the_thread_unchanged(services, provider):
    gate = Gate()
    provider.script(["a", "b", gate, "c", "d"])
    deltas: list[str] = []
    task = asyncio.create_task(services.chat.chat(Ask("cancel me"), on_delta=deltas.append))
    await gate.reached.wait()
    assert deltas == ["a", "b"]  # mid-stream
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await stored(services) == []
    await services.chat.chat(Ask("after"))  # the guard was released
    assert [m.content for m in await stored(services)] == ["after", "ok"]


async def test_corrupt_database_still_chats_and_says_so(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"not sqlite" * 500)
    services = fake_services(tmp_path, FakeProvider(), MARGIN_DATABASE=str(path), MARGIN_CHAT_TOKENIZER="heuristic")
    told: list[str] = []
    services.app.tell_user = told.append
    assert (await services.chat.chat(Ask("hi"))).reply == "ok"
    assert len(told) == 1 and str(path) in told[0]
    await close(services)


async def test_prompts_dir_templates_take_precedence(tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "chat_v1.md").write_text("[required]\nYou are a terse pirate.\n\n{{data_guard}}\n")
    provider = FakeProvider()
    services = fake_services(tmp_path, provider, MARGIN_CHAT_TOKENIZER="heuristic", MARGIN_PROMPTS_DIR=str(prompts))
    await services.chat.chat(Ask("ahoy"))
    system = provider.requests[0].messages[0]
    assert system.role == "system" and system.content.startswith("You are a terse pirate.")
    assert "followed by the file's content in a fenced block" in system.content  # the code-owned guard
    await close(services)
