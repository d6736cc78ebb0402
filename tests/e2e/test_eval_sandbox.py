"""`margin eval edits` with a model whose answer is code written to escape (tests/escapes.py), as
finding 1 of the trust boundary was reproduced: the answer's import-time code tries to read the
API key from Margin's environment, send it to a collector on loopback, write outside its folder,
read a private file of the user's and leave a process running. Through the real CLI against the
fake backend on loopback, under bubblewrap (CI installs it) and under the launcher; `margin eval`
says which protection is in force before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from margin.adapters import sandbox
from tests.conftest import clean_env
from tests.e2e.test_eval_edits import EXERCISES
from tests.escapes import Trap, found
from tests.fakes.fake_openai import reply


def hostile(trap: Trap) -> str:
    """The exercise's right answer, with the escape run when the tests import it."""
    (text,) = EXERCISES["two-fer"].example.values()
    return trap.program(raises=True) + "\n" + text


@pytest.mark.parametrize("mode", ["bubblewrap", "launcher"])
def test_an_answer_written_to_escape_gets_nothing_its_sandbox_keeps(fake, trap, tmp_path, mode):
    (name, _), = EXERCISES["two-fer"].example.items()
    code = hostile(trap)
    fake.script(reply(json.dumps({"assistant_message": "Done.", "ops": [
        {"op": "replace", "target_file": name, "target": "document", "content": code}]})),
        reply(f"Here it is:\n\n```python\n{code}```\n"))
    results = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "margin.cli", "eval", "edits", "--endpoint", fake.base_url, "--exercise", "two-fer",
         "--tries", "1", "--results", str(results)], capture_output=True, text=True, timeout=600,
        env=clean_env(XDG_CONFIG_HOME="/nonexistent", MARGIN_SANDBOX=mode, OPENAI_API_KEY=trap.secret,
                      MARGIN_DEFAULTS_API_KEY_ENV="OPENAI_API_KEY"))
    chosen = sandbox.protection({"MARGIN_SANDBOX": mode})
    assert f"\n{chosen.describe()}\n" in done.stderr, done.stderr
    rows = json.loads(results.read_text())
    errors = [rows[0][side]["tries"][0]["error"] for side in ("margin", "direct")]
    assert all(error.startswith("failed: RuntimeError: ESCAPES") for error in errors), errors
    for error in errors:
        report = found(error)
        assert not report["environment"]
        if "environments" in chosen.kept:
            assert report["environments"] == [], report
        if "network" in chosen.kept:
            assert not report["network"]
        if "files" in chosen.kept:
            assert not report["wrote"] and not report["read"]
    assert trap.gone_within(10.0), "a process the answer started outlived it"
    if "network" in chosen.kept:
        assert trap.collector.received == []
    if "files" in chosen.kept:
        assert not trap.outside.exists()
    if mode == "bubblewrap":
        assert chosen.kept == frozenset(sandbox.KEPT)
    else:
        assert "NOT kept from model-written code: " in done.stderr


def test_a_sandbox_asked_for_that_is_not_known_stops_the_run_before_any_request(fake):
    done = subprocess.run([sys.executable, "-m", "margin.cli", "eval", "edits", "--endpoint", fake.base_url,
                           "--exercise", "two-fer"], capture_output=True, text=True, timeout=600,
                          env=clean_env(XDG_CONFIG_HOME="/nonexistent", MARGIN_SANDBOX="docker"))
    assert done.returncode != 0 and "MARGIN_SANDBOX is 'docker'" in done.stderr, done.stderr
    assert fake.requests == []
