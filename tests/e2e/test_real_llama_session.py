"""A 300-turn session against the real llama.cpp server at 4096 tokens: eight files, edits by
hand, short replies. Every turn fits (no overflow, no refusal), Margin's count of every prompt
is the server's `prompt_tokens`, and the summaries that keep the conversation going are written
in the background after a turn has been answered — the session waits for them between turns,
as a person typing would, and no turn waits for one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.summary import Coverage, thread_coverage
from margin.core.tokens.local import tiktoken_counter
from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request

pytestmark = [pytest.mark.llama, pytest.mark.slow]

TURNS = 300
FILES = 8
NAMES = ["parser", "lexer", "cache", "router", "store", "render", "config", "jobs"]


def source(name: str, version: int) -> str:
    return (f"def {name}_step(value, limit={version}):\n"
            f"    \"\"\"One {name} step, version {version}.\"\"\"\n"
            f"    return [item for item in value if item < limit]\n")


@pytest.mark.timeout(5400)  # ~15 minutes on a quiet machine; CI runs loaded
async def test_three_hundred_turns_at_4096_never_overflow_and_count_exactly(llama_server, tmp_path):
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_CHAT_MAX_OUTPUT_TOKENS": "8", "MARGIN_CHAT_TEMPERATURE": "0"}
    uris = [f"file:///ws/pkg/{name}.py" for name in NAMES]
    versions = [1] * FILES
    turns_with_summary = 0
    answered_while_summarising = 0
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
            assert budget["counted"] <= budget["limit"] <= 4096 - 8
            summary = next(s for s in budget["sections"] if s["name"] == "summary")
            turns_with_summary += bool(summary["kept"])
            background = (await request(client, "margin/status", {}))["background"]
            if background:  # a summary started after this turn was answered: the session pauses for it
                answered_while_summarising += 1
                deadline = time.monotonic() + 900
                while (await request(client, "margin/status", {}))["background"]:
                    assert time.monotonic() < deadline, "a summary never finished"
                    await asyncio.sleep(0.5)
        history = await request(client, "margin/history", {})
    assert len(history["messages"]) == 2 * TURNS  # every turn stored; summaries are hidden
    kept = await summary_coverage(tmp_path / "t.db", result["threadId"])
    assert answered_while_summarising >= 1, "no summary was ever written: the session never outgrew the window"
    assert turns_with_summary, "no prompt ever showed a summary"
    print(f"\n{TURNS} turns at 4096 in {time.monotonic() - started:.0f} s: every prompt counted as the server "
          f"counted it; {answered_while_summarising} summaries written after their turns were answered; "
          f"{turns_with_summary} prompts showed one; the last covers {kept.share:.0%} of the "
          f"{kept.total} identifiers of the turns it folds ({kept.in_summary} named in it, the rest recallable)")


async def summary_coverage(database: Path, thread_id: str) -> Coverage:
    """Summary coverage of the thread as stored, read from its SQLite file."""
    store = SQLiteThreadStore(database)
    await store.open()
    try:
        found = thread_coverage(await store.messages(thread_id), tiktoken_counter("o200k_base").count)
    finally:
        await store.close()
    assert found is not None and found.total > 0
    return found
