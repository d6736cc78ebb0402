"""The Exercism exercises `margin eval edits` ships: all 133 of Aider's set, each judged by its own
tests in the sandbox — the reference solution passes, the stub fails (but for the two refactoring
exercises, whose stub already works)."""

from __future__ import annotations

import asyncio
import json

import pytest

from margin.evals import exercism, sandbox
from margin.evals.direct import fenced_blocks
from margin.evals.infilling import ProblemsError

EXERCISES = {e.slug: e for e in exercism.load()}
REFACTORING = {"ledger", "markdown"}
"""their stub is working code to be refactored: it passes as it is"""


def test_the_set_is_aiders_133_with_its_licence():
    assert len(EXERCISES) == 133
    folder = exercism.DATA.parent
    assert "MIT License" in (folder / "LICENSE").read_text() and "exercism/python" in (folder / "SOURCE.md").read_text()
    assert all(e.instructions.strip() and e.solution and e.test and set(e.example) == set(e.solution)
               for e in EXERCISES.values())
    assert not any(name.endswith("_test.py") for e in EXERCISES.values() for name in e.solution)


async def test_the_reference_solution_passes_and_the_stub_fails():
    """A sample of the exercises (the whole set: benchmarks/eval_exercism_oracle.py), with the
    two whose tests need files beside them (paasio's second test module, error-handling's helper)."""
    chosen = [*exercism.sample(list(EXERCISES.values()), 6, seed=3), EXERCISES["paasio"], EXERCISES["error-handling"]]
    right = await asyncio.gather(*(e.check(e.example) for e in chosen))
    stub = await asyncio.gather(*(e.check({}) for e in chosen))
    assert all(v.passed for v in right), [(e.slug, v) for e, v in zip(chosen, right) if not v.passed]
    assert not any(v.passed for e, v in zip(chosen, stub) if e.slug not in REFACTORING)
    assert all(v.outcome == "failed" for e, v in zip(chosen, stub) if e.slug not in REFACTORING), stub


async def test_a_failed_test_is_reported_by_name_for_the_retry():
    leap = EXERCISES["leap"]
    verdict = await leap.check({"leap.py": "def leap_year(year):\n    return year % 4 == 0\n"})
    assert not verdict.passed and verdict.outcome == "failed"
    assert "FAIL: test_year_divisible_by_100_not_divisible_by_400" in verdict.output
    assert verdict.detail == "AssertionError: 3 failed and 0 errors in 9 tests"
    assert 'checked.py' not in verdict.output  # the report alone, no traceback of the runner's
    other = await leap.check({"leap_test.py": "raise SystemExit(0)\n"})  # only the solution's files are taken
    assert not other.passed


async def test_a_file_beside_the_program_is_a_plain_name():
    with pytest.raises(ValueError, match="plain name"):
        await sandbox.check("pass\n", files={"../escape.py": ""})
    with pytest.raises(ValueError, match="plain name"):
        await sandbox.check("pass\n", files={"harness.py": ""})


def test_a_damaged_set_is_named(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"exercises": [{"slug": "x"}]}))
    with pytest.raises(ProblemsError, match="cannot read the exercises"):
        exercism.load(tmp_path / "bad.json")
    with pytest.raises(ProblemsError, match="cannot read"):
        exercism.load(tmp_path / "missing.json")


def test_only_closed_fenced_blocks_are_whole_files():
    assert fenced_blocks("a\n```python\nx = 1\n```\nb\n```\ny = 2\n```") == ["x = 1\n", "y = 2\n"]
    assert fenced_blocks("```python\nx = 1\n") == []  # cut off at the output limit
    assert fenced_blocks("say ```x``` inline") == []
