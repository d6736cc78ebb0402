"""The vendored HumanEval infilling sets load whole; a problem is laid out as an editor would
hold it; its canonical solution passes its tests in the sandbox and a wrong answer does not."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from margin.evals import infilling, sandbox


@pytest.mark.parametrize(("name", "count"), [("single", 1033), ("multi", 5815), ("span", 164)])
def test_each_set_loads_with_its_documented_size_and_a_seeded_sample_is_stable(name, count):
    problems = infilling.load(name)
    assert len(problems) == count and len({p.task_id for p in problems}) == count
    chosen = infilling.sample(problems, 20, seed=3)
    assert chosen == infilling.sample(problems, 20, seed=3) != infilling.sample(problems, 20, seed=4)
    assert [problems.index(p) for p in chosen] == sorted(problems.index(p) for p in chosen)  # the set's order
    assert infilling.sample(problems, None, 3) == problems == infilling.sample(problems, count + 5, 3)


def test_the_licence_and_the_source_travel_with_the_data():
    assert "MIT License" in (infilling.DATA / "LICENSE").read_text()
    assert "88062ff" in (infilling.DATA / "SOURCE.md").read_text()


@pytest.mark.parametrize("name", list(infilling.SETS))
def test_canonical_solutions_pass_and_a_wrong_answer_fails(name):
    problems = infilling.sample(infilling.load(name), 8, seed=11)

    async def run():
        right = await asyncio.gather(*(sandbox.check(p.program(p.solution)) for p in problems))
        wrong = await asyncio.gather(*(sandbox.check(p.program("    return None\n" if p.whole_lines else "(")) for p in problems))
        return right, wrong

    right, wrong = asyncio.run(run())
    assert all(v.passed for v in right), [(p.task_id, v) for p, v in zip(problems, right) if not v.passed]
    assert sum(v.passed for v in wrong) <= 1


def test_a_hole_of_whole_lines_is_an_empty_line_for_the_cursor_and_a_span_is_between():
    lines = infilling.Problem("t/0", "def f():\n", "    return 2\n", "    x = 1\n", "", "f")
    assert lines.whole_lines
    assert lines.document() == ("def f():\n\n    return 2\n", 1, 0)
    assert lines.document()[0][lines.cursor:] == "\n    return 2\n"
    assert lines.filled("    x = 1") == lines.filled("    x = 1\n") == "def f():\n    x = 1\n    return 2\n"
    span = infilling.Problem("t/1", "def f():\n    return g(", "1)\n", "x, ", "", "f")
    assert not span.whole_lines
    assert span.document() == ("def f():\n    return g(1)\n", 1, 13)
    assert span.document()[0][span.cursor:] == "1)\n"
    assert span.filled("x, ") == "def f():\n    return g(x, 1)\n"
    assert span.filled("x, 1)", replaces=2) == "def f():\n    return g(x, 1)\n"  # it rewrote the closing ")"
    assert span.program("x, ").endswith("\n\ncheck(f)\n")


def test_a_damaged_or_unknown_set_is_refused_by_name(tmp_path):
    with pytest.raises(infilling.ProblemsError, match="no set 'double': the sets are single, multi, span"):
        infilling.load("double")
    good = json.dumps({"task_id": "a", "prompt": "", "suffix": "", "canonical_solution": "", "test": "",
                       "entry_point": "f"})
    with gzip.open(tmp_path / infilling.SETS["single"], "wt") as out:
        out.write(good + "\n" + json.dumps({"task_id": "b"}) + "\n")
    with pytest.raises(infilling.ProblemsError, match=r"line 2 of .*SingleLineInfilling.*KeyError"):
        infilling.load("single", tmp_path)
    with pytest.raises(infilling.ProblemsError, match="cannot read .*MultiLine"):
        infilling.load("multi", tmp_path)
