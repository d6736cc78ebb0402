"""Thread summaries (core/summary.py, services/summaries.py): made by the chat model in the
background after a turn that needs one — never on the request path — stored in the thread with
the turns they cover, and shown in place of those turns from then on."""

from __future__ import annotations

import asyncio

from margin.core import summary as summary_rules
from margin.core.llm import NotSupported
from margin.core.summary import SUMMARY, latest_summary
from margin.core.where import Where
from margin.services.chat import Ask
from tests.fakes.fake_provider import WS, FakeProvider, Gate, answer, close, fake_services

A = f"{WS}/a.py"
SUMMARISING = "You keep the running summary"


def is_summary_request(request) -> bool:
    return request.messages[0].content.startswith(SUMMARISING)


def long_reply(n: int) -> str:
    return f"Reply {n}: " + " ".join(f"value_{n}_{i} comes from compute_{i}()." for i in range(40))


async def thread_messages(services):
    storage = services.app.storage
    thread = await storage.run(lambda s: s.canonical_thread(WS, "chat"))
    return await storage.run(lambda s: s.messages(thread.id))


async def chat_until_a_summary_is_asked_for(services, gate: Gate) -> int:
    """Chat turns until a summary reaches `gate`; the turns it took, each answered."""
    asked = 0
    while not gate.reached.is_set():
        asked += 1
        assert asked < 40, "no summary was ever asked for"
        outcome = await services.chat.chat(Ask(f"question {asked} about value_{asked}", Where(A)))
        assert outcome.reply.startswith(f"Reply {asked}:")  # each turn was answered …
        while services.app.background and not gate.reached.is_set():
            await asyncio.sleep(0.001)
    return asked


async def test_a_summary_is_made_in_the_background_and_replaces_the_turns_it_covers(tmp_path):
    provider = FakeProvider()
    gate = Gate()
    turn = {"n": 0}

    def respond(request):
        if is_summary_request(request):
            if not gate.cancelled.is_set():
                return [gate, answer("never stored")]
            return answer("Notes: the user renames value_1_0 in a.py; pending: tests.")
        turn["n"] += 1
        return answer(long_reply(turn["n"]))

    provider.default = respond
    services = fake_services(tmp_path, provider, MARGIN_DEFAULTS_CONTEXT_WINDOW="4096",
                             MARGIN_DEFAULTS_MAX_OUTPUT_TOKENS="256")
    try:
        services.app.files.open(A, "python", 1, "value = 1\n")
        asked = await chat_until_a_summary_is_asked_for(services, gate)
        # … and a summary is being written after the last one. The user goes on: the request
        # stops it (a local model's window goes to the user) and is answered, not held up.
        outcome = await services.chat.chat(Ask("one more while it writes", Where(A)))
        assert outcome.reply and gate.cancelled.is_set() and not gate.released.is_set()
        before = await thread_messages(services)
        assert latest_summary(before) is None  # plain truncation until one is ready
        while services.app.background:  # started again after that turn, and left alone
            await asyncio.sleep(0.001)
        after = await thread_messages(services)
        assert after[:len(before)] == before  # nothing stored was changed
        made = latest_summary(after)
        assert made is not None and made.text.startswith("Notes:") and made.first_turn == 1
        assert 1 <= made.to_turn <= asked + 1 - summary_rules.KEEP_TURNS
        request = [r for r in provider.requests if is_summary_request(r)][-1]
        assert request.max_tokens == summary_rules.summary_tokens(4096) == 512
        assert "(t1) User: question 1 about value_1" in request.messages[1].content
        assert "file shown: [t1 a.py]" in request.messages[1].content  # files by name, not content

        outcome = await services.chat.chat(Ask("and the latest?", Where(A)))
        prompt = provider.requests[-1].messages
        assert prompt[1].content.startswith(f"Summary of the conversation before turn {made.to_turn + 1}")
        text = "\n".join(m.content for m in prompt)
        assert "Notes: the user renames" in text
        assert "question 1 about value_1\n" not in text and "Reply 1:" not in text  # folded turns are gone
        assert outcome.budget.section("summary").kept == 1 and outcome.budget.section("summary").tokens > 0
        assert "and the latest?" in prompt[-1].content  # the latest request is never folded
        kinds = [m.kind for m in await thread_messages(services)]
        assert kinds.count(SUMMARY) == 1
    finally:
        gate.open()
        await close(services)


async def test_a_failed_summary_leaves_the_thread_as_it_was(tmp_path):
    from margin.core.llm import BackendTimeout

    provider = FakeProvider()

    def respond(request):
        if is_summary_request(request):
            return BackendTimeout("no answer", timeout_s=1)
        return answer(long_reply(len(provider.requests)))

    provider.default = respond
    services = fake_services(tmp_path, provider, MARGIN_DEFAULTS_CONTEXT_WINDOW="4096",
                             MARGIN_DEFAULTS_MAX_OUTPUT_TOKENS="256")
    try:
        for n in range(20):
            await services.chat.chat(Ask(f"question {n}", Where(A)))
            while services.app.background:
                await asyncio.sleep(0.01)
        assert any(is_summary_request(r) for r in provider.requests)
        messages = await thread_messages(services)
        assert latest_summary(messages) is None and len(messages) == 40  # the turns, nothing else
        outcome = await services.chat.chat(Ask("still fine?", Where(A)))
        assert outcome.reply and outcome.budget.section("summary").kept == 0  # pointers and truncation alone
    finally:
        await close(services)


async def test_a_keystrokes_completion_stops_a_summary_which_is_written_once_typing_pauses(tmp_path):
    from margin.core.vfs import Position
    from margin.services.completion import CompletionRequest, CompletionService

    provider = FakeProvider()
    gate = Gate()
    turn = {"n": 0}

    def respond(request):
        if is_summary_request(request):
            if not gate.cancelled.is_set():
                return [gate, answer("never stored")]
            return answer("Notes: value_1_0 is renamed in a.py.")
        if "FILL_HERE" in request.messages[-1].content:  # the completion's chat route
            return answer("```python\nvalue_2\n```")
        turn["n"] += 1
        return answer(long_reply(turn["n"]))

    provider.default = respond
    provider.fill_answers["infill"] = [NotSupported("Infill is not supported by this model", status=501)]
    services = fake_services(tmp_path, provider, MARGIN_DEFAULTS_CONTEXT_WINDOW="4096",
                             MARGIN_DEFAULTS_MAX_OUTPUT_TOKENS="256")
    completion = CompletionService(services.app)
    try:
        services.app.files.open(A, "python", 1, "value = \n")
        await chat_until_a_summary_is_asked_for(services, gate)
        # A summary is being written; the user types and a completion is asked for.
        outcome = await completion.complete(CompletionRequest(A, Position(0, 8)))
        assert outcome.suggestion is not None and outcome.suggestion.text == "value_2"
        assert gate.cancelled.is_set() and services.app.queue.stopped == 1  # it gave way at once
        while services.app.background:  # no more typing: written after the pause, unprompted
            await asyncio.sleep(0.001)
        made = latest_summary(await thread_messages(services))
        assert made is not None and made.text.startswith("Notes:")
    finally:
        gate.open()
        await close(services)
