"""`margin eval agent`'s report, results file and verdict (#51); the runs themselves are in
tests/e2e/test_agent_eval_oracle.py (the oracle) and test_real_llama_agent.py (Gemma)."""

from __future__ import annotations

from margin.evals.agent_eval import Row, Side, agent_worse, append_result, read_results, report
from tests.unit.test_cli import margin


def rows() -> list[Row]:
    return [Row("01-a", "bug", Side(passed=True, well_formed=True, steps=4, prompt_tokens=1000, completion_tokens=90,
                                    asked=2, stopped="finished"),
                Side(passed=False, steps=1, prompt_tokens=700, stopped="not applied")),
            Row("02-b", "nothing-to-change", Side(passed=False, steps=6, prompt_tokens=2000, completion_tokens=100,
                                                  asked=1, refused=1, described=2, stopped="stuck"),
                Side(passed=True, well_formed=True, steps=1, prompt_tokens=800, stopped="answered"))]


def test_the_report_gives_each_side_and_the_paired_difference():
    said = report(rows(), "http://127.0.0.1:8080/v1", "gemma", 24)
    agent = next(line for line in said.splitlines() if line.strip().startswith("agent mode"))
    assert "1/2  50%" in agent and "3,000 / 190" in agent and "3 / 1" in agent and agent.split()[-3:] == ["2", "1", "0"]
    assert "2 of 24 tasks" in said and "only the agent passed 1, only one-shot 1" in said
    assert "bug 1/0 of 1; nothing-to-change 0/1 of 1" in said
    assert not agent_worse(rows()) and agent_worse([rows()[1]])


def test_results_are_appended_a_line_a_task_and_read_back(tmp_path):
    path = tmp_path / "r.jsonl"
    for row in rows():
        append_result(path, row)
    assert read_results(path) == rows()


def test_resume_needs_the_results_file_and_an_unknown_task_is_named():
    assert "--resume goes on with the run in --results FILE" in margin("eval", "agent", "--resume").stderr
    assert "no task 'nope'" in margin("eval", "agent", "--task", "nope").stderr
