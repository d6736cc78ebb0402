"""A long session against the real llama.cpp server: eight files, edits by hand, short replies.
Every turn fits (no overflow, no refusal), Margin's count of every prompt is the server's
`prompt_tokens`, and the summaries that keep the conversation going are written in the
background after a turn has been answered — the session waits for them between turns, as a
person typing would, and no turn waits for one.

CI runs a sample: SAMPLE_TURNS turns with chat's window set to SAMPLE_WINDOW tokens (the server's
is 4096), so that the thread outgrows its window three times in few turns: the first summary,
then two summaries each folding the one before and the turns since, and prompts that show them —
every part of the whole session, at a size that takes a few minutes of CI's time. The whole
300-turn session at 4096 (docs/benchmarks.md's summary coverage is from it) runs with

    MARGIN_SESSION_TURNS=300 MARGIN_SESSION_WINDOW=4096 .venv/bin/python -m pytest -s tests/e2e/test_real_llama_session.py"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.summary import SUMMARY, thread_coverage
from margin.core.threads import Message
from margin.core.tokens.local import tiktoken_counter
from tests.conftest import LLAMA_CONTEXT
from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request

pytestmark = [pytest.mark.llama, pytest.mark.slow]

SAMPLE_WINDOW = 2048
SAMPLE_TURNS = 36
"""CI's sample: at a 2048-token window the three summaries were written between turns 17 and 32
(covering turns 1-5, 1-15 and 1-23: each folds the one before and the turns since; 172 s for 34
turns on one llama.cpp thread), with turns to spare for a machine whose model answers differently"""
WINDOW = int(os.environ.get("MARGIN_SESSION_WINDOW", SAMPLE_WINDOW))
TURNS = int(os.environ.get("MARGIN_SESSION_TURNS", SAMPLE_TURNS))
SUMMARIES = 3
"""the fewest summaries the session must write: the first, and two folding the one before"""
FILES = 8
NAMES = ["parser", "lexer", "cache", "router", "store", "render", "config", "jobs"]


def source(name: str, version: int) -> str:
    return (f"def {name}_step(value, limit={version}):\n"
            f"    \"\"\"One {name} step, version {version}.\"\"\"\n"
            f"    return [item for item in value if item < limit]\n")


@pytest.mark.timeout(5400)  # the whole session: ~15 minutes on a quiet machine; CI runs loaded
async def test_a_long_session_never_overflows_and_counts_exactly(llama_server, tmp_path):
    assert 256 <= WINDOW <= LLAMA_CONTEXT, f"MARGIN_SESSION_WINDOW={WINDOW}: at most the server's {LLAMA_CONTEXT}"
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_CHAT_MAX_OUTPUT_TOKENS": "8", "MARGIN_CHAT_TEMPERATURE": "0",
           "MARGIN_CHAT_CONTEXT_WINDOW": str(WINDOW)}
    uris = [f"file:///ws/pkg/{name}.py" for name in NAMES]
    versions = [1] * FILES
    turns_with_summary = 0
    summarising_after: list[int] = []
    """the turns after whose answer a summary was being written"""
    started = time.monotonic()
    async with margin_client(env=env, root=Path("/ws")) as client:
        for uri, name in zip(uris, NAMES):
            open_doc(client, uri, source(name, 1))
        for turn in range(TURNS):
            index = turn % FILES
            if turn % 3 == 2:  # an edit by hand: the file's older snapshot becomes a pointer
                versions[index] += 1
                change_doc(client, uris[index], versions[index], (None, source(NAMES[index], versions[index])))
            result = await request(client, "margin/chat", {
                "message": f"Turn {turn}: in three words, what does {NAMES[index]}_step keep?",
                "textDocument": {"uri": uris[index]}})
            assert "message" not in result, f"turn {turn}: {result.get('message')}"  # never over, never refused
            budget = result["budget"]
            assert budget["counted"] == result["usage"]["promptTokens"], f"turn {turn}"
            assert budget["counted"] <= budget["limit"] <= WINDOW - 8
            summary = next(s for s in budget["sections"] if s["name"] == "summary")
            turns_with_summary += bool(summary["kept"])
            background = (await request(client, "margin/status", {}))["background"]
            if background:  # a summary started after this turn was answered: the session pauses for it
                summarising_after.append(turn + 1)
                deadline = time.monotonic() + 900
                while (await request(client, "margin/status", {}))["background"]:
                    assert time.monotonic() < deadline, "a summary never finished"
                    await asyncio.sleep(0.5)
        history = await request(client, "margin/history", {})
    assert len(history["messages"]) == 2 * TURNS  # every turn stored; summaries are hidden
    stored = await stored_messages(tmp_path / "t.db", result["threadId"])
    summaries = [(int(m.meta["first_turn"]), int(m.meta["to_turn"])) for m in stored if m.kind == SUMMARY]
    assert len(summaries) >= SUMMARIES, (f"{len(summaries)} summaries written in {TURNS} turns (after turns "
                                         f"{summarising_after}): the session did not outgrow the window often enough")
    # Each summary folds the one before it and the turns since: from turn 1, further each time.
    assert all(first == 1 for first, _ in summaries), summaries
    assert [last for _, last in summaries] == sorted({last for _, last in summaries}), summaries
    assert turns_with_summary, "no prompt ever showed a summary"
    kept = thread_coverage(stored, tiktoken_counter("o200k_base").count)
    assert kept is not None and kept.total > 0
    print(f"\n{TURNS} turns at {WINDOW} in {time.monotonic() - started:.0f} s: every prompt counted as the server "
          f"counted it; {len(summaries)} summaries written after their turns were answered (after turns "
          f"{summarising_after}; covering turns {', '.join(f'{a}-{b}' for a, b in summaries)}); "
          f"{turns_with_summary} prompts showed one; the last covers {kept.share:.0%} of the {kept.total} identifiers "
          f"of the turns it folds ({kept.in_summary} named in it, the rest recallable)")


async def stored_messages(database: Path, thread_id: str) -> list[Message]:
    """The thread as stored, hidden summaries included, read from its SQLite file."""
    store = SQLiteThreadStore(database)
    await store.open()
    try:
        return list(await store.messages(thread_id))
    finally:
        await store.close()
