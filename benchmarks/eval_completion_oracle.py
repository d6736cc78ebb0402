"""What Margin's inline completion post-processing does to right answers: every HumanEval
infilling problem answered by an oracle (the problem's own solution, as a perfect model would
write it), the answer cleaned as Margin cleans a model's answer at the editor's cursor
(core/completion/postprocess.py: an editor's suggestion, which stops at the end of the block
and at the end of the line when the cursor is mid-line), then the problem's tests run in the
sandbox. The share still passing is the ceiling Margin's path puts on pass@1 for any model; the
oracle called directly passes 100%.

    .venv/bin/python benchmarks/eval_completion_oracle.py              # every set, 7,012 problems (~3 min)
    .venv/bin/python benchmarks/eval_completion_oracle.py --limit 50   # 50 a set

The same oracle through the whole path (a real `margin eval completion` against a fake llama.cpp
on loopback, route, budget and all) is tests/e2e/test_eval_completion.py, on a sample.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from margin.core.completion.postprocess import CompletionContext, clean
from margin.evals import infilling, sandbox


async def kept(problem: infilling.Problem, room: asyncio.Semaphore) -> tuple[bool, str]:
    """Whether the oracle's answer, cleaned, still passes; and how it changed."""
    text, offset = problem.document()[0], problem.cursor
    suggestion = clean(problem.solution, CompletionContext(text[:offset], text[offset:], "python"))
    answer = suggestion.text if suggestion else ""
    replaces = suggestion.replaces if suggestion and not problem.whole_lines else 0
    how = "unchanged" if answer.rstrip("\n") == problem.solution.rstrip("\n") else \
        "no suggestion" if not answer else "cut" if problem.solution.startswith(answer.rstrip("\n")) else "changed"
    async with room:
        verdict = await sandbox.check(problem.program(answer, replaces))
    return verdict.passed, how


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="problems a set (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    room = asyncio.Semaphore(2)
    print("| set | problems | still passing | answer unchanged | cut | changed | no suggestion |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in infilling.SETS:
        problems = infilling.sample(infilling.load(name), args.limit, args.seed)
        results = await asyncio.gather(*(kept(problem, room) for problem in problems))
        passed = sum(ok for ok, _ in results)
        hows = Counter(how for _, how in results)
        print(f"| {name} | {len(problems)} | {passed} ({100 * passed / len(problems):.1f}%) | {hows['unchanged']} | "
              f"{hows['cut']} | {hows['changed']} | {hows['no suggestion']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
