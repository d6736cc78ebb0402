"""`margin doctor --probe`: what the model behind each profile can do, tried rather than guessed.

For each distinct backend and model (profiles sharing them are probed once):

- **fill in the middle**: every completion route the backend may offer (services.completion_routes)
  is asked to fill a one-line hole (`return a ` + `+ b`), through the prompt, request and
  post-processing of a real completion; a route fills it, answers wrongly, is not offered, or fails;
- **JSON schema**: a reply held to a small schema (`{"answer": integer}`) comes back as JSON of that
  shape, or not, or the backend refuses `response_format`;
- **tool calls**: offered one tool, the model calls it with arguments that are JSON, or answers in
  text, or the backend refuses tools;
- **agent actions**: how the model acts as the agent (core/agent/actions.py): by native tool
  calls when it calls the probe's tool; else asked to read a file, by one JSON action held to
  the action schema; else by an action written in its text; else not at all;
- **streaming**: a streamed reply arrives in pieces; its time to the first token and tokens per
  second (the backend's count when it reports one, else the profile's tokenizer's);
- **the context window**, as `margin doctor` reads it.

Every request is short (at most 48 tokens out), so a probe takes seconds on a local model.
The findings are reported, and kept beside the thread database (services.probe_findings): the
language server then takes the completion route that filled the hole, skips the routes the
backend refused, and offers the recall tool only to a model that called the probe's tool.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from margin.core.agent import tools as agent_tools
from margin.core.agent.actions import Protocol, read_answer
from margin.core.completion.formats import family_for
from margin.core.llm import BackendKind, ChatMessage, ChatRequest, NotSupported, ProviderError, ToolCalls
from margin.core.settings import PROFILES, ProfileSettings
from margin.core.tokens.choice import choose_tokenizer
from margin.services.app import MarginApp
from margin.services.completion import CompletionService
from margin.services.completion_routes import candidate_routes
from margin.services.errors import RequestError
from margin.services.probe_findings import Finding, Verdict, finding

HOLE = ("def add(a, b):\n    \"\"\"The sum of a and b.\"\"\"\n    return a ", "\n\n\nassert add(2, 3) == 5\n")
"""the one-line hole every completion route is asked to fill: the text before and after it"""
FILLED = "+b"
"""what fills it, spaces aside"""
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
                 "additionalProperties": False}
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
STREAM_TOKENS = 48
FILL_TOKENS = 24
"""enough for `+ b`, in a fenced block on the chat route"""


@dataclass
class Check:
    works: bool | None
    """True: it works; False: it does not; None: not tried (the profile is off, the backend is down)"""
    result: str
    """a few words for a person: "fills the hole", "refused (not supported)", ..."""
    seconds: float = 0.0
    failure: Verdict | None = None
    """for a check that did not work: "refused" (as unsupported) or "failed" (an error that says
    nothing about the capability); None for an answer that was wrong"""

    @property
    def verdict(self) -> Verdict:
        return "works" if self.works else "not tried" if self.works is None else self.failure or "wrong"


@dataclass
class Probe:
    profiles: list[str]
    base_url: str
    model: str | None
    routes: dict[str, Check] = field(default_factory=dict)
    """fill in the middle, by completion route, best first (only for a backend a completion profile uses)"""
    json_schema: Check | None = None
    tools: Check | None = None
    agent: Check | None = None
    agent_protocol: Protocol | None = None
    """how the model acts as the agent: native, json, text; None when it did not in any way"""
    streaming: Check | None = None
    first_token_s: float | None = None
    tokens_per_s: float | None = None
    context_window: int | None = None
    seconds: float = 0.0
    served: tuple[str, ...] = ()
    """the models the backend listed"""
    reachable: bool = True

    @property
    def fill_route(self) -> str | None:
        """The best route that filled the hole"""
        return next((route for route, check in self.routes.items() if check.works), None)

    def finding(self) -> Finding:
        """What the language server keeps of this probe"""
        return finding(self.base_url, self.model, self.served, {r: c.verdict for r, c in self.routes.items()},
                       self.tools.verdict if self.tools else "not tried", self.agent_protocol)

    def as_dict(self) -> dict[str, Any]:
        def check(c: Check | None) -> dict[str, Any] | None:
            return None if c is None else {"works": c.works, "result": c.result, "seconds": round(c.seconds, 2)}
        return {"profiles": self.profiles, "baseUrl": self.base_url, "model": self.model,
                "routes": {route: check(c) for route, c in self.routes.items()}, "fillRoute": self.fill_route,
                "jsonSchema": check(self.json_schema), "tools": check(self.tools), "agent": check(self.agent),
                "agentProtocol": self.agent_protocol, "streaming": check(self.streaming),
                "firstTokenS": _round(self.first_token_s), "tokensPerS": _round(self.tokens_per_s),
                "contextWindow": self.context_window, "seconds": round(self.seconds, 2)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


async def probe(app: MarginApp) -> list[Probe]:
    """A probe of each enabled profile's backend and model (shared by the profiles naming them)."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    settings: dict[tuple[str, str | None], ProfileSettings] = {}
    for name in PROFILES:
        profile = app.settings.current.profile(name)
        if profile.enabled:
            key = (profile.base_url.rstrip("/"), profile.model)
            groups.setdefault(key, []).append(name)
            settings.setdefault(key, profile)
    return [await _probe(app, names, settings[key]) for key, names in groups.items()]


async def _probe(app: MarginApp, names: list[str], profile: ProfileSettings) -> Probe:
    started = time.perf_counter()
    found = Probe(names, profile.base_url, profile.model)
    name = names[0]
    info = await app.backends.probe(name, profile, fresh=True)
    found.context_window = app.backends.context_window(profile, info)[0]
    found.served = info.models
    if not info.reachable:
        reason = Check(None, f"not tried: {info.error or 'the backend does not answer'}")
        found.json_schema = found.tools = found.agent = found.streaming = reason
        found.reachable = False
        found.seconds = time.perf_counter() - started
        return found
    provider = app.backends.provider(name, profile)
    if "completion" in names:
        service = CompletionService(app)
        for route in candidate_routes(info, profile.base_url, profile.model, family_for(profile.model) is not None):
            found.routes[route] = await _fill(service, route)
    found.json_schema = await _timed(_json_schema(provider, profile))
    found.tools = await _timed(_tools(provider, profile))
    found.agent, found.agent_protocol = await _agent(provider, profile, found.tools)
    found.streaming, found.first_token_s, found.tokens_per_s = await _streaming(app, provider, profile, info.kind)
    found.seconds = time.perf_counter() - started
    return found


async def _timed(work: Any) -> Check:
    started = time.perf_counter()
    check: Check = await work
    check.seconds = time.perf_counter() - started
    return check


def _failed(error: Exception) -> Check:
    if isinstance(error, NotSupported):
        return Check(False, "refused: the backend does not offer it", failure="refused")
    kind = error.kind if isinstance(error, ProviderError) else type(error).__name__
    return Check(False, f"failed ({kind}): {str(error)[:120]}", failure="failed")


async def _fill(service: CompletionService, route: str) -> Check:
    started = time.perf_counter()
    try:
        suggestion = await service.try_route(route, "probe.py", "python", *HOLE,  # type: ignore[arg-type]
                                             max_tokens=FILL_TOKENS)
    except (ProviderError, RequestError) as error:
        check = _failed(error)
    else:
        text = suggestion.text if suggestion is not None else ""
        shown = "".join(text.split())
        check = Check(True, "fills the hole") if shown == FILLED else \
            Check(False, "answers, wrongly" + (f": {text.strip()[:40]!r}" if text.strip() else " (nothing usable)"))
    check.seconds = time.perf_counter() - started
    return check


async def _json_schema(provider: Any, profile: ProfileSettings) -> Check:
    request = ChatRequest([ChatMessage("user", "What is 2 + 3? Answer in JSON.")], 32, 0.0, profile.model,
                          {"type": "json_schema", "json_schema": {"name": "sum", "strict": True, "schema": ANSWER_SCHEMA}})
    try:
        reply = await provider.complete(request)
    except ProviderError as error:
        return _failed(error)
    try:
        value = json.loads(reply.content)
    except ValueError:
        return Check(False, "not honoured: the reply is not JSON")
    if isinstance(value, dict) and set(value) == {"answer"} and type(value["answer"]) is int:
        return Check(True, "honoured" + (" (and right)" if value["answer"] == 5 else ""))
    return Check(False, "not honoured: JSON of another shape")


async def _tools(provider: Any, profile: ProfileSettings) -> Check:
    request = ChatRequest([ChatMessage("user", "What is the weather in Paris now? Use the tool.")], 48, 0.0,
                          profile.model, tools=[TOOL], tool_choice="auto")
    try:
        reply = await provider.complete(request)
    except ProviderError as error:
        return _failed(error)
    calls = [call for call in reply.tool_calls if call.name == "get_weather"]
    if not calls:
        return Check(False, "offered a tool, answered in text" if not reply.tool_calls else "called another tool")
    try:
        arguments = json.loads(calls[0].arguments or "{}")
    except ValueError:
        return Check(False, "called the tool, with arguments that are not JSON")
    ok = isinstance(arguments, dict) and isinstance(arguments.get("city"), str)
    return Check(ok, "calls the tool" if ok else "called the tool without its argument")


AGENT_TOOLS = (agent_tools.READ, agent_tools.FINISH)
AGENT_TOKENS = 64
"""an action to read a file is about 20 tokens; a small model under a grammar pads with spaces"""
AGENT_TASK = "Task: read the file main.py. Do not answer yet: first act."


async def _agent(provider: Any, profile: ProfileSettings, tools: Check) -> tuple[Check, Protocol | None]:
    """The first way the model acts as the agent: native tool calls (the tools check), else one
    JSON action held to the action schema, else an action written in its text: any action the
    agent can run counts (a small model may read another file); "(and right)" when it read main.py."""
    if tools.works:
        return Check(True, "native tool calls"), "native"
    started = time.perf_counter()
    tried: list[str] = []
    for protocol in ("json", "text"):
        system = "You act with tools, one action per answer.\n\n" + agent_tools.described(
            AGENT_TOOLS, fenced=protocol == "text")  # as the agent's prompt says them
        schema = {"type": "json_schema", "json_schema": {"name": "action", "schema": agent_tools.action_schema(AGENT_TOOLS)}}
        request = ChatRequest([ChatMessage("system", system), ChatMessage("user", AGENT_TASK)], AGENT_TOKENS, 0.0, profile.model,
                              schema if protocol == "json" else None)
        try:
            reply = await provider.complete(request)
        except ProviderError as error:
            tried.append(f"{protocol}: {_failed(error).result}")
            continue
        read = read_answer(protocol, reply.content, reply.tool_calls, AGENT_TOOLS)
        if read.calls:  # an action the agent can run: the protocol works, whether the action is right or not
            way = "JSON actions (held to the action schema)" if protocol == "json" else "actions written in its text"
            right = [(c.tool.name, c.args.get("path")) for c in read.calls] == [("read", "main.py")]
            return Check(True, way + (" (and right)" if right else ""), time.perf_counter() - started), protocol
        tried.append(f"{protocol}: " + (read.rejected[0].kind if read.rejected else "no action"))
    return Check(False, "acts in no way the agent reads (" + "; ".join(tried) + ")", time.perf_counter() - started), None


async def _streaming(app: MarginApp, provider: Any, profile: ProfileSettings,
                     kind: BackendKind | None) -> tuple[Check, float | None, float | None]:
    request = ChatRequest([ChatMessage("user", "Count from 1 to 30, the numbers separated by spaces.")],
                          STREAM_TOKENS, 0.0, profile.model)
    started = time.perf_counter()
    first = last = None
    pieces: list[str] = []
    reported = None
    calls = ToolCalls()
    try:
        async for delta in provider.stream(request):
            now = time.perf_counter()
            if delta.text and first is None:
                first = now
            if delta.text:
                pieces.append(delta.text)
                last = now
            calls.add(delta.tool_calls)
            if delta.usage is not None and delta.usage.completion_tokens:
                reported = delta.usage.completion_tokens
    except ProviderError as error:
        return _failed(error), None, None
    seconds = time.perf_counter() - started
    if first is None:
        return Check(False, "streamed no text", seconds), None, None
    tokens = reported
    if tokens is None:
        try:
            choice = choose_tokenizer(profile.tokenizer, profile.model, kind)
            counter = await app.tokenizers.counter(choice, profile.base_url, profile.timeout_s,
                                                   app.backends.key_for(profile))
            (tokens,) = await counter.count_texts(["".join(pieces)])
        except ProviderError:
            tokens = None
    rate = (tokens - 1) / (last - first) if tokens and tokens > 1 and last is not None and last > first else None
    check = Check(True, f"streams ({len(pieces)} pieces)", seconds) if len(pieces) > 1 else \
        Check(False, "answered in one piece, not streamed", seconds)
    return check, first - started, rate
