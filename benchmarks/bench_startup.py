"""Start-up (SPEC "Performance"): the `initialize` reply after process start, Margin against a
bare pygls server (the floor for any pygls server on the same machine).

Target: Margin's median time from process spawn to the `initialize` reply read on stdout within
1.2x the bare server's.

The bare server is a minimal pygls 2 `LanguageServer` with one feature (hover), written to a
temp file and run with the same interpreter. Margin is `python -m margin.lsp.main` with a clean
env: no MARGIN_ settings of the developer's, its backend at a closed loopback port, its database
in a temp folder, logs at the default level (to /dev/null); for both, compiled bytecode is
written and reused as an installed package's is (PYTHONDONTWRITEBYTECODE dropped, the cache in
a temp folder: PYTHONPYCACHEPREFIX), and one unmeasured start of each comes first. The two are started alternately, N
times each, so both see the same machine load. Each time, the `initialize` request is written
as soon as the process is spawned (as editors do) with the same params (UTF-8 offered, a
workspace folder, initializationOptions that Margin validates); the clock stops when the reply
has been read. Then `initialized`, and, for Margin, `margin/status` (the first real request:
its time from spawn is printed for information — it includes what loads after `initialize`),
then `shutdown` and `exit`, and the process is waited for. Also for information: the bare
server validating Margin's settings (pydantic, margin.core.settings) in its `initialize` handler,
the floor for a server that does so before it answers (Margin validates them right after).

    .venv/bin/python benchmarks/bench_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import finish, verdict

TARGET_RATIO = 1.2

BARE_SERVER = textwrap.dedent("""\
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("bare", "0")


    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls, params):
        return None


    server.start_io()
""")

SETTINGS_SERVER = BARE_SERVER.replace("@server.feature(types.TEXT_DOCUMENT_HOVER)", textwrap.dedent("""\
    @server.feature(types.INITIALIZE)
    def initialize(ls, params):
        import os
        from margin.core.settings import Source
        from margin.core.settings_state import SettingsState

        settings = SettingsState(os.environ)
        settings.update("init", Source("initializationOptions", params.initialization_options["margin"]))


    @server.feature(types.TEXT_DOCUMENT_HOVER)"""))
"""For information: the bare server validating Margin's settings (pydantic) before it answers
`initialize`, as Margin did until it read the one setting the reply depends on (`completionMenu`)
unvalidated and resolved the settings right after the reply (margin.core.settings_preread)."""


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def send(stream: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    stream.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    stream.flush()


def receive(stream: IO[bytes]) -> dict[str, Any]:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError("the server closed stdout")
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    if length is None:
        raise RuntimeError("a message without Content-Length")
    return json.loads(stream.read(length))


def reply_to(stream: IO[bytes], msg_id: int) -> dict[str, Any]:
    """The response to request `msg_id`, skipping notifications (and any requests) before it."""
    while True:
        message = receive(stream)
        if message.get("id") == msg_id and "method" not in message:
            if "error" in message:
                raise RuntimeError(f"request {msg_id} failed: {message['error']}")
            return message


def initialize_params(root: Path) -> dict[str, Any]:
    return {
        "processId": os.getpid(),
        "clientInfo": {"name": "bench_startup"},
        "rootUri": root.as_uri(),
        "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
        "capabilities": {
            "general": {"positionEncodings": ["utf-8", "utf-16"]},
            "textDocument": {"synchronization": {"dynamicRegistration": False},
                             "hover": {"contentFormat": ["markdown", "plaintext"]}},
            "window": {"workDoneProgress": True},
        },
        "initializationOptions": {"margin": {"defaults": {"temperature": 0.2},
                                             "profiles": {"chat": {"maxOutputTokens": 512}}}},
    }


def run_once(command: list[str], env: dict[str, str], root: Path, *, status: bool) -> tuple[float, float | None]:
    """Seconds from spawn to the `initialize` reply, and to the `margin/status` reply if asked."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=env, cwd=root)
    assert process.stdin is not None and process.stdout is not None
    try:
        send(process.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params(root)})
        result = reply_to(process.stdout, 1)["result"]
        initialized = time.perf_counter() - started
        assert "capabilities" in result, result
        send(process.stdin, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        first_request = None
        if status:
            send(process.stdin, {"jsonrpc": "2.0", "id": 2, "method": "margin/status", "params": {}})
            reply_to(process.stdout, 2)
            first_request = time.perf_counter() - started
        send(process.stdin, {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None})
        reply_to(process.stdout, 3)
        send(process.stdin, {"jsonrpc": "2.0", "method": "exit", "params": None})
        process.stdin.close()
        if process.wait(timeout=30) != 0:
            raise RuntimeError(f"{command} exited with {process.returncode}")
        return initialized, first_request
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="starts of each server (default 15)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="margin-startup-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "workspace"
        root.mkdir()
        (root / "main.py").write_text("print('hello')\n")
        bare_script = tmp / "bare_server.py"
        bare_script.write_text(BARE_SERVER)
        settings_script = tmp / "settings_server.py"
        settings_script.write_text(SETTINGS_SERVER)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MARGIN_") and k != "PYTHONDONTWRITEBYTECODE"}
        # Compiled bytecode kept (as an installed package has it), in a folder of its own.
        env.update(MARGIN_DEFAULTS_BASE_URL=f"http://127.0.0.1:{closed_port()}/v1",
                   MARGIN_DATABASE=str(tmp / "threads.db"), PYTHONPATH=str(REPO / "server"),
                   PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
        commands = {"bare pygls": [sys.executable, str(bare_script)],
                    "margin-lsp": [sys.executable, "-m", "margin.lsp.main"],
                    "bare+settings": [sys.executable, str(settings_script)]}

        # One start of each first, unmeasured: compiled bytecode and the OS file cache warm.
        for command in commands.values():
            run_once(command, env, root, status=False)
        times: dict[str, list[float]] = {name: [] for name in commands}
        status_times: list[float] = []
        for _ in range(args.rounds):
            for name, command in commands.items():
                initialized, first_request = run_once(command, env, root, status=name == "margin-lsp")
                times[name].append(initialized)
                if first_request is not None:
                    status_times.append(first_request)

    bare = statistics.median(times["bare pygls"])
    margin = statistics.median(times["margin-lsp"])
    ratio = margin / bare
    print(f"start-up, process spawn to the initialize reply, median of {args.rounds} starts each, alternating:")
    for name, values in times.items():
        print(f"  {name:<13} {statistics.median(values) * 1000:7.1f} ms"
              f"  (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})")
    print(f"  ratio margin-lsp / bare pygls {ratio:5.2f}x   target <= {TARGET_RATIO}x: {verdict(ratio, TARGET_RATIO, what='start-up against bare pygls')}")
    floor = statistics.median(times["bare+settings"]) / bare
    print(f"for information: bare+settings (the bare server validating Margin's settings with pydantic "
          f"before its reply) / bare pygls {floor:.2f}x")
    print(f"for information: spawn to the first answered request (margin/status), margin-lsp: "
          f"{statistics.median(status_times) * 1000:.1f} ms median")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
