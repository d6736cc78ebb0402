"""The agent's evaluation tasks (#51): every one well made (scripts/check_agent_tasks.py), and
the ceiling of Margin's own path — each task's known-good trajectory played through the real
agent core (prompts, budget, JSON actions, the ledger, confirmations, the sandbox) passes its
hidden tests. A task the oracle fails is a defect of Margin's path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from margin.evals import agent_tasks

REPO = Path(__file__).resolve().parents[2]
KINDS = {"read-another-file", "search-across-files", "two-files-agree", "run-tests-to-see", "diagnostics-after-edit",
         "nothing-to-change", "noisy-test-output"}


def test_every_task_is_well_made_and_every_kind_is_there():
    tasks = agent_tasks.load()
    assert len(tasks) >= 24 and KINDS <= {task.kind for task in tasks}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "check_agent_tasks.py")], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]


async def test_the_oracle_passes_every_task_through_the_real_agent_core(tmp_path):
    played = await agent_tasks.oracle(agent_tasks.load(), tmp_path)
    failed = [(p.task, p.stopped, p.statuses, p.tests[-500:]) for p in played if not p.passed]
    assert not failed, failed
    assert all(p.stopped == "finished" and p.refused == 0 for p in played)
    nothing = [p for p in played if p.kind == "nothing-to-change"]
    assert nothing and all(p.edits == 0 for p in nothing)
    # the tests were run, and their failure seen, where the task is about that
    assert all("failed" in p.statuses for p in played if p.kind in ("run-tests-to-see", "noisy-test-output",
                                                                    "diagnostics-after-edit"))


def test_margin_eval_agent_oracle_from_the_terminal():
    from tests.unit.test_cli import margin

    done = margin("eval", "agent", "--oracle", "--task", "06-pagination-is-right", "--task", "14-weather-unit-rename",
                  timeout=300)
    assert done.returncode == 0, done.stderr
    assert "06-pagination-is-right           pass  finished, 3 steps, 0 edits" in done.stdout
    assert "the oracle passed 2 of 2 tasks" in done.stdout
