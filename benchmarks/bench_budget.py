"""Assembling the prompt of a 10,000-message thread: with the token counts stored beside the
messages (as Margin stores them), against recounting every message with the tokenizer.

Targets (SPEC, Performance): <= 15 ms median with cached counts, and >= 100x faster than
recounting."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tokens import source_corpus
from margin.core.budget import Item, Section, Window, plan
from margin.core.tokens.counter import CountCache, OpenAIFraming
from margin.core.tokens.local import tiktoken_counter
from timing import finish, verdict

MESSAGES = 10_000
WINDOW = 400_000  # gpt-5


def assemble(contents: list[str], counts: list[int]) -> dict:
    """History as whole exchanges (user + reply), plus a system prompt and the newest message."""
    per_message = OpenAIFraming.PER_MESSAGE + 1  # markers and the role's token
    exchanges = tuple(
        Item(f"turn {i // 2}", counts[i] + counts[i + 1] + 2 * per_message, i)
        for i in range(0, len(contents) - 1, 2)
    )
    sections = [
        Section("system", (Item("system", 400),), required=True, is_system=True),
        Section("history", exchanges, share=0.6, protect_last=2, drop_reason="older than the kept history"),
        Section("newest", (Item("newest", 120),), required=True),
    ]
    result = plan(sections, Window(WINDOW, 8192, "tiktoken:o200k_base", True, OpenAIFraming.REPLY_PRIMING))
    return result.report()


def main() -> int:
    counter = tiktoken_counter("o200k_base")
    chunks = source_corpus()
    contents = [chunks[i % len(chunks)] + f"\n# message {i}\n" for i in range(MESSAGES)]
    stored = [counter.count(text) for text in contents]  # counted once, when each was stored

    cached_times, recount_times = [], []
    for _ in range(7):
        started = time.perf_counter()
        cached_report = assemble(contents, stored)
        cached_times.append(time.perf_counter() - started)

        started = time.perf_counter()
        counter.cache = CountCache()  # recount: nothing remembered
        recount_report = assemble(contents, [counter.count(text) for text in contents])
        recount_times.append(time.perf_counter() - started)
        assert cached_report == recount_report

    cached, recount = statistics.median(cached_times), statistics.median(recount_times)
    kept = cached_report.sections[1].kept
    print(f"Assembling a {MESSAGES}-message thread ({MESSAGES // 2} exchanges, window {WINDOW}), median of 7")
    print(f"  cached counts      {cached * 1000:7.2f} ms   ({kept} exchanges kept, "
          f"{MESSAGES // 2 - kept} dropped)")
    print(f"  recounting         {recount * 1000:7.2f} ms")
    print(f"  target cached <= 15 ms: {cached * 1000:.2f} ms  {verdict(cached, 0.015, kind='time', what='assembly with stored counts')}")
    print(f"  target >= 100x faster than recounting: {recount / cached:.0f}x  {verdict(recount / cached, 100, at_least=True, what='faster than recounting')}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
