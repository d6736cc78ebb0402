"""Project instructions and pinned memories in a long session: in the system prompt of every
chat request, before and after the thread's history is folded into summaries (they are not
history, so no summary and no truncation can lose them)."""

from __future__ import annotations

import asyncio

from margin.core.summary import latest_summary
from margin.core.where import Where
from margin.services.chat import Ask
from tests.fakes.fake_provider import FakeProvider, answer, close, fake_services
from tests.unit.services.test_summaries import is_summary_request, long_reply

RULE = "Always name the file you change, and never use print for logging."


async def test_rules_and_memories_are_in_every_prompt_before_and_after_summaries(tmp_path):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "AGENTS.md").write_text(RULE + "\n")
    (root / "pkg" / "AGENTS.md").write_text("In pkg: tabs, not spaces.\n")
    folder = root.as_uri()
    active = f"{folder}/pkg/a.py"
    provider = FakeProvider()
    turn = {"n": 0}

    def respond(request):
        if is_summary_request(request):
            return answer(f"Notes up to turn {turn['n']}: the user renames value_1_0 in pkg/a.py.")
        turn["n"] += 1
        return answer(long_reply(turn["n"]))

    provider.default = respond
    services = fake_services(tmp_path, provider, folders=(folder,), MARGIN_DEFAULTS_CONTEXT_WINDOW="4096",
                             MARGIN_DEFAULTS_MAX_OUTPUT_TOKENS="256", MARGIN_RETRIEVAL="false")
    try:
        services.app.files.open(active, "python", 1, "value = 1\n")
        await services.memories.remember("The team's logger is structlog.", "workspace", active)
        shown_summary = 0
        for asked in range(1, 61):
            outcome = await services.chat.chat(Ask(f"question {asked} about value_{asked}", Where(active)))
            assert outcome.reply.startswith(f"Reply {asked}:")
            while services.app.background:  # a summary being written, as a person would wait
                await asyncio.sleep(0.001)
            request = [r for r in provider.requests if not is_summary_request(r)][-1]
            system = request.messages[0].content
            assert RULE in system and "In pkg: tabs, not spaces." in system, asked
            assert system.index(RULE) < system.index("In pkg:")  # the nearest rules last
            assert "- The team's logger is structlog." in system, asked
            assert outcome.budget.section("instructions").kept == 2
            shown_summary += outcome.budget.section("summary").kept
            if shown_summary >= 3:
                break
        assert shown_summary >= 3, "the session never showed a summary"
        thread = await services.app.storage.run(lambda s: s.canonical_thread(folder, "chat"))
        messages = await services.app.storage.run(lambda s: s.messages(thread.id))
        assert latest_summary(messages) is not None and RULE not in latest_summary(messages).text
    finally:
        await close(services)
