"""The shapes of OpenAI-compatible answers that are not whole chat replies: usage, tool-call
pieces, and a streamed completion joined into the answer the same request gets unstreamed; and
the end of a stream, read so that its connection is reused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from margin.core.llm import ChatDelta, ToolCallDelta, Usage, joined


def usage_of(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    return Usage(
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
    )


def arguments_text(raw: Any) -> str:
    """A call's arguments as JSON text (some servers send an object instead of its text)."""
    return raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {})


def call_piece(position: int, piece: Any) -> ToolCallDelta:
    """One streamed piece of a tool call (`index` missing: its place in the list)."""
    function = piece.get("function") or {}
    index = piece.get("index", position)
    arguments = function.get("arguments")
    return ToolCallDelta(index if isinstance(index, int) else position, piece.get("id") or None,
                         function.get("name") or None, "" if arguments is None else arguments_text(arguments))


def sse_answer(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The events of a streamed completion joined into the answer the same request gets
    unstreamed, or None when the stream never said it was done. Three shapes: llama.cpp's own
    (`/infill`: `content` pieces, the last with `stop: true`), OpenAI's completions (`choices[0]
    .text`) and chat-shaped ones (Mistral's `/fim/completions`: `choices[0].delta.content`)."""
    if any("content" in event and "choices" not in event for event in events):
        last = events[-1]
        if last.get("stop") is not True:
            return None
        return {**last, "content": joined([str(e.get("content") or "") for e in events])}
    texts: list[str] = []
    chat, finish, usage = False, None, None
    for event in events:
        usage = event.get("usage") or usage
        choices = event.get("choices")
        for choice in choices[:1] if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            chat = chat or isinstance(delta, dict)
            texts.append(str((delta.get("content") if isinstance(delta, dict) else choice.get("text")) or ""))
            finish = choice.get("finish_reason") or finish
    if finish is None:
        return None
    text = joined(texts)
    choice = {"index": 0, "finish_reason": finish, **({"message": {"role": "assistant", "content": text}}
                                                       if chat else {"text": text})}
    fields = {key: value for event in events for key, value in event.items() if key != "choices"}
    return {**fields, "choices": [choice], **({"usage": usage} if usage else {})}


DRAIN_S = 0.05
"""How long the end of a stream's body is waited for after its `[DONE]` (see `drain`)."""


class EventData:
    """The value of each `data:` line of an event stream, stripped, fed the body's chunks (the
    lines end in LF, CRLF or CR, as httpx's `aiter_lines` splits them). Lines are split a chunk at
    a time and decoded only as JSON, not line by line through a text decoder: a backend streams a
    chunk a token, and this is most of what reading one costs. Other lines (blank separators,
    comments, `event:`, `id:`) are passed over."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The values of the lines this chunk ends."""
        lines = (self._rest + chunk if self._rest else chunk).splitlines(keepends=True)
        self._rest = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]

    def end(self) -> list[bytes]:
        """The value of a last line the body did not end."""
        rest, self._rest = self._rest, b""
        return [rest[5:].strip()] if rest.startswith(b"data:") else []


async def event_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`EventData` over a body's chunks."""
    split = EventData()
    async for chunk in chunks:
        for data in split.feed(chunk):
            yield data
    for data in split.end():
        yield data


_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""what `json.loads` ends in (set by JSONDecoder.__init__; typeshed does not declare it)"""
_EDGES = " \t\n\r\ufeff"


def json_of(data: bytes) -> Any:
    """An event's JSON; bytes that are not UTF-8 read as a text decoder reads them (U+FFFD).

    An event is UTF-8 JSON with nothing around it, a hundred times a reply: it goes straight to
    the scanner `json.loads` ends in (half the time of the whole call, which first works out the
    bytes' encoding and skips whitespace in Python). Anything else takes `json.loads`' own way;
    the value or the error is the same either way (tests/unit/adapters/test_stream_shapes.py)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = ""
    if text and text[0] not in _EDGES and text[-1] not in _EDGES:
        try:
            value, end = _scan(text, 0)
        except StopIteration as stop:
            raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
        return value
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        return json.loads(data.decode("utf-8", "replace"))


class WrongShape(ValueError):
    """An event that is not a chat completion's: the message says what it was."""


class ErrorEvent(Exception):
    """An event that reports an error, with its status code (500 when it gives none)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status, self.body = status, body


@dataclass(slots=True)
class Seen:
    """What a chat stream's events have said so far."""

    events: int = 0
    finished: bool = False
    """a finish reason came"""
    done: bool = False
    """`[DONE]` came: what follows is not read"""


def chat_deltas(values: list[bytes], seen: Seen) -> list[ChatDelta]:
    """The deltas of a chat stream's events (the `data:` values a chunk ended), up to `[DONE]`;
    an event with nothing in it gives none."""
    deltas = []
    for data in values:
        if data == b"[DONE]":
            seen.done = True
            break
        seen.events += 1
        try:
            chunk = json_of(data)
        except ValueError:
            raise WrongShape("a stream chunk that is not JSON") from None
        if not isinstance(chunk, dict):
            raise WrongShape("a stream chunk that is not an object")
        if "error" in chunk:
            status = chunk["error"].get("code") if isinstance(chunk["error"], dict) else None
            raise ErrorEvent(status if isinstance(status, int) else 500, chunk)
        calls: tuple[ToolCallDelta, ...] = ()
        text, finish_reason = "", None
        if choices := chunk.get("choices"):
            try:
                choice = choices[0]
                delta = choice.get("delta") or {}
                text = delta.get("content") or ""
                finish_reason = choice.get("finish_reason")
                calls = tuple(call_piece(i, piece) for i, piece in enumerate(delta.get("tool_calls") or ()))
            except (AttributeError, KeyError, TypeError, ValueError):
                raise WrongShape("a stream chunk of the wrong shape") from None
        usage = usage_of(chunk.get("usage"))
        seen.finished = seen.finished or finish_reason is not None
        if text or finish_reason or usage or calls:
            deltas.append(ChatDelta(text, finish_reason, usage, calls))
    return deltas


async def drain(lines: AsyncIterator[Any]) -> None:
    """Read what follows a stream's `[DONE]` — the end of its body, normally in the same packet —
    so that the connection goes back to httpx's pool for the next request (a response closed
    unread has its connection closed: a new TCP connection a request). A backend that keeps the
    body open after `[DONE]` is not waited for: its connection is closed, as before."""
    try:
        async with asyncio.timeout(DRAIN_S):
            async for _line in lines:
                pass
    except TimeoutError:
        pass
