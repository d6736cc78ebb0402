"""Inline completion while background work is due, on real llama.cpp, against idle.

The language server (margin-lsp, a subprocess) on llama.cpp with Gemma 3 270M (4096-token
window), through a recording proxy. The tests' typing script (tests/e2e/test_real_llama.py: 30
keystrokes along a new line of a 400-line file, each asked after the previous answer) is typed
under each condition, on one llama.cpp server, one after another:

- idle: nothing else to do;
- summary due: a chat thread grown past its window first, so that a summary of it is due when
  typing starts (`margin/status` lists `summary <thread>` at every keystroke counted);
- index building: the server started on a generated 10,000-file workspace (benchmarks/
  bench_retrieval.py's), typing while its index builds (`index <folder>` listed at every
  keystroke counted).

For each keystroke that sent a request (Margin's cache answers some with none): the end-to-end
time at the client, and the server time (the proxy's: from the request to the model server's
whole answer). Each condition is compared with idle keystroke by keystroke; the figure is the
median of those ratios. Target: <= 1.2x for both, for both conditions. Margin's order of work
(services/background.py) makes it so: a summary waits for an idle pause and stops for a
completion; indexing waits between files.

Printed beside them, not judged — what the same work costs when it runs beside typing rather
than giving way: a summary-sized generation (the thread's prompt, 512 tokens out) streamed to
the model server directly throughout the typing, and the same workspace indexed by another
process throughout it. After typing stops, the summary that was due must be written (not
starved): the seconds it took are printed.

    .venv/bin/python benchmarks/bench_background.py [--files 10000] [--no-references]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import finish, verdict

TARGET = 1.2
CHAT_ENV = {"MARGIN_CHAT_MAX_OUTPUT_TOKENS": "8", "MARGIN_CHAT_TEMPERATURE": "0", "MARGIN_LOG_LEVEL": "WARNING"}
SUMMARY_TOKENS = 512
"""what a summary at a 4096 window is asked for (core.summary.summary_tokens)"""


def long_message(turn: int) -> str:
    """~700 tokens of a chat message that names code, so a few turns outgrow the window."""
    lines = [f"Turn {turn}: step {i} of the parser reads token_{turn}_{i} and stores it in table_{i % 7}."
             for i in range(40)]
    return "\n".join(lines) + "\nIn three words, what does this do?"


@contextlib.asynccontextmanager
async def client_on(base_url: str, tmp: Path, root: Path, **env: str):
    """margin-lsp on `base_url` with its workspace at `root` (test_real_llama's completion_client)."""
    from lsprotocol import types
    from tests.e2e.lsp_client import margin_client
    from tests.e2e.test_real_llama import COMPLETION_ENV, TYPING_ENV

    environ = {"MARGIN_DEFAULTS_BASE_URL": base_url, "MARGIN_DATABASE": str(tmp / "t.db"), **COMPLETION_ENV,
               **TYPING_ENV, **CHAT_ENV, **env}
    async with margin_client(env=environ, root=root) as client:
        client.protocol._converter.register_unstructure_hook(types.InlineCompletionRequest, lambda m: {
            "id": m.id, "method": m.method, "jsonrpc": m.jsonrpc, "params": m.params})
        yield client


async def background(client) -> list[str]:
    from tests.e2e.lsp_client import status
    return (await status(client))["background"]


async def until_done(client) -> float:
    """Seconds until `margin/status` lists no background work."""
    started = time.perf_counter()
    while await background(client):
        await asyncio.sleep(0.2)
    return time.perf_counter() - started


async def grow_a_thread(client) -> int:
    """Chat turns until a summary is due; the turns it took."""
    from tests.e2e.lsp_client import request
    for turn in range(1, 30):
        result = await request(client, "margin/chat", {"message": long_message(turn)})
        assert "message" not in result, result.get("message")
        if any(name.startswith("summary") for name in await background(client)):
            return turn
    raise SystemExit("no summary became due in 30 turns")


class Typing:
    """One typing run: per keystroke that sent a request, (index, end-to-end s, server s), kept
    only while `during` (a background name prefix) is listed, when given."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.keys: dict[int, tuple[float, float]] = {}
        self.outside = 0
        """keystrokes that sent a request but were not counted (the work was no longer due)"""


async def type_under(client, proxy, typing: Typing, during: str | None, root: Path) -> None:
    from tests.e2e.test_real_llama import type_script, typing_file

    counted: list[bool] = []

    async def after(exchanges: list[Any]) -> None:
        due = during is None or any(name.startswith(during) for name in await background(client))
        counted.append(due)

    uri = (root / "argparse_head.py").as_uri()
    _, keystrokes = await type_script(client, proxy, uri, typing_file(), after=after)
    for n, (key, due) in enumerate(zip(keystrokes, counted[1:])):  # counted[0]: the warm-up
        if not key.exchanges:
            continue
        if not due:
            typing.outside += 1
            continue
        typing.keys[n] = (key.seconds, sum(e.seconds for e in key.exchanges))


async def beside_generation(root_url: str, prompt: str, stop: asyncio.Event) -> int:
    """Summary-sized generations streamed to the model server directly until `stop`; how many."""
    import httpx
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": SUMMARY_TOKENS, "stream": True,
            "temperature": 0.0}
    done = 0
    async with httpx.AsyncClient(timeout=600) as http:
        while not stop.is_set():
            async with http.stream("POST", f"{root_url}/v1/chat/completions", json=body) as response:
                async for _ in response.aiter_lines():
                    if stop.is_set():
                        break
            done += 1
    return done


def index_forever(root: str, stop: Any) -> None:
    """Another process indexing `root` again and again until `stop` (no giving way)."""
    from margin.core.index_store import NoStoredIndex
    from margin.services.retrieval import _build
    from margin.wiring import make_folder_files
    while not stop.is_set():
        _build(make_folder_files(Path(root)), NoStoredIndex())


def write_workspace(folder: Path, files: int) -> None:
    from bench_retrieval import Workspace
    for name, text in Workspace(files).texts.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def run(tmp: Path, llama_root: str, files: int, references: bool) -> list[Typing]:
    from tests.fakes.recording_proxy import RecordingProxy

    runs: list[Typing] = []
    plain = tmp / "ws"
    plain.mkdir()
    with RecordingProxy(llama_root) as proxy:
        idle = Typing("idle")
        async with client_on(proxy.base_url, tmp / "idle", plain) as client:
            await type_under(client, proxy, idle, None, plain)
        runs.append(idle)

        summary = Typing("summary due")
        async with client_on(proxy.base_url, tmp / "summary", plain) as client:
            turns = await grow_a_thread(client)
            print(f"  a summary became due after {turns} chat turns")
            await type_under(client, proxy, summary, "summary", plain)
            print(f"  typing stopped; the summary that was due was written {await until_done(client):.1f} s later")
        runs.append(summary)

        workspace = tmp / "big"
        started = time.perf_counter()
        write_workspace(workspace, files)
        print(f"  generated a {files:,}-file workspace in {time.perf_counter() - started:.1f} s")
        index = Typing("index building")
        async with client_on(proxy.base_url, tmp / "index", workspace, MARGIN_RETRIEVAL="true") as client:
            await type_under(client, proxy, index, "index", workspace)
            print(f"  typing stopped; the index finished {await until_done(client):.1f} s later")
        runs.append(index)

        if references:
            beside = Typing("a summary-sized generation beside (not judged)")
            stop = asyncio.Event()
            prompt = "\n\n".join(long_message(turn) for turn in range(1, 5))
            generating = asyncio.ensure_future(beside_generation(llama_root, prompt, stop))
            async with client_on(proxy.base_url, tmp / "beside", plain) as client:
                await type_under(client, proxy, beside, None, plain)
            stop.set()
            await generating
            runs.append(beside)

            indexing = Typing("the workspace indexed by another process beside (not judged)")
            spawn = multiprocessing.get_context("spawn")
            halt = spawn.Event()
            other = spawn.Process(target=index_forever, args=(str(workspace), halt))
            other.start()
            try:
                async with client_on(proxy.base_url, tmp / "indexing", plain) as client:
                    await type_under(client, proxy, indexing, None, plain)
            finally:
                halt.set()
                other.join()
            runs.append(indexing)
    return runs


def report(runs: list[Typing]) -> None:
    idle, *others = runs
    print(f"  {'condition':<62} {'keys':>4} {'e2e ms':>8} {'server ms':>9} {'e2e x':>6} {'server x':>8}")
    print(f"  {idle.label:<62} {len(idle.keys):>4} {med(idle, 0):8.0f} {med(idle, 1):9.0f}")
    for typing in others:
        paired = [k for k in typing.keys if k in idle.keys]
        if not paired:
            print(f"  {typing.label:<62} no keystroke counted ({typing.outside} outside the condition)")
            if "not judged" not in typing.label:
                verdict(float("inf"), TARGET, what=f"{typing.label}: keystrokes counted")
            continue
        e2e = statistics.median(typing.keys[k][0] / idle.keys[k][0] for k in paired)
        server = statistics.median(typing.keys[k][1] / idle.keys[k][1] for k in paired)
        print(f"  {typing.label:<62} {len(paired):>4} {med(typing, 0):8.0f} {med(typing, 1):9.0f} "
              f"{e2e:6.2f} {server:8.2f}" + (f"  ({typing.outside} after it was done, left out)" if typing.outside else ""))
        if "not judged" not in typing.label:
            print(f"    end to end {e2e:.2f}x idle, target <= {TARGET}x: "
                  f"{verdict(e2e, TARGET, what=f'{typing.label}: end to end against idle')}; "
                  f"server {server:.2f}x: {verdict(server, TARGET, what=f'{typing.label}: server time against idle')}")


def med(typing: Typing, which: int) -> float:
    return statistics.median(v[which] for v in typing.keys.values()) * 1000 if typing.keys else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the generated workspace")
    parser.add_argument("--no-references", action="store_true", help="skip the unjudged side-by-side references")
    args = parser.parse_args()
    from tests.conftest import running_llama_server

    tmp = Path(tempfile.mkdtemp(prefix="margin-bench-background-"))
    print("Inline completion on real llama.cpp (Gemma 3 270M) while background work is due, against idle: "
          "the 30-keystroke typing script, per keystroke that sent a request, median of the ratios")
    try:
        with running_llama_server(tmp / "llama-server.log") as server:
            runs = asyncio.run(run(tmp, server.root, args.files, not args.no_references))
    except RuntimeError as error:
        raise SystemExit(str(error)) from None
    report(runs)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
