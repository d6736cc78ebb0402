"""margin.adapters.sandbox against code written to escape it (tests/escapes.py): run by a real
process holding a secret in its environment, as `margin eval` does, under each protection. Every
escape a protection says it keeps the program from fails, and what it does not keep it from is
said in its description; the same program run without the sandbox gets through every door, so
each of these checks can fail."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from margin.adapters import sandbox
from tests.conftest import clean_env
from tests.escapes import Trap, found

RUNNER = """\
import asyncio, json, sys, tempfile
from pathlib import Path
from margin.adapters import sandbox

async def main(direct):
    chosen = sandbox.protection()
    with tempfile.TemporaryDirectory() as folder:
        where = Path(folder)
        (where / "escape.py").write_text(sys.stdin.read())
        with open(where / "err", "wb") as err:
            if direct:
                process = await asyncio.create_subprocess_exec(sys.executable, str(where / "escape.py"), stdout=err,
                                                               stderr=err, cwd=where, start_new_session=True)
                returncode = await process.wait()
            else:
                returncode = (await sandbox.run(sandbox.python_argv(str(where / "escape.py")), where,
                                                time_limit_s=300, stdout=err, stderr=err)).returncode
        print(json.dumps({"returncode": returncode, "kept": sorted(chosen.kept), "describe": chosen.describe(),
                          "err": (where / "err").read_text()}))

asyncio.run(main(sys.argv[1] == "direct"))
"""


def escape(trap: Trap, mode: str, how: str = "sandboxed") -> dict:
    """The escape run by a Margin-like process whose environment holds the trap's secret."""
    done = subprocess.run([sys.executable, "-c", RUNNER, how], input=trap.program(), capture_output=True, text=True,
                          env=clean_env(MARGIN_SANDBOX=mode, OPENAI_API_KEY=trap.secret), timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_escapes_get_through_without_the_sandbox(trap):
    """What Margin's eval did before the sandbox: every door open (so the checks below can fail)."""
    ran = escape(trap, "auto", "direct")
    report = found(ran["err"])
    assert report["environments"] and report["network"] and report["wrote"] and report["read"], report
    assert trap.collector.received and trap.outside.exists() and trap.left_running()


@pytest.mark.parametrize("mode", ["bubblewrap", "launcher"])
def test_model_code_is_kept_from_what_its_protection_says(trap, mode):
    """bubblewrap keeps every door shut (CI installs it: MARGIN_SANDBOX=bubblewrap is an error
    where it cannot run, so this fails rather than skips); the launcher keeps what it says."""
    ran = escape(trap, mode)
    report, kept = found(ran["err"]), set(ran["kept"])
    assert ran["returncode"] == 0, ran["err"]
    assert ran["describe"].startswith(f"sandbox: {mode}: ")
    if mode == "bubblewrap":
        assert kept == set(sandbox.KEPT)
    assert {"environment", "processes"} <= kept
    assert not report["environment"]
    # The namespace's last processes are killed as it ends (SIGKILL from the kernel): on a loaded
    # machine they may take a moment to be gone, so the test waits for that, never for long.
    assert trap.gone_within(10.0), "a process the program started outlived it"
    for name in set(sandbox.KEPT) - kept:  # what it does not keep from the program is said
        assert sandbox._LACKING[name] in ran["describe"].split("NOT kept")[1]
    if "environments" in kept:
        assert report["environments"] == [], report
    if "network" in kept:
        assert not report["network"] and trap.collector.received == []
    if "files" in kept:
        assert not report["wrote"] and not report["read"] and not trap.outside.exists()


def test_a_protection_that_cannot_run_is_an_error_that_says_so():
    with pytest.raises(sandbox.SandboxError, match="MARGIN_SANDBOX is 'docker'"):
        sandbox.protection({"MARGIN_SANDBOX": "docker"})
