"""Inline completion (SPEC J, "Performance"): Margin's own time per request, the backend requests
while the user types along a suggestion, how fast a superseded request's HTTP call is closed,
and, on the real llama.cpp server, the prompt tokens evaluated per keystroke and Margin's
end-to-end time against a direct call with the same prompt.

Targets:
- loopback fake backend answering at once, 3,000-line file: server time per request, median,
  <= 5 ms on a cache miss and <= 2 ms on a hit; 0 backend requests while the user types along a
  shown suggestion; a superseded request's HTTP call closed within 20 ms of the newer request;
- real llama.cpp (Gemma 3 270M, 4096-token window), 30-keystroke typing script in a 400-line
  file: `timings.prompt_n` per keystroke, median <= 64; Margin's end-to-end time <= 1.1x a
  direct call with the same prompt.

Server time is measured in-process, around `CompletionService.complete`: everything Margin does
for a request below the LSP layer (the cache, the document read, the profile, the prompt budget
counted exactly with the real tokenizer — tiktoken o200k, as the LSP tests use with the fake —,
the real HTTP client `OpenAICompatibleProvider`, post-processing), against the loopback
`FakeBackend` running in a process of its own, as a backend does (and with TCP_NODELAY: it
writes an answer in two sends, and without it the second waits ~40 ms for a delayed ACK). The
fake answers at once, but answering still takes it some Python (reading and parsing the ~35 KB
request, writing the answer, ~0.5 ms): it measures that time inside its handler, and that alone
is subtracted — it is the backend's time, which the target excludes ("model time excluded");
the transfer both ways and the HTTP client stay in. The LSP layer (JSON-RPC over stdio) is left
out: it is the same for every request, whatever Margin then does. Printed beside it, for
comparison: the same time with nothing subtracted; the same scripts with the in-process
`FakeProvider` (no HTTP: Margin's own work alone); and, after each miss, the body Margin sent
posted again with a bare httpx client (the floor any HTTP client pays on this machine: the
transfer and waking two processes, which varies from run to run with how soon an idle core
wakes). The fake's window is 8192 tokens (its n_ctx, as in the LSP tests), so a miss sends a
prompt of ~7,900 tokens.

Misses come in two kinds, both measured: typing along a line while the suggestion does not match
what is typed (only the cursor line changes: the common case, most keystrokes), and asking at a
new line (the code around the cursor changed: after Enter or a jump), where the kept code is new
and must be counted afresh. Hits: typing along the suggestion shown.

The abort latency goes through the real margin-lsp process: the older request hangs at the
fake; the newer one is sent from the client; the fake records when it sees the older
connection closed (`FakeBackend.disconnects`). Judged on the median of the trials, the
maximum printed beside it.

On llama.cpp, the typing script is tests/e2e/test_real_llama.py's (Margin's env: completion
timeout 120 s, temperature 0, maxOutputTokens 32). The direct call: two servers are started
fresh, side by side; Margin types against the first (through a recording proxy), and after each
of its answers the chat body it sent is posted, by this script, to the second (through the same
kind of proxy, so both sides pay the same transport), warm-up first — so the second server
sees the same prompts in the same order from the same cache state, under the same machine load
at nearly the same moment, and with temperature 0 generates the same answer (checked).
Compared per keystroke that sent a request: Margin's time is from the LSP request to its answer
at the client (the LSP round trip, the server's work, its /tokenize calls and the model call);
the direct time is the POST alone. Judged on the median of the per-keystroke ratios; the ratio
of the totals is printed too.

    .venv/bin/python benchmarks/bench_completion.py [--no-llama | --only-llama] [--llama-passes N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx
from tests.conftest import LLAMA_CONTEXT, running_llama_server
from tests.fakes.fake_openai import FakeBackend, hang, reply
from tests.fakes.fake_provider import WS, FakeProvider, answer, fake_app

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.llm import NotSupported
from margin.core.vfs import Position, Range, TextChange
from margin.services.app import MarginApp
from margin.services.completion import CompletionRequest, CompletionService
from margin.wiring import LOCAL_WORKSPACE, make_provider, make_server_counter
from timing import finish, verdict

MISS_MS, HIT_MS, ABORT_MS = 5.0, 2.0, 20.0
PROMPT_N, END_TO_END = 64, 1.1
FILE_LINES = 3000
FAKE_WINDOW = 8192
SHOWN = "Queue(maxsize=limit).put_nowait(item)"
"""The fake's one answer. The miss scripts never type a "Q", so none of their keystrokes types
along it (each is a miss); the hit script types it along."""
TYPED = "        values = [self._expand(a) for a in actions]"[:38]
"""Typed on a new line in the miss script: its 30 keystrokes after the indentation."""
ROUND_LINES = (1500, 900, 2100)
"""Where each round of the scripts types (lines of the 3,000-line file)."""
URI = f"{WS}/big.py"


def big_file() -> str:
    """3,000 lines of real Python: the standard library's argparse, then textwrap and json."""
    import json.decoder
    import json.encoder

    text = "".join(inspect.getsource(m) for m in (argparse, textwrap, json.decoder, json.encoder))
    return "".join(text.splitlines(keepends=True)[:FILE_LINES])


def hole(text: str) -> str:
    return f"```python\n{text}\n```"


def fake_backend(answering: list[float] | None = None) -> FakeBackend:
    """The loopback fake, answering without Nagle's delay (it writes an answer's headers and body
    in two sends, and the second would wait ~40 ms for the client's delayed ACK of the first — a
    delay of the fake's, not of any real server). With `answering`, the time each POST took it,
    from the handler's start to its last byte written, is appended there."""
    fake = FakeBackend(props={"default_generation_settings": {"n_ctx": FAKE_WINDOW}},
                       models=[{"id": "fake-model", "owned_by": "llamacpp"}])
    handler = fake._server.RequestHandlerClass

    class Measured(handler):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            started = time.perf_counter()
            super().do_POST()
            if answering is not None:
                answering.append(time.perf_counter() - started)

    fake._server.RequestHandlerClass = Measured
    return fake


def serve_fake() -> None:
    """`--serve-fake`: the fake in this process, answering SHOWN to every chat request. Prints its
    base URL, then answers each line on stdin: "count" with how many chat requests it has had,
    "answering" with the seconds it spent answering POSTs since it was last asked."""
    answering: list[float] = []
    with fake_backend(answering) as fake:
        fake.default = reply(hole(SHOWN))
        print(fake.base_url, flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "count":
                print(len(fake.requests), flush=True)
            elif command == "answering":
                spent, answering[:] = sum(answering), []
                print(spent, flush=True)
            else:
                break


class FakeProcess:
    """The fake in a process of its own, as a backend is: its work does not share Margin's
    interpreter (nor its lock). `script` serves it with `--serve-fake` (this one by default) and
    answers each command on its stdin with a line."""

    def __init__(self, script: str = __file__) -> None:
        self.process = subprocess.Popen([sys.executable, script, "--serve-fake"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().rstrip("\n")

    def requests(self) -> int:
        return int(self.ask("count"))

    def answering(self) -> float:
        return float(self.ask("answering"))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=20)


# --- server time, in-process ---------------------------------------------------------------------

class Bench:
    """A CompletionService on the 3,000-line file, and the version of the document it edits.
    `backend_seconds` says how long the backend spent answering since it was last asked;
    `bare_post`, when given, posts the request Margin just sent again, with a bare HTTP client,
    and says how long that took."""

    def __init__(self, app: MarginApp, backend_seconds: Callable[[], float] = lambda: 0.0,
                 bare_post: Callable[[], Awaitable[float | None]] | None = None) -> None:
        self.app = app
        self.service = CompletionService(app)
        self.backend_seconds = backend_seconds
        self.bare_post = bare_post
        self.version = 1
        self.times: dict[str, list[float]] = {}
        """by script: Margin's time per request, the backend's answering subtracted"""
        self.whole: dict[str, list[float]] = {}
        """by script: the same, nothing subtracted"""
        self.bare: dict[str, list[float]] = {}
        """by script: a bare POST of the same body right after, the backend's answering subtracted"""
        app.files.open(URI, "python", 1, big_file())

    def edit(self, line: int, column: int, text: str) -> None:
        self.version += 1
        at = Position(line, column)
        self.app.files.change(URI, self.version, [TextChange(text, Range(at, at))])

    async def ask(self, line: int, column: int, script: str | None = None) -> Any:
        self.backend_seconds()
        started = time.perf_counter()
        outcome = await self.service.complete(CompletionRequest(URI, Position(line, column), self.version))
        seconds = time.perf_counter() - started
        if script is not None:
            self.whole.setdefault(script, []).append(seconds)
            self.times.setdefault(script, []).append(seconds - self.backend_seconds())
            if self.bare_post is not None and script.startswith("miss"):
                bare = await self.bare_post()
                if bare is not None:
                    self.bare.setdefault(script, []).append(bare - self.backend_seconds())
        return outcome

    async def typing_misses(self, line: int) -> None:
        """A new line at `line`, its indentation, then the rest of TYPED key by key."""
        indent = len(TYPED) - len(TYPED.lstrip())
        self.edit(line, 0, TYPED[:indent] + "\n")
        for column in range(indent, len(TYPED)):
            self.edit(line, column, TYPED[column])
            outcome = await self.ask(line, column + 1, "miss_typing")
            assert not outcome.cached and outcome.suggestion is not None, outcome.reason

    async def new_line_misses(self, line: int, count: int = 30) -> None:
        """Asking at the end of `count` lines from `line` on, every third: each time the code
        around the cursor is new."""
        lines = self.app.files.get(URI).text.splitlines()
        for n in range(line, line + 3 * count, 3):
            outcome = await self.ask(n, len(lines[n]), "miss_new_line")
            assert not outcome.cached, outcome.reason

    async def typing_along(self, line: int) -> tuple[int, int]:
        """Ask once at a new line (the answer is SHOWN), then type SHOWN key by key, asking after
        each: how many keystrokes, and how many of them were not answered from the cache."""
        self.edit(line, 0, "        \n")
        first = await self.ask(line, 8)
        assert first.suggestion is not None and first.suggestion.text == SHOWN, first.reason
        misses = 0
        for i, char in enumerate(SHOWN[:-1]):
            self.edit(line, 8 + i, char)
            outcome = await self.ask(line, 9 + i, "hit")
            misses += not outcome.cached
        return len(SHOWN) - 1, misses

    async def rounds(self, backend_requests: Callable[[], int] | None = None) -> tuple[int, int]:
        """Every script at each of ROUND_LINES; the keystrokes typed along a suggestion, and the
        backend requests they caused (counted by the backend when it can say)."""
        keys = requests = 0
        for line in ROUND_LINES:
            await self.typing_misses(line)
            await self.new_line_misses(line + 10)
            before = backend_requests() if backend_requests else 0
            typed, misses = await self.typing_along(line + 200)
            keys += typed
            requests += (backend_requests() - before - 1) if backend_requests else misses  # less the first ask's
        return keys, requests


async def server_times_http(tmp: Path) -> tuple[Bench, int, int, int]:
    """The scripts with the real HTTP client against the loopback fake in its own process; after
    each miss, the chat body Margin sent is posted again with a bare httpx client (the floor any
    HTTP client pays here: the transfer, and waking the fake's process and then this one)."""
    fake = FakeProcess()
    sent: list[tuple[str, dict[str, Any]]] = []

    def recording_provider(base_url: str, timeout_s: float, api_key: str | None, on_request: Any = None) -> Any:
        def observe(url: str, body: dict[str, Any]) -> None:
            sent.append((url, body))
            if on_request is not None:
                on_request(url, body)

        return make_provider(base_url, timeout_s, api_key, observe)

    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp / "http.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base"}
    app = MarginApp.create(recording_provider, make_server_counter, SQLiteThreadStore, env, LOCAL_WORKSPACE)
    app.workspace.folders = lambda: [WS]
    async with httpx.AsyncClient(timeout=30) as bare:

        async def bare_post() -> float | None:
            if not sent or not sent[-1][0].endswith("/chat/completions"):
                return None
            url, body = sent[-1]
            started = time.perf_counter()
            (await bare.post(url, json=body)).raise_for_status()
            return time.perf_counter() - started

        bench = Bench(app, fake.answering, bare_post)
        try:
            outcome = await bench.ask(1200, 0)  # the route is found, the tokenizer built
            assert outcome.route == "chat" and outcome.budget.tokenizer == "tiktoken:o200k_base", outcome
            await bare_post()  # its connection is open
            keys, requests = await bench.rounds(fake.requests)
            return bench, keys, requests, outcome.budget.total
        finally:
            await app.aclose()
            fake.close()


async def server_times_in_process(tmp: Path) -> Bench:
    """The same scripts with the in-process fake provider: Margin's own work, no HTTP."""
    provider = FakeProvider()
    provider.default = answer(hole(SHOWN))
    provider.fill_answers["infill"] = [NotSupported("Infill is not supported by this model", status=501)]
    assert provider.info.context_window == FAKE_WINDOW
    app = fake_app(tmp, provider)
    bench = Bench(app)
    try:
        await bench.ask(1200, 0)
        await bench.rounds()
        return bench
    finally:
        await app.aclose()


# --- abort latency, through the LSP process ------------------------------------------------------

async def abort_latencies(tmp: Path, trials: int = 15) -> list[float]:
    from tests.e2e.lsp_client import open_doc
    from tests.e2e.test_real_llama import completion_client, inline_items, inline_params

    latencies = []
    with fake_backend() as fake:
        async with completion_client(fake.base_url, tmp, MARGIN_DEFAULTS_TOKENIZER="tiktoken:o200k_base",
                                     MARGIN_LOG_LEVEL="WARNING") as client:
            open_doc(client, URI, big_file())
            await inline_items(client, inline_params(URI, 1500, 0))  # route, tokenizer: ready
            for trial in range(trials):
                line = 1000 + 37 * trial
                fake.script(hang(60), reply(hole("a + b")))
                seen, gone = len(fake.requests), len(fake.disconnects)
                older = asyncio.ensure_future(inline_items(client, inline_params(URI, line, 0)))
                while len(fake.requests) == seen:
                    await asyncio.sleep(0.002)
                await asyncio.sleep(0.05)  # the older request is waiting for its answer
                sent = time.monotonic()
                newer = asyncio.ensure_future(inline_items(client, inline_params(URI, line, 0)))
                while len(fake.disconnects) == gone:
                    await asyncio.sleep(0.001)
                latencies.append(fake.disconnects[-1][1] - sent)
                assert await older == [] and (await newer)[0]["insertText"] == "a + b"
    return latencies


# --- the fake-backend figures ---------------------------------------------------------------------

def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def fake_figures() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="margin-bench-completion-"))
    http, along_keys, along_requests, prompt_tokens = asyncio.run(server_times_http(tmp))
    own = asyncio.run(server_times_in_process(tmp))
    aborts = asyncio.run(abort_latencies(tmp))
    print(f"Inline completion, loopback fake backend answering at once, {FILE_LINES}-line file, "
          f"{FAKE_WINDOW}-token window (a miss sends ~{prompt_tokens} prompt tokens), tiktoken o200k")
    print("  server time per request, median ms (CompletionService.complete, real HTTP client, the fake in its "
          "own process):")
    print(f"    {'':<40} {'Margin':>7} {'+fake answering':>16} {'no HTTP':>8} {'bare POST':>10}  {'n':>4}")
    for label, key, target in (("cache miss, typing along a line", "miss_typing", MISS_MS),
                               ("cache miss, asking at a new line", "miss_new_line", MISS_MS),
                               ("cache hit, typing along the suggestion", "hit", HIT_MS)):
        median = median_ms(http.times[key])
        bare = f"{median_ms(http.bare[key]):10.2f}" if key in http.bare else f"{'-':>10}"
        print(f"    {label:<40} {median:7.2f} {median_ms(http.whole[key]):16.2f} {median_ms(own.times[key]):8.2f} "
              f"{bare}  {len(http.times[key]):>4}  target <= {target:g} ms  {verdict(median, target, kind='time', what=label)}")
    print("    (Margin: the fake's own answering time subtracted; +fake answering: nothing subtracted; no HTTP: the "
          "in-process fake provider; bare POST: the same body posted again at once with a bare httpx client, the "
          "fake's answering subtracted — the transport's floor)")
    print(f"  backend requests while typing along a shown suggestion: {along_requests} in {along_keys} keystrokes  "
          f"target 0  {verdict(along_requests, 0, kind='exact', what='requests typing along a suggestion')}")
    median, within = median_ms(aborts), sum(a * 1000 <= ABORT_MS for a in aborts)
    print(f"  superseded request's HTTP call closed, after the newer request was sent (margin-lsp process): "
          f"median {median:.1f} ms, max {max(aborts) * 1000:.1f} ms, {within} of {len(aborts)} within "
          f"{ABORT_MS:g} ms  target <= {ABORT_MS:g} ms  {verdict(median, ABORT_MS, kind='time', what='superseded call closed')}")


# --- real llama.cpp -------------------------------------------------------------------------------

@contextlib.contextmanager
def llama_server(log_path: Path) -> Iterator[str]:
    """llama.cpp with Gemma 3 270M at a 4096-token window on a free loopback port, started as the
    tests' `llama_server` fixture starts it; yields its root URL."""
    try:
        with running_llama_server(log_path) as server:
            yield server.root
    except RuntimeError as error:
        raise SystemExit(str(error)) from None


async def side_by_side(tmp: Path, margin_root: str, direct_root: str) -> tuple[list[Any], list[Any], list[Any], Any]:
    """Margin's typing script against one server; each chat body it sent, posted right after its
    answer to the other. The warm-up's exchanges, the keystrokes, the direct exchanges with the
    seconds each POST took, and Margin's proxy."""
    from tests.e2e.test_real_llama import TYPING_ENV, completion_client, type_script, typing_file
    from tests.fakes.recording_proxy import RecordingProxy

    direct: list[tuple[Any, float]] = []
    with RecordingProxy(margin_root) as margin_proxy, RecordingProxy(direct_root) as direct_proxy:
        async with httpx.AsyncClient(timeout=600) as http:

            async def replay(exchanges: list[Any]) -> None:
                for exchange in exchanges:
                    started = time.perf_counter()
                    response = await http.post(f"{direct_proxy.base_url}/chat/completions", json=exchange.body)
                    seconds = time.perf_counter() - started
                    response.raise_for_status()
                    direct.append((direct_proxy.exchanges[-1], seconds))

            async with completion_client(margin_proxy.base_url, tmp, MARGIN_LOG_LEVEL="WARNING",
                                         **TYPING_ENV) as client:
                warmup, keystrokes = await type_script(client, margin_proxy, "file:///ws/argparse_head.py",
                                                       typing_file(), after=replay)
        return warmup, keystrokes, direct, margin_proxy


def llama_figures(passes: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="margin-bench-llama-"))
    print(f"Inline completion on real llama.cpp (Gemma 3 270M, {LLAMA_CONTEXT}-token window), 30 keystrokes "
          "typed along a new line of a 400-line file, each asked after the previous answer")
    per_key_all: list[int] = []
    per_request: list[int] = []
    """prompt_n of the keystrokes that sent a request (a keystroke Margin's cache answered sends none)"""
    ratios: list[float] = []
    margin_total = direct_total = 0.0
    differed = 0
    for n in range(passes):
        with llama_server(tmp / f"llama-margin-{n}.log") as margin_root, \
                llama_server(tmp / f"llama-direct-{n}.log") as direct_root:
            warmup, keystrokes, direct, proxy = asyncio.run(side_by_side(tmp, margin_root, direct_root))
        per_key = [k.prompt_n for k in keystrokes]
        per_key_all += per_key
        sent = [k for k in keystrokes if k.exchanges]
        per_request += [k.prompt_n for k in sent]
        posts = Counter(e.path for e in proxy.exchanges)
        print(f"  pass {n + 1}: warm-up prompt_n {warmup[0].prompt_n} of {warmup[0].answer['usage']['prompt_tokens']}"
              f" prompt tokens ({warmup[0].seconds:.1f} s at the server); {len(sent)} of {len(keystrokes)} "
              f"keystrokes sent a request; Margin's POSTs: {dict(posts)}")
        print(f"    prompt_n per keystroke: {per_key}")
        print(f"    {'key':>4} {'prompt_n':>8} {'direct':>6} {'Margin ms':>10} {'direct ms':>10} {'ratio':>6}"
              "  answer tokens")
        replayed = direct[len(warmup):]
        for k, (d, direct_seconds) in zip(sent, replayed):
            (m,) = k.exchanges
            same = m.answer["choices"][0]["message"]["content"] == d.answer["choices"][0]["message"]["content"]
            differed += not same
            ratio = k.seconds / direct_seconds
            ratios.append(ratio)
            margin_total += k.seconds
            direct_total += direct_seconds
            print(f"    {keystrokes.index(k) + 1:>4} {m.prompt_n:>8} {d.prompt_n:>6} {k.seconds * 1000:10.0f} "
                  f"{direct_seconds * 1000:10.0f} {ratio:6.3f}  {m.answer['usage']['completion_tokens']}"
                  f"{'' if same else ' (the direct answer differed)'}")
        cached = [k for k in keystrokes if not k.exchanges]
        if cached:
            print(f"    keystrokes answered from Margin's cache: {len(cached)}, median "
                  f"{statistics.median(k.seconds for k in cached) * 1000:.1f} ms")
    median_n = statistics.median(per_key_all)
    print(f"  newly evaluated prompt tokens per keystroke (timings.prompt_n, 0 when Margin's cache answered): "
          f"median {median_n:g}  target <= {PROMPT_N}  {verdict(median_n, PROMPT_N, kind='exact', what='prompt_n per keystroke')}")
    print(f"    of the {len(per_request)} keystrokes that sent a request: median {statistics.median(per_request):g}, "
          f"max {max(per_request)}" if per_request else "    no keystroke sent a request")
    if ratios:
        median_ratio = statistics.median(ratios)
        print(f"  Margin end-to-end / direct call with the same prompt, per keystroke that sent one: "
              f"median {median_ratio:.3f}x  target <= {END_TO_END}x  {verdict(median_ratio, END_TO_END, what='end to end against a direct call')}")
        print(f"    totals over those keystrokes: Margin {margin_total:.1f} s, direct {direct_total:.1f} s, "
              f"{margin_total / direct_total:.3f}x; answers that differed from the direct call's: {differed}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-llama", action="store_true", help="only the fake-backend figures")
    which.add_argument("--only-llama", action="store_true", help="only the llama.cpp figures")
    parser.add_argument("--llama-passes", type=int, default=1, help="typing-script passes on llama.cpp")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_fake:
        serve_fake()
        return 0
    if not options.only_llama:
        fake_figures()
    if not options.no_llama:
        llama_figures(options.llama_passes)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
