"""Reading the editor's messages: pygls' read loop (`pygls.io_.run_async`), except that a body
that cannot be read is answered. pygls logged a traceback and left it unanswered, so an editor
that sent a request nested deeper than Python's JSON parser goes (about 950 levels), or a body
that is not JSON, waited for ever. Here the request's `id` is found by a scan of the outermost
object that does not parse what nests inside it, and the request gets its error; JSON-RPC's
ParseError with a null id where no id can be found."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, BinaryIO, Protocol

from pygls.exceptions import JsonRpcException

log = logging.getLogger(__name__)

_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_SPACE = re.compile(r"[ \t\r\n]*")
_SCALAR = re.compile(r'["\-0-9]')


class Reader(Protocol):
    def readline(self) -> Awaitable[bytes]: ...

    def readexactly(self, n: int) -> Awaitable[bytes]: ...


class PipeReader:
    """The editor's byte stream (stdin) read by a thread of its own, a chunk as it comes, into a
    buffer the event loop takes header lines and bodies from: one hand-over to the loop a chunk
    (a message, mostly). pygls' StdinAsyncReader runs each line and body read in a worker thread:
    three hand-overs a message, each a wake-up of the loop, more than the rest of a small
    request costs on a loaded machine. The stream's file is left as it is (blocking: stdin and
    stdout may be one terminal or socket). The thread stops reading while more than `limit`
    bytes wait unread and the loop needs none of them (the editor's writes then wait, as on a
    full pipe)."""

    CHUNK = 1 << 16

    def __init__(self, stream: BinaryIO, limit: int = 1 << 22) -> None:
        self._stream = stream
        self._limit = limit
        self._buffer = bytearray()
        self._scanned = 0
        """the buffer has no line end before this"""
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._room = threading.Event()
        self._room.set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def readline(self) -> bytes:
        """The next line with its end, or what is left at the end of the stream."""
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                return self._take(end + 1)
            self._scanned = len(self._buffer)
            if self._eof:
                return self._take(len(self._buffer))
            await self._more()

    async def readexactly(self, n: int) -> bytes:
        """The next `n` bytes, or fewer at the end of the stream."""
        while len(self._buffer) < n and not self._eof:
            await self._more()
        return self._take(n)

    def _take(self, n: int) -> bytes:
        taken = bytes(self._buffer[:n])
        del self._buffer[:n]
        self._scanned = max(0, self._scanned - n)
        if len(self._buffer) <= self._limit:
            self._room.set()
        return taken

    async def _more(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            threading.Thread(target=self._read, args=(self._loop,), name="margin-stdin", daemon=True).start()
        self._waiter = self._loop.create_future()
        self._room.set()  # what is buffered is not enough: read on whatever the limit
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        read = getattr(self._stream, "read1", None) or self._stream.read
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a stream with no file: as it reads
            # the file itself, not its buffered reader, whose lock a thread still reading at exit
            # would hold while the interpreter closes the stream ("could not acquire lock")
            fd = self._stream.fileno()
            read = functools.partial(os.read, fd)
        try:
            while True:
                self._room.wait()
                chunk = read(self.CHUNK)
                if not chunk:
                    break
                loop.call_soon_threadsafe(self._feed, chunk)
        except (OSError, ValueError, RuntimeError):  # the stream or the loop closed
            pass
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._feed, b"")

    def _feed(self, chunk: bytes) -> None:
        if chunk:
            self._buffer += chunk
            if len(self._buffer) > self._limit:
                self._room.clear()
        else:
            self._eof = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


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
