"""An OpenAI-compatible backend over httpx: `/chat/completions` streaming (SSE) and not, the
fill-in-the-middle routes (`fill`, written as `fim_wire` says), a per-profile timeout, an
optional API key, context-window probing, and typed errors.

Every request that makes the model generate is sent as a stream, whole answers too (`complete`,
`fill`): llama.cpp stops generating for a stream whose client went away, not a whole request.

Timeouts: a whole answer (`complete`, `fill`) must be in within `timeout_s` in total. A stream read as it arrives (`stream`) must start within `timeout_s`
and never stall for longer than `timeout_s` between chunks; a long reply that keeps arriving is
not cut off — up to a backstop against a server that never ends one (adapters.stream_limits).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from margin import __version__
from margin.adapters import ollama_window, stream_limits
from margin.adapters.fim_wire import WIRES, WRONG_SHAPE
from margin.adapters.http_errors import error_from_body, transport_error
from margin.adapters.json_body import chat_body
from margin.adapters.reconnect import ReconnectOnce
from margin.adapters.stream_shapes import (
    ErrorEvent,
    EventData,
    Seen,
    WrongShape,
    arguments_text,
    chat_deltas,
    drain,
    event_data,
    json_of,
    sse_answer,
    usage_of,
)
from margin.core.fim import FimReply, FimRequest
from margin.core.llm import (
    BackendInfo,
    ChatDelta,
    ChatReply,
    ChatRequest,
    MalformedResponse,
    MalformedStream,
    NotSupported,
    ProviderError,
    ToolCall,
    ToolCallDelta,
    ToolCalls,
    Usage,
    joined,
)
from margin.core.models import is_reasoning_model

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0
"""How long a probe of a backend waits for each answer (or the profile's timeoutS if shorter)."""



def server_root(base_url: str) -> str:
    """The server's root for non-OpenAI endpoints (`/props`, `/tokenize`): `base_url` without
    a trailing `/v1`."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path.removesuffix("/v1")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


JSON = {"Content-Type": "application/json"}

RequestObserver = Callable[[str, dict[str, Any]], None]
"""(url, JSON body) of each chat request, just before it is sent"""


class OpenAICompatibleProvider:
    """`LLMProvider` for any server that speaks OpenAI's chat completions API."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        on_request: RequestObserver | None = None,
        probe_timeout_s: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._on_request = on_request
        self.timeout_s = timeout_s
        self.probe_timeout_s = probe_timeout_s
        """how long a probe waits (at most timeout_s); None: PROBE_TIMEOUT_S"""
        headers = {"User-Agent": f"margin/{__version__}"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s), headers=headers, transport=ReconnectOnce(transport)
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def _payload(self, request: ChatRequest, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [message.as_json() for message in request.messages],
            "stream": stream,
        }
        if request.model:
            body["model"] = request.model
        if is_reasoning_model(request.model):
            # OpenAI's reasoning models reject max_tokens and any non-default temperature.
            body["max_completion_tokens"] = request.max_tokens
        else:
            body["max_tokens"] = request.max_tokens
            body["temperature"] = request.temperature
        if request.response_format is not None:
            body["response_format"] = request.response_format
        if request.tools:
            body["tools"] = list(request.tools)
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _sending(self, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Where the request goes and what it is, shown to whoever observes requests."""
        url = f"{self.base_url}/chat/completions"
        if self._on_request is not None:
            self._on_request(url, payload)
        return url, payload

    def _transport_error(self, error: httpx.HTTPError, *, streaming: bool) -> ProviderError:
        return transport_error(self.base_url, self.timeout_s, error, streaming=streaming)

    def _malformed(self, what: str, cls: type[MalformedResponse] = MalformedResponse) -> MalformedResponse:
        return cls(
            f"The backend at {self.base_url} sent {what}, not an OpenAI-compatible chat "
            "completion. Check that baseUrl points at a /v1 chat completions API.",
            base_url=self.base_url,
        )

    async def complete(self, request: ChatRequest) -> ChatReply:
        """The whole reply, asked for as a stream and joined: a caller that stops waiting (a
        newer keystroke, a timeout, a cancelled request) closes the connection, and llama.cpp
        and vLLM stop generating for a stream whose client went away (a non-streamed request
        runs to its end). It must be whole within `timeout_s`."""
        started = time.perf_counter()
        pieces: list[str] = []
        calls = ToolCalls()
        finish_reason, usage = None, Usage()
        try:
            async with asyncio.timeout(self.timeout_s):
                async for delta in self.stream(request):
                    pieces.append(delta.text)
                    calls.add(delta.tool_calls)
                    finish_reason = delta.finish_reason or finish_reason
                    usage = delta.usage or usage
        except TimeoutError:
            raise self._transport_error(httpx.ReadTimeout("deadline"), streaming=False) from None
        reply = ChatReply(joined(pieces), finish_reason, usage, request.model, calls.calls())
        log.info(
            "chat completion done chars_out=%d prompt_tokens=%s ms=%.0f",
            len(reply.content),
            reply.usage.prompt_tokens,
            (time.perf_counter() - started) * 1000,
        )
        return reply

    async def fill(self, request: FimRequest) -> FimReply:
        """The answer for a fill-in-the-middle hole, on the request's route (`fim_wire`)."""
        wire = WIRES[request.route]
        url = f"{server_root(self.base_url) if wire.at_root else self.base_url}{wire.path}"
        answer = await self._post_streamed(url, wire.path, wire.body(request), stream_limits.byte_cap(request.max_tokens))
        try:
            return wire.reply(answer)
        except WRONG_SHAPE:
            raise self._malformed("an answer of the wrong shape") from None

    async def _post_streamed(self, url: str, path: str, body: dict[str, Any], cap: int) -> dict[str, Any]:
        """`body` POSTed to `url`; the JSON answer. Sent as a stream and joined into the answer a
        non-streamed request gets (`sse_answer`), so that closing it stops the generation (see
        `complete`); a server that answers in one piece is read as such. A 404 here means the
        endpoint is missing. At most `cap` bytes are read."""
        if self._on_request is not None:
            self._on_request(url, body)
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream("POST", url, json=body) as response:
                    if response.status_code == 404:
                        raise NotSupported(f"The backend at {self.base_url} has no {path.lstrip('/')} endpoint "
                                           "(HTTP 404).", status=404, base_url=self.base_url)
                    if response.status_code >= 400:
                        raise error_from_body(response.status_code, await response.aread(), self.base_url)
                    if not response.headers.get("content-type", "").startswith("text/event-stream"):
                        answer = self._json_object(await stream_limits.read_capped(response, cap, self.base_url))
                    else:
                        answer = await self._joined_events(response, cap)
        except TimeoutError:
            raise self._transport_error(httpx.ReadTimeout("deadline"), streaming=False) from None
        except httpx.HTTPError as error:
            raise self._transport_error(error, streaming=False) from error
        return answer

    def _json_object(self, content: bytes) -> dict[str, Any]:
        try:
            answer = json_of(content)
        except ValueError:
            raise self._malformed("a reply that is not JSON") from None
        if not isinstance(answer, dict):
            raise self._malformed("a reply that is not a JSON object")
        return answer

    async def _joined_events(self, response: httpx.Response, cap: int) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        async for data in event_data(stream_limits.capped(response, cap, self.base_url)):
            if data == b"[DONE]":
                continue
            event = self._json_object(data)
            if "error" in event:
                status = event["error"].get("code") if isinstance(event["error"], dict) else None
                raise error_from_body(status if isinstance(status, int) else 500, event, self.base_url)
            events.append(event)
        answer = sse_answer(events)
        if answer is None:
            raise MalformedStream(
                f"The stream from {self.base_url} ended before the answer was complete. Try again.",
                base_url=self.base_url)
        return answer

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatDelta]:
        url, payload = self._sending(self._payload(request, stream=True))
        answered = False
        allowed_s = self.timeout_s + stream_limits.SECONDS_PER_TOKEN * request.max_tokens
        deadline, cap, received = time.monotonic() + allowed_s, stream_limits.byte_cap(request.max_tokens), 0
        try:
            async with self._client.stream("POST", url, content=chat_body(payload), headers=JSON) as response:
                answered = True
                if response.status_code >= 400:
                    raise error_from_body(
                        response.status_code, await response.aread(), self.base_url
                    )
                if response.headers.get("content-type", "").startswith("application/json"):
                    # A backend that ignores `stream` and answers in one piece.
                    reply = self._reply_from_json(await response.aread())
                    calls = tuple(ToolCallDelta(i, c.id, c.name, c.arguments) for i, c in enumerate(reply.tool_calls))
                    yield ChatDelta(reply.content, reply.finish_reason or "stop", reply.usage, calls)
                    return
                seen, split = Seen(), EventData()
                chunks = response.aiter_bytes()
                async for chunk in chunks:  # a chunk a token, mostly: read here, with no iterator between
                    received += len(chunk)
                    if received > cap or time.monotonic() > deadline:
                        raise stream_limits.endless(self.base_url, received > cap, cap, allowed_s,
                                                    request.max_tokens)
                    for delta in self._deltas(split.feed(chunk), seen):
                        yield delta
                    if seen.done:
                        await drain(chunks)  # so that the connection is reused
                        return
                for delta in self._deltas(split.end(), seen):
                    yield delta
                if not seen.done:
                    self._ended(response, seen)
        except httpx.HTTPError as error:  # cut mid-reply, or no reply at all (reconnect.py tried twice)
            raise self._transport_error(error, streaming=answered) from error

    def _reply_from_json(self, body: bytes) -> ChatReply:
        """A whole (non-streamed) chat completion."""
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not text")
            calls = tuple(ToolCall(str(c.get("id") or f"call_{i}"), str(c["function"]["name"]),
                                   arguments_text(c["function"].get("arguments")))
                          for i, c in enumerate(choice["message"].get("tool_calls") or ()))
            return ChatReply(
                content=content,
                finish_reason=choice.get("finish_reason"),
                usage=usage_of(data.get("usage")) or Usage(),
                model=data.get("model"),
                tool_calls=calls,
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise self._malformed("a body that is not valid JSON of the expected shape") from None

    def _ended(self, response: httpx.Response, seen: Seen) -> None:
        """A stream's body ended with no `[DONE]`: a cut stream, or no stream at all, unless a
        finish reason came."""
        if not seen.finished and not seen.events:  # a web page (a proxy's sign-in, a UI), not a cut stream
            kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
            raise self._malformed(f"a reply with no event stream in it ({kind})", MalformedStream)
        if not seen.finished:
            raise MalformedStream(
                f"The stream from {self.base_url} ended before the reply was complete. Nothing "
                "was applied; try again.",
                base_url=self.base_url,
            )

    def _deltas(self, values: list[bytes], seen: Seen) -> list[ChatDelta]:
        try:
            return chat_deltas(values, seen)
        except WrongShape as wrong:
            raise self._malformed(str(wrong), MalformedStream) from None
        except ErrorEvent as error:
            raise error_from_body(error.status, error.body, self.base_url) from None

    async def probe(self, model: str | None = None) -> BackendInfo:
        """Asks the backend what it is and how large its context window is: llama.cpp's `/props`
        (`n_ctx`), `/models` (vLLM's `max_model_len`, for `model` or the first listed), Ollama's
        own API (adapters/ollama_window.py). No answer in time is tried once more."""
        timeout = min(self.timeout_s, self.probe_timeout_s or PROBE_TIMEOUT_S)
        for attempt in (1, 2):
            started = time.perf_counter()
            props, models = await asyncio.gather(
                self._client.get(f"{server_root(self.base_url)}/props", timeout=timeout),
                self._client.get(f"{self.base_url}/models", timeout=timeout),
                return_exceptions=True,
            )
            # No answer in time (the connection was accepted) outranks timing out connecting.
            timed_out = min((r for r in (props, models) if isinstance(r, httpx.TimeoutException)),
                            key=lambda error: isinstance(error, httpx.ConnectTimeout), default=None)
            if timed_out is None:
                break
            log.info("probe timed out base_url=%s attempt=%d error=%s timeout_s=%g ms=%.0f", self.base_url,
                     attempt, type(timed_out).__name__, timeout, (time.perf_counter() - started) * 1000)
        info = self._probe_info(props, models, model, timeout, timed_out)
        return await ollama_window.with_served_window(info, self._client, server_root(self.base_url), models, model,
                                                      timeout)

    def _probe_info(self, props: Any, models: Any, model: str | None, timeout: float,
                    timed_out: httpx.TimeoutException | None) -> BackendInfo:
        answers = [r for r in (props, models) if isinstance(r, httpx.Response)]
        if timed_out is not None and not answers and isinstance(timed_out, httpx.ConnectTimeout):
            return BackendInfo(self.base_url, reachable=False, timed_out=True, error=(
                f"Timed out connecting to {self.base_url} after {timeout:g} s, twice "
                f"({type(timed_out).__name__}). Check that the host is up and reachable from here "
                "and that baseUrl is right (a firewall that drops connections looks like this)."))
        if timed_out is not None:  # the connection was accepted: the server is there, but busy
            busy = (f"The backend at {self.base_url} is busy: it accepted the connection but did not "
                    f"answer within {timeout:g} s, twice ({type(timed_out).__name__}). It is running, "
                    "probably generating for other requests or loading a model; Margin probes it "
                    "again on the next request. If this lasts, check the server's load and log.")
            if not answers:
                return BackendInfo(self.base_url, reachable=True, error=busy, timed_out=True)
        elif not answers:
            if isinstance(models, httpx.HTTPError):
                error = self._transport_error(models, streaming=False)
                return BackendInfo(self.base_url, reachable=False, error=str(error))
            raise models

        kind: Any = None
        window: int | None = None
        source: str | None = None
        error_text: str | None = None
        tools: bool | None = None
        if isinstance(props, httpx.Response) and props.status_code == 200:
            try:
                data = props.json()
                n_ctx = (data.get("default_generation_settings") or {}).get("n_ctx", data.get("n_ctx"))
                if isinstance(n_ctx, int) and n_ctx > 0:
                    kind, window, source = "llama.cpp", n_ctx, "llama.cpp /props n_ctx"
                supports = (data.get("chat_template_caps") or {}).get("supports_tools")
                tools = supports if isinstance(supports, bool) else None
            except (ValueError, AttributeError):
                pass
        entries: list[dict[str, Any]] = []
        if isinstance(models, httpx.Response) and models.status_code >= 400:
            error_text = str(error_from_body(models.status_code, models.content, self.base_url))
        elif isinstance(models, httpx.Response):
            try:
                entries = [e for e in models.json().get("data", []) if isinstance(e, dict)]
            except (ValueError, AttributeError):
                pass
        # vLLM's window is per model: all are kept, and the one for `model` is context_window.
        per_model = () if window else tuple(
            (str(e["id"]), e["max_model_len"]) for e in entries
            if e.get("id") and isinstance(e.get("max_model_len"), int))
        if per_model:
            chosen = next((e for e in entries if e.get("id") == model), entries[0])
            kind, source = "vllm", "vLLM /models max_model_len"
            window = dict(per_model).get(str(chosen.get("id")))
        if kind is None and any(e.get("owned_by") == "llamacpp" for e in entries):
            kind = "llama.cpp"
        return BackendInfo(
            self.base_url, reachable=True, kind=kind or "openai-compatible", context_window=window,
            context_window_source=source, models=tuple(str(e["id"]) for e in entries if e.get("id")),
            error=busy if timed_out is not None else error_text, timed_out=timed_out is not None,
            model_windows=per_model, tools=tools,
        )
