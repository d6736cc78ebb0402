"""Next-edit suggestions (SPEC M, issue #28), Margin's own time: building the prompt, and keeping
the edit history while the user types.

Target: server time to build a next-edit prompt <= 10 ms at p50 on a 3,000-line file with 25
history entries (model time excluded). Measured in-process around `sweep_prompt` (the 21-line
windows before and now, the recent edits, two context files, every part counted with tiktoken
o200k by Margin's own counter — with its cache of counts, as in the server — and the budget plan;
the first build, with nothing counted yet, is printed too), and around `decide` (the model's
rewrite of the window made into the smallest edits, with the reversal check). Printed beside
them: one keystroke's cost to the history (`DocumentHistory.changed`) on the same file, median.

    .venv/bin/python benchmarks/bench_next_edit.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from margin.core import budget
from margin.core.next_edit.decide import decide
from margin.core.next_edit.history import DocumentHistory
from margin.core.next_edit.prompt import sweep_prompt
from margin.core.tokens.local import tiktoken_counter

LINES = 3000
ENTRIES = 25
RUNS = 200


def main() -> int:
    count = tiktoken_counter("o200k_base").count  # Margin's own, from the assets it ships (with its cache)

    text = "".join(f"def handler_{n}(request, value_{n}):\n    return process(request, value_{n} + {n})\n\n"
                   for n in range(LINES // 3))
    history = DocumentHistory(text, 1)
    keystrokes = []
    for entry in range(ENTRIES):  # 25 separate edits, far apart, after pauses, each typed a key at a time
        at = history.text.index(f"value_{entry * 40})")
        for i, char in enumerate("_new"):
            current = history.text
            started = time.perf_counter()
            history.changed(current[: at + 6 + len(str(entry * 40)) + i] + char
                            + current[at + 6 + len(str(entry * 40)) + i :], history.version + 1, entry * 10.0 + i * 0.1)
            keystrokes.append(time.perf_counter() - started)
    assert len(history.edits()) == ENTRIES, len(history.edits())
    line = history.text.count("\n", 0, history.text.index("value_960_new)"))
    limits = budget.Window(context_window=8192, reserved_output=512, tokenizer="tiktoken:o200k_base", exact=True)
    files = [("app/routes.py", "from app import handlers\n" * 60), ("app/models.py", "class Model:\n    pass\n" * 40)]
    builds, decisions = [], []
    prompt = None
    for _ in range(RUNS):
        started = time.perf_counter()
        prompt = sweep_prompt("app/handlers.py", history.text, line, history.edits(), history.original, files,
                              count, limits)
        builds.append(time.perf_counter() - started)
    assert prompt is not None and prompt.text is not None, prompt
    rewrite = prompt.current.text.replace("value_961)", "value_961_new)")
    last = history.edits()[-1]
    for _ in range(RUNS):
        started = time.perf_counter()
        decision = decide(history.text, prompt.current, rewrite, last)
        decisions.append(time.perf_counter() - started)
    assert decision.silence is None and len(decision.edits) == 1, decision
    tokens = count(prompt.text)
    p50 = statistics.median(builds) * 1000
    print(f"{LINES}-line file, {ENTRIES} history entries, prompt {tokens} tokens (tiktoken o200k), {RUNS} runs")
    print(f"  build the prompt      p50 {p50:6.2f} ms   p90 {statistics.quantiles(builds, n=10)[-1] * 1000:6.2f} ms"
          f"   (target <= 10 ms at p50: {'met' if p50 <= 10 else 'NOT met'})")
    print(f"  the first build       {builds[0] * 1000:6.2f} ms (nothing counted yet: every part counted afresh)")
    print(f"  decide on an answer   p50 {statistics.median(decisions) * 1000:6.2f} ms")
    print(f"  a keystroke's history p50 {statistics.median(keystrokes) * 1000:6.3f} ms")
    return 0 if p50 <= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
