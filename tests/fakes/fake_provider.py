"""A scripted in-process `LLMProvider`, for service tests that check Margin's own logic.

    provider = FakeProvider()
    provider.script(answer("hello"), ["Hel", gate, "lo"], BackendTimeout("...", timeout_s=1))
    services = fake_services(tmp_path, provider)
    ... await services.chat.chat(Ask("hi")) ...
    provider.requests   # every ChatRequest received, in order (the request objects themselves)
    await close(services)

Each `complete` or `stream` call takes the next scripted step; with none left it answers "ok".
A step is one of:

- a `ChatReply` (see `answer`): the whole reply; streamed as one piece, then the finish.
- a list of pieces, played in order: a `str` is text (one delta when streaming); a `Gate` is
  reached (its `reached` event is set) and then waited on until the test opens it; an
  `asyncio.Event` is waited on; a number is a delay in seconds (prefer gates); an exception
  instance is raised there (e.g. a stream cut after some text); a callable is called (and
  awaited if it returns an awaitable), e.g. to change settings at that point; a `ChatReply`
  is its text plus the finish reason and usage it carries. Without one, the reply finishes
  with "stop". `complete` plays the same pieces and returns the text joined.
- an exception instance (`ContextTooLarge(...)`, `BackendHTTPError(...)`, ...): raised when the
  call starts, before any text.
- a callable taking the `ChatRequest` and returning one of the above (sync or async).

`fill` (the fill-in-the-middle routes) answers from `fill_answers`, by route, and keeps each
request in `fills`.

`probe()` answers `info` (by default a llama.cpp server with an 8192-token window), counting
calls in `probes` and calling `on_probe` first when it is set (sync or async) — the point a
request resolving its profile awaits. There is no HTTP: nothing here exercises the adapter;
tests of real HTTP behaviour use `tests.fakes.fake_openai`.

`fake_app`/`fake_services` build the app the way `margin.wiring` does, with the real SQLite
store and real tokenizers; only the model backend is this fake (and each in-process tokenizer
is built once per test process, see `ProcessTokenizers`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.adapters.sqlite_store import SQLiteThreadStore
from margin.core.fim import FimReply, FimRequest
from margin.core.llm import BackendInfo, ChatDelta, ChatReply, ChatRequest, NotSupported, Usage
from margin.core.tokens.choice import TokenizerChoice
from margin.core.tokens.counter import LocalCounter
from margin.core.workspace_access import WorkspaceAccess
from margin.services.app import MarginApp
from margin.services.registry import Services
from margin.services.tokenizers import Tokenizers
from margin.wiring import LOCAL_WORKSPACE, make_server_counter

WS = "file:///ws"
BASE_URL = "http://fake-provider.invalid/v1"
"""Never contacted: only a llama.cpp tokenizer (asked for by a test) would use it."""

DEFAULT_INFO = BackendInfo(base_url=BASE_URL, reachable=True, kind="llama.cpp", context_window=8192,
                           context_window_source="llama.cpp /props n_ctx", models=("fake-model",))


def answer(content: str, finish_reason: str | None = "stop", usage: Usage | None = None,
           model: str | None = None) -> ChatReply:
    """A whole reply (`usage` defaults to 10 prompt tokens and 2 completion tokens)."""
    return ChatReply(content, finish_reason, usage or Usage(10, 2), model)


@dataclass
class Gate:
    """A point in a scripted reply where the provider stops until the test opens it.
    `reached` is set when the provider gets there."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    """set when the call waiting here was cancelled (its caller gave up on it)"""

    def open(self) -> None:
        self.released.set()

    async def pass_through(self) -> None:
        self.reached.set()
        try:
            await self.released.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


Step = Any
"""ChatReply | list of pieces | BaseException | Callable[[ChatRequest], Step]"""


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class FakeProvider:
    def __init__(self, *steps: Step, info: BackendInfo = DEFAULT_INFO,
                 on_probe: Callable[[], Any] | None = None) -> None:
        self.info = info
        self.on_probe = on_probe
        self.default: Step = answer("ok")
        self.requests: list[ChatRequest] = []
        self.probes = 0
        self.closed = 0
        self.made: list[tuple[str, float, str | None]] = []
        """(base_url, timeout_s, api_key) of each time the app asked the factory for a provider"""
        self._steps: list[Step] = list(steps)
        self.fills: list[FimRequest] = []
        """every `fill` request (the completion routes but chat), in order"""
        self.fill_answers: dict[str, list[Any]] = {}
        """by route: the answers to give, in order — a str (the text), a `FimReply`, an
        exception to raise, or a callable of the `FimRequest` returning one of those (awaited
        if need be); with none left, a route answers NotSupported, as a backend without it does"""

    def script(self, *steps: Step) -> None:
        self._steps.extend(steps)

    @property
    def pending(self) -> int:
        """Scripted steps not yet taken."""
        return len(self._steps)

    def factory(self, base_url: str, timeout_s: float, api_key: str | None,
                on_request: Any = None) -> FakeProvider:
        """A `ProviderFactory` that hands out this provider for every profile."""
        self.made.append((base_url, timeout_s, api_key))
        return self

    async def _next(self, request: ChatRequest) -> Step:
        self.requests.append(request)
        step = self._steps.pop(0) if self._steps else self.default
        while callable(step) and not isinstance(step, (BaseException, ChatReply, list)):
            step = await _maybe_await(step(request))
        if isinstance(step, BaseException):
            raise step
        return step

    @staticmethod
    async def _play(step: Step) -> AsyncIterator[ChatDelta]:
        """The deltas of a step: text pieces, then one delta with the finish (and usage)."""
        pieces = [step] if isinstance(step, ChatReply) else list(step)
        finish, usage, count = "stop", None, 0
        for piece in pieces:
            if isinstance(piece, str):
                count += 1
                yield ChatDelta(piece)
            elif isinstance(piece, ChatReply):
                if piece.content:
                    count += 1
                    yield ChatDelta(piece.content)
                finish, usage = piece.finish_reason, piece.usage
            elif isinstance(piece, Gate):
                await piece.pass_through()
            elif isinstance(piece, asyncio.Event):
                await piece.wait()
            elif isinstance(piece, BaseException):
                raise piece
            elif isinstance(piece, (int, float)):
                await asyncio.sleep(piece)
            elif callable(piece):
                await _maybe_await(piece())
            else:
                raise TypeError(f"FakeProvider: a piece it cannot play: {piece!r}")
        yield ChatDelta("", finish, usage or Usage(10, count))

    async def complete(self, request: ChatRequest) -> ChatReply:
        step = await self._next(request)
        parts: list[str] = []
        finish, usage = None, Usage()
        async for delta in self._play(step):
            parts.append(delta.text)
            finish, usage = delta.finish_reason or finish, delta.usage or usage
        model = step.model if isinstance(step, ChatReply) else None
        return ChatReply("".join(parts), finish, usage, model or request.model)

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatDelta]:
        step = await self._next(request)
        async for delta in self._play(step):
            yield delta

    async def fill(self, request: FimRequest) -> FimReply:
        self.fills.append(request)
        answers = self.fill_answers.get(request.route)
        answer: Any = answers.pop(0) if answers else NotSupported(f"no {request.route} here", status=404)
        if callable(answer) and not isinstance(answer, BaseException):
            answer = await _maybe_await(answer(request))
        if isinstance(answer, BaseException):
            raise answer
        return answer if isinstance(answer, FimReply) else FimReply(answer, "stop")

    async def probe(self, model: str | None = None) -> BackendInfo:
        self.probes += 1
        if self.on_probe is not None:
            await _maybe_await(self.on_probe())
        return self.info

    async def aclose(self) -> None:
        self.closed += 1


_BUILT: dict[str, LocalCounter] = {}


class ProcessTokenizers(Tokenizers):
    """The real tokenizer service, except that each in-process tokenizer (tiktoken, Tekken) is
    built once per test process rather than once per app: a build reads and hash-checks its
    asset and takes about half a second. Preloading, waiting for a build, the heuristic
    fallback and the states are the service's own."""

    async def _build(self, choice: TokenizerChoice) -> LocalCounter | None:
        if choice.name not in _BUILT:
            built = await super()._build(choice)
            if built is None:
                return None
            _BUILT[choice.name] = built
        return _BUILT[choice.name]


IDLE_PAUSE_S = 0.05
"""the pause before background work here (services.background): short, as no one is typing"""


def fake_app(tmp_path: Path, provider: FakeProvider, folders: Sequence[str] = (WS,), *,
             workspace_access: WorkspaceAccess = LOCAL_WORKSPACE, **env: str) -> MarginApp:
    """A MarginApp on `provider`, the real SQLite thread store (a file in `tmp_path`), the real
    tokenizers (tiktoken:o200k_base for every profile unless `env` says otherwise; see
    `ProcessTokenizers`) and the local disk's workspace folders unless `workspace_access` says
    otherwise (tests.fakes.workspace). `env` is the whole environment besides those defaults
    (MARGIN_... variables)."""
    environ = {"MARGIN_DEFAULTS_BASE_URL": BASE_URL, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
               "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **env}
    app = MarginApp.create(provider.factory, make_server_counter, SQLiteThreadStore, environ, workspace_access)
    app.tokenizers = ProcessTokenizers(make_server_counter)
    app.workspace.folders = lambda: list(folders)
    app.queue.idle_pause_s = IDLE_PAUSE_S
    return app


def fake_services(tmp_path: Path, provider: FakeProvider, folders: Sequence[str] = (WS,), *,
                  workspace_access: WorkspaceAccess = LOCAL_WORKSPACE, **env: str) -> Services:
    """Every use case over `fake_app(...)`. Close with `await close(services)`."""
    return Services.over(fake_app(tmp_path, provider, folders, workspace_access=workspace_access, **env))


async def close(services: Services | MarginApp) -> None:
    """Close the app (thread store, tokenizers, providers); for a fixture's teardown."""
    app = services.app if isinstance(services, Services) else services
    await app.aclose()
