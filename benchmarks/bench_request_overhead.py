"""Request overhead (SPEC "Performance"): Margin's own time on a chat and an edit-ops request,
through the real margin-lsp process, against the same model request sent straight to the model
server.

Target: the server's overhead, median, <= 10 ms for `margin/chat` and for `margin/editOps`, with
a 30 KB file open, a 200-turn thread, instructions, memories and retrieval on, and the loopback
fake backend answering at once.

The fake (tests/fakes/fake_openai.py) runs in a process of its own, as a backend does, with a
32,768-token window; it answers a chat request with a fixed paragraph (streamed, as Margin asks)
and an edit-ops request with one replace op on the open file. Margin is `python -m
margin.lsp.main` over stdio, driven by a plain JSON-RPC client (tests/e2e/raw_lsp.py), with its
log at its default level (INFO), its database in a temp folder and the tokenizer tiktoken o200k
(counted in-process, as the LSP tests count with the fake). The workspace folder on disk holds
the 30 KB file (the start of the standard library's argparse, open in the editor too), an
AGENTS.md, and 20 more modules of the standard library for retrieval to index; 5 memories are
pinned (workspace and global). The thread is built with N turns through the server against the
fake (every fourth an edit-ops turn), and the index is waited for.

Then, alternately, round by round: a `margin/chat` request on the open file (a new message each
round, naming code from the workspace), timed from the request written on the server's stdin to
its answer read on stdout; the body Margin sent the fake, taken from the fake byte for byte and
posted again straight to it with httpx (the client Margin uses, its connection kept open), timed
to the last byte of the answer; then the same for `margin/editOps`. Each LSP request adds a turn,
so the thread grows past N as the rounds go. The overhead is Margin's median less the direct
median (the LSP round trip over stdio is Margin's: it is what the editor waits for). Printed: the
median and p90 of each, the overhead against the target; for information, margin-lsp's CPU time
per request, every thread (Linux's /proc/PID/task/*/schedstat: on a loaded machine wall times
grow with the wait for a core, CPU time much less); and, held exactly (load cannot change them),
that each LSP request sent exactly one model request, that the replayed body was the one Margin
sent, and that the prompt held the file, instructions, memories, snippets and the summary.

`--profile FILE` runs the server under cProfile, enabled for the timed rounds only (the pstats
file is written at the end; `python -m pstats FILE`); `--py-spy FILE` samples it with py-spy
(when installed) over the timed rounds, every thread, to a speedscope file.

`--against TREE` compares this tree's server with another checkout's (`git worktree add TREE
REV`), side by side in one run: both servers run at once, each with its own workspace,
database and thread built the same way, and the rounds alternate request by request (which one
goes first alternating too), so that the machine's drift — its speed moves by a third within
an hour here — falls on both alike. Printed: each tree's median time and CPU per request, and
the median of the paired differences.

    .venv/bin/python benchmarks/bench_request_overhead.py [--turns N] [--rounds N] [--profile FILE] [--py-spy FILE]
    .venv/bin/python benchmarks/bench_request_overhead.py --against ../other-checkout [--turns N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx
from tests.e2e.raw_lsp import RawClient, raw_client
from tests.fakes.fake_openai import FakeBackend, reply

from bench_completion import FakeProcess
from timing import finish, verdict

TARGET_MS = 10.0
WINDOW = 32768
FILE_BYTES = 30_000
CHAT_REPLY = ("The parser keeps its actions in a list and its option strings in a dict. When an argument is "
              "added, the action class is looked up in the registry, built with the keyword arguments, and "
              "checked for conflicts against the option strings already taken; its help text is formatted later, "
              "by the help formatter, only when usage or help is printed.")
INSTRUCTIONS = ("Answer briefly. Use type hints in every code sample. Never use print for logging: use the "
                "logging module. Tests use pytest.\n")
MEMORIES = (("we support Python 3.9 and later", "workspace"), ("the CLI entry point is main.py", "workspace"),
            ("answer in English", "global"), ("prefer pathlib over os.path", "global"),
            ("errors shown to users say what to do next", "workspace"))
LIBRARY = ("textwrap", "shlex", "fnmatch", "glob", "csv", "json.decoder", "json.encoder", "json.scanner",
           "configparser", "gettext", "locale", "calendar", "string", "difflib", "heapq", "bisect",
           "dataclasses", "enum", "functools", "contextlib")
"""Modules of the standard library copied into the workspace for retrieval to index."""
QUESTIONS = ("How does shlex split a quoted word?", "Where is the help text of an option formatted?",
             "How does fnmatch translate a pattern into a regular expression?",
             "What does the JSON encoder do with floats that are not finite?",
             "How are the sections of a config file parsed?", "How does textwrap fill a paragraph?",
             "Which class formats the usage line?", "How does difflib find the longest matching block?",
             "How do dataclasses build the __init__ method?", "What does functools.lru_cache keep?")
"""The messages, in turn (a round number added, so each is new)."""
PARTS = ("file", "instructions", "memories", "snippets", "summary")
"""What the prompt must hold: the open file (retained or sent anew), and the sections named."""


def big_file() -> str:
    """The first 30 KB of the standard library's argparse, cut at a line's end."""
    text = inspect.getsource(argparse)
    return text[:text.rindex("\n", 0, FILE_BYTES) + 1]


def ops_reply(text: str) -> str:
    """The edit-ops answer: one replace op on a line that occurs once in the file."""
    line = next(line for line in text.splitlines(keepends=True)
                if len(line) > 40 and text.count(line) == 1 and line.strip().startswith("return"))
    return json.dumps({"assistant_message": "Done: the return value is now named.",
                       "ops": [{"op": "replace", "target_file": "big.py", "target": "match", "match": line,
                                "content": line.replace("return ", "return  ", 1)}]})


# --- the fake, in a process of its own -------------------------------------------------------------

def serve_fake() -> None:
    """`--serve-fake`: the fake in this process. Prints its base URL, then answers each line on
    stdin: "count" with how many chat requests it has had, "last" with the last one's body as it
    arrived (one line: compact JSON), "same" with whether the last two bodies were byte for byte
    the same."""
    bodies: list[bytes] = []
    fake = FakeBackend(props={"default_generation_settings": {"n_ctx": WINDOW}},
                       models=[{"id": "fake-model", "owned_by": "llamacpp"}])
    chat, ops = reply(CHAT_REPLY), reply(ops_reply(big_file()))
    fake._next_step = lambda body, headers: ops if "response_format" in body else chat  # type: ignore[method-assign]
    handler = fake._server.RequestHandlerClass

    class Recording(handler):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.split("?", 1)[0] == "/v1/chat/completions":
                bodies.append(raw)
            stream, self.rfile = self.rfile, io.BytesIO(raw)
            try:
                super().do_POST()
            finally:
                self.rfile = stream

    fake._server.RequestHandlerClass = Recording
    with fake:
        print(fake.base_url, flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "count":
                print(len(bodies), flush=True)
            elif command == "last":
                print(bodies[-1].decode(), flush=True)
            elif command == "same":
                print(len(bodies) >= 2 and bodies[-1] == bodies[-2], flush=True)
            else:
                break


# --- the server, profiled --------------------------------------------------------------------------

def profiled_server(out: str) -> None:
    """`--profiled-server FILE`: margin-lsp with cProfile enabled on SIGUSR1, and disabled and
    written to FILE on SIGUSR2."""
    import cProfile

    profile = cProfile.Profile()
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())

    def dump(*_: Any) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR2, dump)
    from margin.lsp.main import main

    sys.exit(main([]))


@contextlib.contextmanager
def sampled(pid: int, out: str | None) -> Any:
    """py-spy sampling process `pid`, every thread, while the block runs (nothing without `out`)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if out is None or not Path(spy).exists():
        if out is not None:
            print("py-spy is not installed (pip install py-spy): not sampled", file=sys.stderr)
        yield
        return
    process = subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "200", "--gil", "--threads", "--format",
                                "speedscope", "--output", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        _, error = process.communicate(timeout=60)
        if process.returncode:
            print(f"py-spy: {error.decode(errors='replace')[-500:]}", file=sys.stderr)


# --- the workspace and the session -----------------------------------------------------------------

def workspace(tmp: Path) -> Path:
    root = tmp / "ws"
    (root / "lib").mkdir(parents=True)
    (root / "big.py").write_text(big_file())
    (root / "AGENTS.md").write_text(INSTRUCTIONS)
    (root / "main.py").write_text("from big import ArgumentParser\n\nArgumentParser().parse_args()\n")
    for name in LIBRARY:
        module = __import__(name, fromlist=["_"])
        (root / "lib" / f"{name.replace('.', '_')}.py").write_text(inspect.getsource(module))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def params(root: Path, turn: int) -> dict[str, Any]:
    return {"message": f"{QUESTIONS[turn % len(QUESTIONS)]} ({turn})", "textDocument": {"uri": (root / "big.py").as_uri()}}


async def background_done(client: RawClient, kind: str = "") -> None:
    """Until `margin/status` lists no background work whose name starts with `kind`."""
    while any(name.startswith(kind) for name in (await client.request("margin/status", {}))["background"]):
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def session(fake: FakeProcess, tmp: Path, root: Path, command: tuple[str, ...]) -> AsyncIterator[RawClient]:
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp / "threads.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_LOG_LEVEL": "INFO"}
    async with raw_client(env, capabilities={}, root_uri=root.as_uri(), command=command) as client:
        yield client


async def build(client: RawClient, root: Path, turns: int) -> None:
    """The file open, the memories pinned, the index built, `turns` turns in the thread and its
    summary made (after the idle pause that follows them)."""
    client.notify("textDocument/didOpen", {"textDocument": {"uri": (root / "big.py").as_uri(), "languageId": "python",
                                                            "version": 1, "text": big_file()}})
    for text, scope in MEMORIES:
        await client.request("margin/remember", {"text": text, "scope": scope,
                                                 "textDocument": {"uri": (root / "big.py").as_uri()}})
    await background_done(client, "index ")
    for turn in range(turns):
        await client.request("margin/editOps" if turn % 4 == 3 else "margin/chat", params(root, turn))
    await background_done(client)


def cpu_seconds(pid: int) -> float | None:
    """The CPU time process `pid` has run, every thread (Linux's schedstat, in nanoseconds);
    None where there is none."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return None
    total = 0
    for task in tasks.iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


async def measure(options: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="margin-bench-overhead-"))
    root = workspace(tmp)
    fake = FakeProcess(__file__)
    command: tuple[str, ...] = ("-m", "margin.lsp.main")
    if options.profile:
        command = (__file__, "--profiled-server", str(Path(options.profile).resolve()))
    times: dict[str, list[float]] = {"chat": [], "editOps": [], "chat direct": [], "editOps direct": [],
                                     "chat cpu": [], "editOps cpu": []}
    requests = replayed = 0
    try:
        async with session(fake, tmp, root, command) as client:
            await build(client, root, options.turns)
            prompt = await client.request("margin/explain", params(root, 0))
            sent_before = int(fake.ask("count"))
            async with httpx.AsyncClient(timeout=60) as http:
                url = f"{fake.base_url}/chat/completions"
                (await http.post(url, content=fake.ask("last").encode(),
                                 headers={"Content-Type": "application/json"})).raise_for_status()  # connected
                replayed += fake.ask("same") == "True"
                pid = client.process.pid
                if options.profile:
                    os.kill(pid, signal.SIGUSR1)
                with sampled(pid, options.py_spy):
                    for round_ in range(options.rounds):
                        for method in ("chat", "editOps"):
                            cpu, started = cpu_seconds(pid), time.perf_counter()
                            await client.request(f"margin/{method}", params(root, options.turns + round_))
                            times[method].append(time.perf_counter() - started)
                            if cpu is not None and (after := cpu_seconds(pid)) is not None:
                                times[f"{method} cpu"].append(after - cpu)
                            requests += 1
                            body = fake.ask("last").encode()
                            started = time.perf_counter()
                            answer = await http.post(url, content=body, headers={"Content-Type": "application/json"})
                            await answer.aread()
                            times[f"{method} direct"].append(time.perf_counter() - started)
                            answer.raise_for_status()
                            replayed += fake.ask("same") == "True"
                if options.profile:
                    os.kill(pid, signal.SIGUSR2)
            sent = int(fake.ask("count")) - sent_before - 1 - requests  # less the replays
    finally:
        fake.close()
    report(options, prompt, times, sent, requests, replayed)
    return finish()


async def compare(options: argparse.Namespace) -> int:
    """`--against TREE`: this tree's server and TREE's, interleaved request by request."""
    trees = {"this tree": REPO / "server", options.against: Path(options.against).resolve() / "server"}
    if not (trees[options.against] / "margin").is_dir():
        print(f"{options.against} holds no server/margin: give a checkout of this repository", file=sys.stderr)
        return 2
    fake = FakeProcess(__file__)
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    try:
        async with contextlib.AsyncExitStack() as stack:
            clients = {}
            for name, server in trees.items():
                tmp = Path(tempfile.mkdtemp(prefix="margin-bench-overhead-"))
                root = workspace(tmp)
                env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp / "threads.db"),
                       "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_LOG_LEVEL": "INFO",
                       "PYTHONPATH": str(server)}
                client = await stack.enter_async_context(raw_client(env, capabilities={}, root_uri=root.as_uri()))
                clients[name] = (client, root)
            await asyncio.gather(*(build(client, root, options.turns) for client, root in clients.values()))
            for round_ in range(options.rounds):
                for method in ("chat", "editOps"):
                    for name in (list(trees) if round_ % 2 == 0 else list(trees)[::-1]):
                        client, root = clients[name]
                        before, started = cpu_seconds(client.process.pid), time.perf_counter()
                        await client.request(f"margin/{method}", params(root, options.turns + round_))
                        times.setdefault((name, method), []).append((time.perf_counter() - started) * 1000)
                        if before is not None and (after := cpu_seconds(client.process.pid)) is not None:
                            cpu.setdefault((name, method), []).append((after - before) * 1000)
    finally:
        fake.close()
    this, other = trees
    print(f"Request overhead, this tree against {other}: both servers at once, {options.turns}-turn threads, "
          f"{options.rounds} rounds alternating request by request (ms; gain: the median of the paired "
          "differences, positive when this tree is faster)")
    for method in ("chat", "editOps"):
        for what, found in (("time", times), ("CPU", cpu)):
            mine, theirs = found.get((this, method), []), found.get((other, method), [])
            if mine and len(mine) == len(theirs):
                gain = statistics.median(t - m for m, t in zip(mine, theirs))
                print(f"    {method:<8} {what:<5} this tree {statistics.median(mine):7.2f}   {other} "
                      f"{statistics.median(theirs):7.2f}   gain {gain:6.2f}")
    return 0


def report(options: argparse.Namespace, prompt: dict[str, Any], times: dict[str, list[float]], sent: int,
           requests: int, replayed: int) -> None:
    sections = {s["name"]: s for s in prompt["budget"]["sections"]}
    history = sections.get("history", {})
    print(f"Request overhead: margin-lsp over stdio against the loopback fake (its own process, a {WINDOW}-token "
          f"window, answering at once), a {len(big_file()):,}-byte file open, a {options.turns}-turn thread "
          f"(growing by one turn a request), instructions, {len(MEMORIES)} memories and retrieval on; "
          f"{options.rounds} rounds")
    parts = {"file": any("File big.py (python, sha256:" in m["content"] for m in prompt["messages"]),
             **{name: sections.get(name, {}).get("tokens", 0) > 0 for name in PARTS[1:]}}
    print(f"  the prompt (margin/explain before the rounds): {prompt['budget']['total']:,} tokens in "
          f"{len(prompt['messages'])} messages; history {history.get('tokens', 0):,} tokens "
          f"({history.get('kept', 0)} messages kept, {len(history.get('dropped', []))} dropped), "
          + ", ".join(f"{name} {sections[name]['tokens']:,}" for name in PARTS[1:]))
    present = [name for name in PARTS if parts[name]]
    print(f"  parts in the prompt: {', '.join(present)}  target: {', '.join(PARTS)}  "
          f"{verdict(len(present), len(PARTS), at_least=True, kind='exact', what='parts in the prompt')}")
    print(f"    {'':<10} {'Margin median':>14} {'p90':>7} {'direct median':>14} {'p90':>7} {'overhead':>9}  ms")
    for method in ("chat", "editOps"):
        margin, direct = times[method], times[f"{method} direct"]
        overhead = (statistics.median(margin) - statistics.median(direct)) * 1000
        print(f"    {method:<10} {statistics.median(margin) * 1000:14.2f} {p90(margin) * 1000:7.2f} "
              f"{statistics.median(direct) * 1000:14.2f} {p90(direct) * 1000:7.2f} {overhead:9.2f}  target <= "
              f"{TARGET_MS:g} ms  {verdict(overhead, TARGET_MS, kind='time', what=f'{method} overhead')}")
    print("    (Margin: the LSP request to its answer, through the server and the fake; direct: the body Margin "
          "sent, posted straight to the fake; overhead: the difference of the medians)")
    if times["chat cpu"]:
        print("  margin-lsp's CPU time per request, every thread (what load does not change), median: "
              + ", ".join(f"{method} {statistics.median(times[f'{method} cpu']) * 1000:.2f} ms (p90 "
                          f"{p90(times[f'{method} cpu']) * 1000:.2f})" for method in ("chat", "editOps")))
    print(f"  model requests: {sent} for {requests} LSP requests  target 1 each  "
          f"{verdict(abs(sent - requests), 0, kind='exact', what='model requests other than one per LSP request')}")
    print(f"  bodies replayed byte for byte: {replayed} of {requests + 1}  "
          f"{verdict(replayed, requests + 1, at_least=True, kind='exact', what='bodies replayed')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns in the thread before timing")
    parser.add_argument("--rounds", type=int, default=40, help="timed rounds (a chat and an edit-ops request each)")
    parser.add_argument("--profile", help="write a cProfile of the server over the timed rounds to this file")
    parser.add_argument("--py-spy", help="sample the server with py-spy over the timed rounds to this file")
    parser.add_argument("--against", metavar="TREE", help="compare with another checkout's server, interleaved")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profiled-server", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_fake:
        serve_fake()
        return 0
    if options.profiled_server:
        profiled_server(options.profiled_server)
        return 0
    return asyncio.run(compare(options) if options.against else measure(options))


if __name__ == "__main__":
    sys.exit(main())
