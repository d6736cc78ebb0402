"""No test leaves a llama-server running (tests/llama_processes.py): the run's check at its end
finds the servers this run started and no other process, and `running_llama_server` stops its
server however its block ends — with a generation in flight whose client stays connected (which
keeps llama-server up after SIGTERM), or with the process that started it killed outright (as a
benchmark the tests run is at its timeout)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import LLAMA_THREADS, REPO, running_llama_server
from tests.llama_processes import NAME, RUN, leftover_llama_servers


def running(pid: int) -> bool:
    """Whether this run has a llama-server `pid` still running (a zombie waiting for its parent
    to collect it is not running)."""
    return pid in {leftover.pid for leftover in leftover_llama_servers(os.environ[RUN])}


def until_gone(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while running(pid):
        assert time.monotonic() < deadline, f"llama-server {pid} is still running"
        time.sleep(0.1)


def until_named(pid: int, timeout: float = 30.0) -> None:
    """Wait for process `pid` to run its program (Popen may return before the exec shows in /proc)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}/comm").read_text().strip() != NAME:
        assert time.monotonic() < deadline, f"process {pid} never ran {NAME}"
        time.sleep(0.01)


def test_the_check_finds_this_runs_llama_servers_and_no_other_process(tmp_path):
    stand_in = tmp_path / "llama-server"  # a process by that name: `sleep` under another name
    shutil.copy(shutil.which("sleep") or "/bin/sleep", stand_in)
    ours = subprocess.Popen([str(stand_in), "600"], env={**os.environ, "PYTEST_CURRENT_TEST": "tests/x.py::y (call)"})
    theirs = subprocess.Popen([str(stand_in), "600"], env={**os.environ, RUN: "another-run"})
    unnamed = subprocess.Popen([str(stand_in), "600"], env={k: v for k, v in os.environ.items() if k != RUN})
    try:
        for process in (ours, theirs, unnamed):
            until_named(process.pid)
        found = {leftover.pid: leftover for leftover in leftover_llama_servers(os.environ[RUN])}
        assert ours.pid in found and found[ours.pid].started_in == "tests/x.py::y (call)"
        assert theirs.pid not in found and unnamed.pid not in found
    finally:
        for process in (ours, theirs, unnamed):
            process.kill()
            process.wait()
    assert ours.pid not in {leftover.pid for leftover in leftover_llama_servers(os.environ[RUN])}


def test_the_end_of_a_ci_run_fails_while_a_llama_server_is_left_and_kills_it(tmp_path):
    """scripts/no-llama-server-left.sh, which .ci/run calls last: here limited to a stand-in of
    this test's own, so that the run's shared server is left alone."""
    check = [str(REPO / "scripts" / "no-llama-server-left.sh"), f"MARGIN_LEFT_BY={tmp_path.name}"]
    stand_in = tmp_path / "llama-server"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", stand_in)
    left = subprocess.Popen([str(stand_in), "600"], env={**os.environ, "MARGIN_LEFT_BY": tmp_path.name})
    try:
        until_named(left.pid)
        found = subprocess.run(check, capture_output=True, text=True, timeout=60)
        assert found.returncode == 1, found.stderr
        assert f"a llama-server outlived the run (killed now): pid {left.pid}: {stand_in} 600" in found.stderr
        assert left.wait(timeout=30) == -signal.SIGKILL
        clean = subprocess.run(check, capture_output=True, text=True, timeout=60)
        assert clean.returncode == 0 and clean.stderr == ""
    finally:
        left.kill()
        left.wait()
    assert "bash scripts/no-llama-server-left.sh || status=1" in (REPO / ".ci" / "run").read_text().splitlines()

@pytest.mark.llama
def test_a_server_generating_for_a_connected_client_is_stopped_when_its_block_ends(tmp_path):
    generating = threading.Event()
    done = threading.Event()

    def endless(base_url: str) -> None:
        body = {"messages": [{"role": "user", "content": "Repeat the word hello forever."}], "max_tokens": 3000,
                "stream": True}
        try:
            with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=600) as response:
                for _ in response.iter_lines():
                    generating.set()
        except httpx.HTTPError:
            pass  # the server went away mid-stream
        finally:
            done.set()

    with running_llama_server(tmp_path / "llama-server.log") as server:
        threading.Thread(target=endless, args=(server.base_url,), daemon=True).start()
        assert generating.wait(300), "the server never began to answer"
        pid = server.pid
        # It shares the machine: a core is left to Margin and the rest (conftest.LLAMA_THREADS).
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        for flag in ("--threads", "--threads-batch"):
            assert command[command.index(flag) + 1] == str(LLAMA_THREADS), command
        assert LLAMA_THREADS == max(1, (os.cpu_count() or 2) - 1)
    assert not running(pid)  # gone when the block ended, though its client was still reading
    assert done.wait(60)


@pytest.mark.llama
def test_a_server_dies_with_the_process_that_started_it(tmp_path):
    code = ("import sys, time; from pathlib import Path; from tests.conftest import running_llama_server\n"
            "with running_llama_server(Path(sys.argv[1])) as server:\n"
            "    print(server.pid, flush=True)\n"
            "    time.sleep(600)\n")
    starter = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "llama-server.log")], cwd=REPO,
                               stdout=subprocess.PIPE, text=True)
    try:
        pid = int(starter.stdout.readline())  # the server is up
        assert running(pid)
        os.kill(starter.pid, signal.SIGKILL)  # no `finally` runs: as subprocess.run kills at its timeout
        until_gone(pid)
    finally:
        starter.kill()
        starter.wait()
        starter.stdout.close()
