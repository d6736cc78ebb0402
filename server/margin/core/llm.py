"""What a model backend is to Margin: the port (`LLMProvider`), chat requests, replies and stream
deltas (fill-in-the-middle calls are `core.fim`'s), what a probe of the backend learns, and the
one hierarchy of errors a backend can raise.

Errors (every one is a `ProviderError`; `kind` is a stable short name for logs):

    ProviderError
    ├── BackendUnreachable      nothing answers at baseUrl (refused, DNS, TLS)      "unreachable"
    ├── BackendTimeout          no answer, or a stalled stream, within timeoutS     "timeout"
    ├── BackendHTTPError        an HTTP error status from the backend               "http_status"
    │   ├── ContextTooLarge     the prompt does not fit the model's window          "context_too_large"
    │   └── NotSupported        the backend does not offer that endpoint or feature "not_supported"
    │                           (404/405/501, or llama.cpp's `not_supported_error`)
    └── MalformedResponse       a reply that is not the OpenAI shape                "malformed_response"
        └── MalformedStream     a stream with a broken chunk, or cut before the end "malformed_stream"

Messages say what happened and what to do; they never include prompt or reply text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # core.fim builds on this module's types
    from margin.core.fim import FimReply, FimRequest

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for: its id (answered by a `tool` message with that id), the
    function's name and its arguments as the model wrote them (JSON text, not yet checked)."""

    id: str
    name: str
    arguments: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    """an assistant message's calls"""
    tool_call_id: str | None = None
    """a `tool` message: the call it answers"""

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            body["tool_calls"] = [call.as_json() for call in self.tool_calls]
        if self.tool_call_id is not None:
            body["tool_call_id"] = self.tool_call_id
        return body


@dataclass(frozen=True)
class ChatRequest:
    messages: Sequence[ChatMessage]
    max_tokens: int
    temperature: float
    model: str | None = None
    response_format: dict[str, Any] | None = None
    """OpenAI `response_format`, e.g. {"type": "json_schema", "json_schema": {...}}."""
    tools: Sequence[dict[str, Any]] = ()
    """OpenAI `tools` (function definitions) the model may call"""
    tool_choice: Literal["auto", "none"] | None = None
    """with `tools`: "none" shows them but lets the model only answer"""


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class ChatReply:
    content: str
    finish_reason: str | None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


def joined(pieces: Sequence[str]) -> str:
    """The pieces of a streamed reply as one text: a surrogate pair split across two pieces (JSON
    `\\ud83d` escapes) joined again, a lone surrogate replaced by U+FFFD — what is stored and
    shown must be valid Unicode (SQLite refuses it otherwise)."""
    return "".join(pieces).encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass(frozen=True, slots=True)
class ChatDelta:
    """A piece of a streamed reply. The last delta of a stream carries `finish_reason` (and
    `usage` when the backend reports it)."""

    text: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None
    tool_calls: tuple[ToolCallDelta, ...] = ()
    """pieces of tool calls: joined by `index` (core.llm.ToolCalls)"""


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a streamed tool call: the first piece of a call has its id and name, the
    arguments come in fragments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class ToolCalls:
    """The tool calls of a streamed reply, joined from their pieces."""

    def __init__(self) -> None:
        self._calls: dict[int, list[str]] = {}

    def add(self, pieces: Sequence[ToolCallDelta]) -> None:
        for piece in pieces:
            call = self._calls.setdefault(piece.index, ["", "", ""])
            call[0] = piece.id or call[0]
            call[1] = piece.name or call[1]
            call[2] += piece.arguments

    def calls(self) -> tuple[ToolCall, ...]:
        """The calls in order; one with no id gets one (`call_<index>`), as some servers omit it."""
        return tuple(ToolCall(call[0] or f"call_{index}", call[1], call[2])
                     for index, call in sorted(self._calls.items()))


BackendKind = Literal["llama.cpp", "vllm", "openai-compatible"]


@dataclass(frozen=True)
class BackendInfo:
    """What a probe of a backend learned. `context_window` is None when the backend does not
    say; `error` is a person-readable reason when it did not answer as expected. `timed_out`:
    the probe got no answer in time, so these facts are not worth keeping. With `reachable` it
    means busy (the connection was accepted); without, it means connecting timed out.
    `model_windows` are the per-model windows the backend lists (vLLM's `max_model_len`), when
    that is where its window comes from; `window_for` picks one for a model."""

    base_url: str
    reachable: bool
    kind: BackendKind | None = None
    context_window: int | None = None
    context_window_source: str | None = None
    models: tuple[str, ...] = ()
    error: str | None = None
    timed_out: bool = False
    model_windows: tuple[tuple[str, int], ...] = ()
    tools: bool | None = None
    """whether the backend takes tool calls: llama.cpp says so for its chat template
    (`chat_template_caps.supports_tools`); None where the backend does not say"""
    silent_cut: bool = False
    """a prompt past `context_window` is cut by the server without a word (Ollama), not refused:
    the window is then a ceiling for a window the user set too (services/backends.py)"""

    def window_for(self, model: str | None) -> tuple[int | None, str | None]:
        """The window the backend reports for `model`, and where it says so: the model's own
        entry in `model_windows` when there is one, else the backend's `context_window`."""
        for name, window in self.model_windows:
            if name == model:
                return window, self.context_window_source
        return self.context_window, self.context_window_source


class LLMProvider(Protocol):
    """An OpenAI-compatible model backend: chat, and fill-in-the-middle completion."""

    async def complete(self, request: ChatRequest) -> ChatReply: ...

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatDelta]: ...

    async def probe(self, model: str | None = None) -> BackendInfo: ...

    async def fill(self, request: FimRequest) -> FimReply:
        """The text for a fill-in-the-middle hole, asked on `request.route` (core.fim), within
        the provider's timeout, with the same typed errors."""
        ...

    async def aclose(self) -> None: ...


class ProviderError(Exception):
    kind = "provider_error"

    def __init__(self, message: str, *, base_url: str | None = None) -> None:
        super().__init__(message)
        self.base_url = base_url


class BackendUnreachable(ProviderError):
    kind = "unreachable"


class BackendTimeout(ProviderError):
    kind = "timeout"

    def __init__(self, message: str, *, timeout_s: float, base_url: str | None = None) -> None:
        super().__init__(message, base_url=base_url)
        self.timeout_s = timeout_s


class BackendHTTPError(ProviderError):
    kind = "http_status"

    def __init__(self, message: str, *, status: int, base_url: str | None = None) -> None:
        super().__init__(message, base_url=base_url)
        self.status = status


class ContextTooLarge(BackendHTTPError):
    """The backend refused the prompt as larger than its context window. Either size may be
    unknown when the backend does not state it."""

    kind = "context_too_large"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        prompt_tokens: int | None,
        context_window: int | None,
        base_url: str | None = None,
    ) -> None:
        super().__init__(message, status=status, base_url=base_url)
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window


class NotSupported(BackendHTTPError):
    """The backend does not offer the endpoint or feature asked for (e.g. llama.cpp's /infill
    for a model without fill-in-the-middle tokens): worth remembering, not retrying."""

    kind = "not_supported"


class MalformedResponse(ProviderError):
    kind = "malformed_response"


class MalformedStream(MalformedResponse):
    kind = "malformed_stream"
