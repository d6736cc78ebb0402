"""A junk rule that fires on a right answer is wrong (#52): on every HumanEval infilling problem
(7,012, shipped), the problem's own solution at its cursor is neither an echo of the chat route's
instructions, nor a definition misplaced, nor a copy of the file — so the completion oracle
(benchmarks/eval_completion_oracle.py) keeps what it kept before the rules."""

from __future__ import annotations

from margin.core.completion import formats, junk
from margin.evals import infilling


def test_no_junk_rule_fires_on_any_right_answer():
    instructions = formats.fixed_text("chat", file_id="problem.py", language="python")
    fired = []
    checked = 0
    for name in infilling.SETS:
        for problem in infilling.load(name):
            text, offset = problem.document()[0], problem.cursor
            prefix, suffix = text[:offset], text[offset:]
            typed = prefix.rsplit("\n", 1)[-1]
            lines = problem.solution.split("\n")
            if junk.echoes_instructions(problem.solution, instructions, problem.solution) \
                    or junk.misplaced(lines, typed) or junk.before_file_copy(lines, typed, prefix, suffix) != lines:
                fired.append(problem.task_id)
            checked += 1
    assert checked == 7012
    assert fired == []
