"""Reading the editor's messages: pygls' read loop (`pygls.io_.run_async`), except that a body
that cannot be read is answered. pygls logged a traceback and left it unanswered, so an editor
that sent a request nested deeper than Python's JSON parser goes (about 950 levels), or a body
that is not JSON, waited for ever. Here the request's `id` is found by a scan of the outermost
object that does not parse what nests inside it, and the request gets its error; JSON-RPC's
ParseError with a null id where no id can be found."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from pygls.exceptions import JsonRpcException

log = logging.getLogger(__name__)

_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_SPACE = re.compile(r"[ \t\r\n]*")
_SCALAR = re.compile(r'["\-0-9]')


class Reader(Protocol):
    def readline(self) -> Awaitable[bytes]: ...

    def readexactly(self, n: int) -> Awaitable[bytes]: ...


class MessageProtocol(Protocol):
    def structure_message(self, data: dict[str, Any]) -> Any: ...

    def handle_message(self, message: Any) -> None: ...

    def unreadable(self, body: bytes, error: Exception) -> None: ...


async def read_messages(stop_event: threading.Event, reader: Reader, protocol: MessageProtocol,
                        error_handler: Callable[[Exception, type], Any]) -> None:
    """Read messages framed by Content-Length headers until the stream ends or `stop_event`."""
    content_length = 0
    while not stop_event.is_set():
        header = await reader.readline()
        if not header:
            break
        if not content_length:
            match = _CONTENT_LENGTH.fullmatch(header)
            if match:
                content_length = int(match.group(1))
        if content_length and not header.strip():
            body = await reader.readexactly(content_length)
            content_length = 0
            if not body:
                break
            try:
                message = json.loads(body, object_hook=protocol.structure_message)
            except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, or nested too deep
                protocol.unreadable(body, error)
                continue
            try:
                protocol.handle_message(message)
            except Exception as error:  # a bug: as pygls does, logged and reported
                log.exception("message not handled")
                error_handler(error, JsonRpcException)


def top_level(body: bytes, keys: Iterable[str]) -> dict[str, Any]:
    """The string and number values of `keys` in the outermost JSON object of `body`, found by
    a scan that skips strings and counts brackets: nothing nested is parsed, so any depth of
    nesting (and any damage after the values) leaves them readable."""
    wanted = set(keys)
    text = body.decode("utf-8", "replace")
    found: dict[str, Any] = {}
    depth, at = 0, 0
    while at < len(text) and len(found) < len(wanted):
        char = text[at]
        if char == '"':
            string = _STRING.match(text, at)
            if string is None:
                break
            at = string.end()
            colon = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if depth == 1 and text.startswith(":", colon):
                key = json.loads(string.group())
                value_at = _SPACE.match(text, colon + 1).end()  # type: ignore[union-attr]
                if key in wanted and _SCALAR.match(text, value_at):
                    try:
                        value, at = json.JSONDecoder().raw_decode(text, value_at)
                    except ValueError:
                        break
                    if isinstance(value, (str, int)) and not isinstance(value, bool):
                        found.setdefault(key, value)
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        at += 1
    return found
