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

from tests.conftest import REPO, running_llama_server
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
