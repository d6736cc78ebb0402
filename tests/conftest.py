"""Fixtures shared by every test: the fake backend, the real llama.cpp server, a clean env."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hypothesis import settings as hypothesis_settings

from tests import llama_processes, log_secrets, time_budget
from tests.fakes.fake_openai import FakeBackend

REPO = Path(__file__).resolve().parents[1]

# Property tests replay the same examples every run ("ci": derandomized, so a failure in CI is
# the same failure on a developer's machine, its blob printed to reproduce it). New cases are
# found on demand: `MARGIN_HYPOTHESIS=random bash scripts/test.sh tests/unit` draws fresh ones
# each run; keep each counter-example it finds as an @example of its test.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("random", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("MARGIN_HYPOTHESIS", "ci"))
NO_SETTINGS = REPO / "tests" / "fixtures" / "data" / "no-settings.json"
DATA_HOME = Path(tempfile.mkdtemp(prefix="margin-test-data-"))
"""the data folder (XDG_DATA_HOME) of every Margin the tests start: the default thread database and
the probe findings beside it are never the developer's own"""
atexit.register(shutil.rmtree, DATA_HOME, ignore_errors=True)
LLAMA_CONTEXT = 4096
LLAMA_THREADS = max(1, (os.cpu_count() or 2) - 1)
"""llama-server's threads in the tests: one core fewer than the machine has, so that Margin, pytest and
whatever else the machine runs keep a core. llama.cpp's own default (every core, its threads
spinning at each step's barrier until all arrive) is slightly faster on an idle machine and
collapses on a busy one: with a busy loop on the other of two cores, six chat requests that took
16 s took 599 s at the default and 27 s on one thread (docs/testing.md)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


TEST_TOOLS = frozenset({"MARGIN_TOOLS_DIR"})
"""MARGIN_ variables that are not Margin's settings but say where the test tools are (scripts/
install-model-server.sh): kept, so that a test's subprocess finds the model server CI installed"""


def clean_env(**overrides: str) -> dict[str, str]:
    """The test process's environment without any MARGIN_ settings of the developer's, so the
    server under test sees only what the test gives it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARGIN_") or k in TEST_TOOLS}
    env["MARGIN_LOG_LEVEL"] = overrides.pop("MARGIN_LOG_LEVEL", "INFO")
    # Every profile sends a (fake) API key, which the logs must never show (log_secrets).
    env[log_secrets.API_KEY_ENV] = log_secrets.API_KEY
    env["MARGIN_DEFAULTS_API_KEY_ENV"] = log_secrets.API_KEY_ENV
    # No settings file of the developer's either (~/.config/margin/settings.json): an empty one.
    env["MARGIN_SETTINGS"] = str(NO_SETTINGS)
    env["XDG_DATA_HOME"] = str(DATA_HOME)
    env.update(overrides)
    if "MARGIN_LOG_FILE" in env:
        log_secrets.watch_file(env["MARGIN_LOG_FILE"])
    return env


@pytest.fixture(autouse=True)
def logs_hold_no_secrets():
    """Fail a test whose Margin processes logged any of the text it sent them (tests/log_secrets.py)."""
    log_secrets.begin()
    yield
    found = log_secrets.end()
    if found:
        pytest.fail("Margin's log holds secret text:\n" + "\n".join(found), pytrace=False)


@pytest.fixture
def fake():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as backend:
        yield backend


@dataclass
class LlamaServer:
    base_url: str
    root: str
    log_path: Path
    pid: int


@contextlib.contextmanager
def running_llama_server(log_path: Path, extra_args: Sequence[str] = ()) -> Iterator[LlamaServer]:
    """The real llama.cpp server with Gemma 3 270M at a 4096-token context on LLAMA_THREADS threads,
    on a free loopback port, until the block ends; `extra_args` go to llama-server itself (e.g. a chat template).
    scripts/install-model-server.sh installs it (a no-op when already installed); without it,
    RuntimeError says what to run. The server is stopped when the block ends, however it ends,
    and dies with the process that started it (tests/llama_processes.py)."""
    check = subprocess.run(["bash", str(REPO / "scripts" / "install-model-server.sh"), "--check"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(check.stderr.strip() + " (scripts/test.sh does this before running the tests)")
    home = Path(check.stdout.strip().splitlines()[-1])
    port = free_port()
    with open(log_path, "wb") as log:
        process = llama_processes.start(
            [str(llama_processes.binary(home)), "--model", str(home / "gemma-3-270m-q4_k_m.gguf"),
             "--host", "127.0.0.1", "--port", str(port), "--ctx-size", str(LLAMA_CONTEXT),
             "--threads", str(LLAMA_THREADS), "--threads-batch", str(LLAMA_THREADS), *extra_args], log)
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not become healthy:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield LlamaServer(base_url=f"{root}/v1", root=root, log_path=log_path, pid=process.pid)
    finally:
        llama_processes.stop(process)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[LlamaServer]:
    """The real llama.cpp server (running_llama_server), shared by the session's tests."""
    try:
        with running_llama_server(tmp_path_factory.mktemp("llama") / "llama-server.log") as server:
            yield server
    except RuntimeError as error:
        if "install-model-server" in str(error):
            pytest.fail(str(error))
        raise


async def until(condition, timeout: float = 20.0) -> None:
    """Wait for `condition` to hold (a state, not a guess at how long things take)."""
    import asyncio

    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never met"
        await asyncio.sleep(0.02)


def pytest_configure(config):
    """This run's name, in the environment of every llama-server it starts (tests/llama_processes.py),
    and where its time goes, against its limit (tests/time_budget.py)."""
    os.environ[llama_processes.RUN] = f"{os.getpid()}-{secrets.token_hex(4)}"
    try:
        config.pluginmanager.register(time_budget.TimeBudget(time_budget.limit()), "margin-time-budget")
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(trylast=True)  # after pytest's own, which tears down what an interrupted run left set up
def pytest_sessionfinish(session, exitstatus):
    """A skipped test is a failing test here: no test in this suite is optional. Nor may a test
    leave a llama-server running: every fixture and test stops the ones it started (all torn
    down by now), so one still running fails the run, named with the test it started in, and is
    killed."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped and exitstatus == 0:
        reporter.write_line(f"{len(skipped)} test(s) skipped: this suite has no optional tests", red=True)
        session.exitstatus = 1
    run = os.environ.get(llama_processes.RUN)
    leftovers = llama_processes.leftover_llama_servers(run) if run else []
    if leftovers:
        llama_processes.kill(leftovers)
        for leftover in leftovers:
            message = (f"llama-server {leftover.pid} was left running by the tests (started in "
                       f"{leftover.started_in}; killed now): {leftover.command[:200]}")
            if reporter:
                reporter.ensure_newline()
                reporter.write_line(message, red=True)
            else:
                print(message, file=sys.stderr)
        session.exitstatus = 1


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    """The failed tests once more, a line each, after pytest's own summary: on CI pytest prints
    each failure's message whole, so a long one (a server log) can push the names out of the
    part of the output a CI page keeps."""
    yield
    failed = [r for key in ("failed", "error") for r in terminalreporter.stats.get(key, [])
              if getattr(r, "when", "call") in ("setup", "call", "teardown")]
    if not failed:
        return
    terminalreporter.write_sep("=", "failed, in short")
    for report in failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        first = (crash.message if crash else str(report.longrepr)).strip().splitlines()[:1]
        terminalreporter.write_line(f"{report.nodeid} ({report.when}): {first[0][:300] if first else ''}")


@pytest.fixture
def trap(tmp_path):
    """Code written to escape the sandbox, and what it would touch (tests/escapes.py): its
    collector closed and whatever the escape left running killed after the test."""
    from tests.escapes import Trap

    made = Trap(tmp_path / "user")
    yield made
    made.collector.close()
    made.kill_left()
