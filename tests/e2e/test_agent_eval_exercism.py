"""`margin eval agent --exercism` from the terminal against the loopback fake (#51): an exercise's
stub in a fresh folder, the agent's turn through Margin's real core with the policy door, the
exercise's own tests judging what the turn left; every row written as judged, and `--resume`
asks the model nothing for a row already written."""

from __future__ import annotations

import json
import re

from margin.evals import exercism
from tests.fakes.fake_openai import reply
from tests.unit.test_cli import margin


def action(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def test_an_exercise_done_by_the_agent_is_judged_by_its_tests_and_resume_asks_nothing_again(fake, tmp_path):
    exercise = exercism.sample(exercism.load(), 1, 1)[0]
    (name, stub), = exercise.solution.items()
    fake.script(reply(action("read", path=name)), reply(action("edit", path=name, old=stub, new=exercise.example[name])),
                reply(action("finish", answer="done")))
    results = tmp_path / "exercism.jsonl"
    env = {"MARGIN_DATABASE": str(tmp_path / "t.db"), "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}
    args = ("eval", "agent", "--exercism", "--limit", "1", "--endpoint", fake.base_url, "--results", str(results))
    done = margin(*args, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"1 exercises · {fake.base_url}" in done.stderr and "1 of 133 exercises" in done.stdout
    row = json.loads(results.read_text())
    assert row["task"] == exercise.slug and row["kind"] == "exercism", row
    assert row["agent"]["passed"] and row["agent"]["stopped"] == "finished" and row["agent"]["steps"] == 3, row
    assert row["oneshot"]["stopped"] == "not run"
    assert exercise.instructions.strip().splitlines()[0] in json.dumps(fake.requests[0]["messages"])
    asked = len(fake.requests)
    fake.script(reply(action("finish", answer="nothing")))
    again = margin(*args, "--resume", env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert len(fake.requests) == asked and "0 exercises" in again.stderr
    assert len(results.read_text().splitlines()) == 1 and re.search(r"agent mode +1/1 100%", again.stdout)
