"""The Exercism Python practice exercises of Aider's edit benchmark, shipped with Margin (MIT,
`data/exercism-python/SOURCE.md`): each an exercise's instructions, its stub (the file to edit),
its tests (never shown to the model) and the reference solution (which the tests pass).

An answer is judged by the exercise's own tests, run with the standard library's unittest in
the sandbox (margin.evals.sandbox), beside the answer's files.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from margin.evals import sandbox
from margin.evals.infilling import ProblemsError

DATA = Path(__file__).parent / "data" / "exercism-python" / "exercises.json.gz"
TIME_LIMIT_S = 60.0
"""an exercise's whole test file; the slowest reference solution (parallel-letter-frequency) took 28 s on a loaded machine"""

_RUNNER = """\
import os, sys, unittest
sys.path.insert(0, os.getcwd())
suite = unittest.defaultTestLoader.loadTestsFromNames(%r)
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1).run(suite)
if not result.testsRun or not result.wasSuccessful():
    sys.stderr.write(f"AssertionError: {len(result.failures)} failed and {len(result.errors)} errors "
                     f"in {result.testsRun} tests\\n")
    sys.stderr.flush()
    os._exit(1)
"""
"""the tests, by unittest; a failure ends the program with the report alone (no traceback of the
runner's own), its last line saying how many failed"""


@dataclass(frozen=True)
class Exercise:
    slug: str
    instructions: str
    solution: dict[str, str]
    """the files to edit, by name: the stubs"""
    test: dict[str, str] = field(repr=False)
    example: dict[str, str] = field(repr=False)
    """a reference solution, by the solution's file names"""
    extra: dict[str, str] = field(default_factory=dict, repr=False)
    """other files the tests need"""

    def program(self) -> str:
        """What the sandbox runs: every test module of the exercise, by unittest."""
        return _RUNNER % ([name.removesuffix(".py") for name in self.test],)

    async def check(self, files: Mapping[str, str], time_limit_s: float = TIME_LIMIT_S) -> sandbox.Verdict:
        """Run the exercise's tests against `files` (the solution's files as answered; a file not
        given stays the stub)."""
        answer = {**self.solution, **{name: text for name, text in files.items() if name in self.solution}}
        return await sandbox.check(self.program(), time_limit_s, {**self.extra, **self.test, **answer})


def load(data: Path = DATA) -> list[Exercise]:
    """Every exercise, by slug; ProblemsError when the file is missing or damaged."""
    try:
        found = json.loads(gzip.decompress(data.read_bytes()) if data.suffix == ".gz" else data.read_bytes())
        exercises = [Exercise(e["slug"], e["instructions"], dict(e["solution"]), dict(e["test"]), dict(e["example"]),
                              dict(e.get("extra") or {})) for e in found["exercises"]]
    except (OSError, EOFError, ValueError, KeyError, TypeError) as error:
        raise ProblemsError(f"cannot read the exercises in {data}: {type(error).__name__}: {error}") from None
    if not exercises:
        raise ProblemsError(f"no exercises in {data}")
    return sorted(exercises, key=lambda e: e.slug)


def sample(exercises: Sequence[Exercise], limit: int | None, seed: int) -> list[Exercise]:
    """`limit` exercises chosen by `seed` (all of them without a limit), in slug order."""
    if limit is None or limit >= len(exercises):
        return list(exercises)
    chosen = random.Random(seed).sample(range(len(exercises)), limit)
    return [exercises[i] for i in sorted(chosen)]
