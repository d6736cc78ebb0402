"""The Exercism set `margin eval edits` ships, checked whole: every exercise's reference solution
must pass its tests in the sandbox, and every stub must fail them (but for the refactoring
exercises, ledger and markdown, whose stub is working code). Prints the exercises that break
either rule and the slowest test runs; exits 1 when any reference solution fails.

    .venv/bin/python benchmarks/eval_exercism_oracle.py     # 133 exercises, twice (~1 min)

CI checks a sample (tests/unit/evals/test_exercism.py); the eval's whole path with right answers
is tests/e2e/test_eval_edits.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from margin.evals import exercism, sandbox

REFACTORING = {"ledger", "markdown"}


async def main() -> int:
    exercises = exercism.load()
    room = asyncio.Semaphore(2)

    async def run(exercise: exercism.Exercise, files: dict[str, str]) -> tuple[str, sandbox.Verdict, float]:
        async with room:
            started = time.perf_counter()
            verdict = await exercise.check(files)
            return exercise.slug, verdict, time.perf_counter() - started

    right = await asyncio.gather(*(run(e, e.example) for e in exercises))
    stubs = await asyncio.gather(*(run(e, {}) for e in exercises))
    failing = [(slug, v.outcome, v.detail) for slug, v, _ in right if not v.passed]
    passing = [slug for slug, v, _ in stubs if v.passed and slug not in REFACTORING]
    print(f"{len(exercises)} exercises: reference solutions passing {len(exercises) - len(failing)}, "
          f"stubs failing {sum(not v.passed for _, v, _ in stubs)} (refactoring exercises pass as stubs: "
          f"{', '.join(sorted(REFACTORING))})")
    print("reference solutions failing:", failing or "none")
    print("stubs passing (besides refactoring):", passing or "none")
    print("slowest tests:", ", ".join(f"{slug} {seconds:.1f} s" for seconds, slug in
                                      sorted(((s, slug) for slug, _, s in right), reverse=True)[:5]))
    return 1 if failing or passing else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
