"""Model-written code runs in margin.evals.sandbox: a program passes only when its checks ran to
the end; one that loops, sleeps, exits early or starts processes is stopped and fails; none of
Margin's environment (API keys) reaches it, and it runs in a folder of its own."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from margin.evals import sandbox

CHECKED = "def f(x):\n    return x + 1\n\n\ndef check(candidate):\n    assert candidate(1) == 2\n\n\n"


async def test_a_program_whose_checks_pass_passes_and_one_whose_checks_fail_fails():
    assert await sandbox.check(CHECKED + "check(f)\n") == sandbox.Verdict(True, "passed")
    failed = await sandbox.check(CHECKED.replace("x + 1", "x") + "check(f)\n")
    assert (failed.passed, failed.outcome, failed.detail) == (False, "failed", "AssertionError")


@pytest.mark.parametrize("ending", ["import sys\nsys.exit(0)\n", "exit(0)\n", "import os\nos._exit(0)\n",
                                    "raise SystemExit\n", "import sys\nsys.stdout.close()\n"])
async def test_a_completion_that_exits_before_the_checks_fails(ending):
    """The answer ends the program first, with status 0: a harness that judged by the exit status
    alone would count it passed."""
    verdict = await sandbox.check(CHECKED.replace("    return x + 1\n", "    return x\n") + ending + "check(f)\n")
    assert not verdict.passed and verdict.outcome in ("exited", "failed"), verdict


@pytest.mark.parametrize("body", ["while True:\n    pass\n", "import time\ntime.sleep(600)\n"])
async def test_a_looping_or_sleeping_completion_is_stopped_at_the_time_limit(body):
    started = time.monotonic()
    verdict = await sandbox.check(body, time_limit_s=2.0)
    assert (verdict.passed, verdict.outcome) == (False, "timed out")
    assert time.monotonic() - started < 60  # stopped, not waited for


async def test_the_processes_a_completion_starts_are_killed_with_it(tmp_path):
    marker = f"margin-sandbox-{os.getpid()}-{time.monotonic_ns()}"
    program = f"import subprocess, time\nsubprocess.Popen(['sleep', '600', '{marker}'])\ntime.sleep(600)\n"
    verdict = await sandbox.check(program, time_limit_s=2.0)
    assert verdict.outcome == "timed out"
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the completion's child is still running"
        await asyncio.sleep(0.1)


async def test_no_secret_reaches_the_program_and_it_runs_in_a_folder_of_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-model-code")
    monkeypatch.chdir(tmp_path)
    program = ("import os, sys\n"
               "assert 'OPENAI_API_KEY' not in os.environ, 'the key reached the program'\n"
               "assert set(os.environ) <= {'PATH', 'LC_CTYPE', 'PWD'}, sorted(os.environ)\n"
               f"assert os.getcwd() != {str(tmp_path)!r}\n"
               "open('left_behind.txt', 'w').write('x')\n"
               "assert sys.flags.isolated\n")
    verdict = await sandbox.check(program)
    assert verdict.passed, verdict
    assert not (tmp_path / "left_behind.txt").exists()


async def test_a_completion_that_takes_too_much_memory_fails():
    verdict = await sandbox.check("data = bytearray(4 << 30)\n")
    assert not verdict.passed and verdict.outcome in ("failed", "crashed"), verdict


async def test_a_completion_that_prints_without_end_is_stopped_by_the_file_size_limit():
    """Its output goes to files held to the limit (not into Margin's memory through a pipe)."""
    verdict = await sandbox.check("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", time_limit_s=60)
    assert not verdict.passed and verdict.outcome in ("crashed", "failed"), verdict
