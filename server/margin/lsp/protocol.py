"""The protocol plumbing under Margin's handlers: pygls' JSON-RPC protocol with Margin's
position-encoding choice, plain-JSON params for Margin's own methods, a transport that stops
quietly when the editor goes away, and logs that tell a person's mistake from a bug.

Logging: a request that fails in a way Margin expects (bad params, busy, over budget, stale,
cancelled — any JSON-RPC error a handler raises) is one metadata line at INFO or WARNING; only
an unexpected exception gets a traceback, at ERROR. Notifications Margin does not handle are
ignored with their method name logged (`didSave`, which some editors send although Margin does
not ask for it, without a word).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from cattrs.errors import BaseValidationError
from cattrs.v import transform_error
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcParseError,
    JsonRpcRequestCancelled,
)
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, default_converter

from margin import logs
from margin.core.vfs import PositionEncoding, choose_position_encoding
from margin.lsp import methods
from margin.lsp.pygls_private import HookedProtocol, out_of_range, wire_name
from margin.lsp.transport import top_level

if TYPE_CHECKING:
    from margin.lsp.server import MarginLanguageServer

log = logging.getLogger(__name__)

CUSTOM_METHODS = methods.request_names()
"""Margin's own requests this server answers (advertised under capabilities.experimental)."""

QUIETLY_IGNORED = frozenset({types.TEXT_DOCUMENT_DID_SAVE, types.TEXT_DOCUMENT_WILL_SAVE})
"""Notifications editors send whether or not the server asked for them."""


def margin_converter():
    """pygls' converter, except that params of methods lsprotocol does not know (Margin's own),
    and of inline completion, stay plain JSON, to be validated by pydantic models."""
    converter = default_converter()

    def keep_json(obj: dict[str, Any], cls: type) -> Any:
        fields = {"method": obj.get("method"), "jsonrpc": obj.get("jsonrpc"), "params": obj.get("params")}
        if cls is not JsonRPCNotification:
            fields["id"] = obj.get("id")
        return cls(**fields)

    converter.register_structure_hook(JsonRPCRequestMessage, keep_json)
    # Inline completion's params are read by Margin too: clients add the document's version.
    converter.register_structure_hook(types.InlineCompletionRequest, keep_json)
    converter.register_structure_hook(JsonRPCNotification, keep_json)
    return converter


class ClientWriter:
    """The transport to the client. Editors often quit without waiting for the reply to
    `shutdown`; when the client has gone, the server stops quietly instead of logging a
    traceback for every message it can no longer send."""

    def __init__(self, writer: Any, on_gone: Callable[[], None]) -> None:
        self._writer = writer
        self._on_gone = on_gone
        self.gone = False

    def write(self, data: bytes) -> Any:
        if self.gone:
            return None
        try:
            result = self._writer.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.gone = True
            self._on_gone()
            return None
        if inspect.isawaitable(result):
            return self._guard(result)
        return result

    async def _guard(self, pending: Awaitable[Any]) -> None:
        try:
            await pending
        except (BrokenPipeError, ConnectionResetError):
            if not self.gone:
                self.gone = True
                self._on_gone()

    def close(self) -> Any:
        try:
            return self._writer.close()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            return None


_PATH_PART = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")


MAX_PROBLEMS = 10
"""problems named in one InvalidParams message (a string where a list was expected can make
one per character)"""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole_characters(value: Any) -> Any:
    """A string with lone surrogates as U+FFFD; a list with its strings (at any depth; objects
    are done by the hook) so, in place."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    lists = [value]
    while lists:
        items = lists.pop()
        for index, item in enumerate(items):
            if isinstance(item, str) and _LONE_SURROGATE.search(item):
                items[index] = _LONE_SURROGATE.sub("\ufffd", item)
            elif isinstance(item, list):
                lists.append(item)
    return value


def unreadable_fields(error: Exception) -> str:
    """Why lsprotocol could not read a message's params, each problem named by its field's
    path on the wire (`range.start.line: should be in range [0:2147483647]`)."""
    if not isinstance(error, BaseValidationError):
        return f"params: could not be read ({type(error).__name__})"
    ranges = list(out_of_range(error))
    problems = []
    lines = transform_error(error)
    for line in lines[:MAX_PROBLEMS]:
        what, _, where = line.rpartition(" @ ")
        path = [wire_name(name) if name else index for name, index in _PATH_PART.findall(where.removeprefix("$"))]
        if path[:1] == ["params"]:
            path = path[1:]
        if what == "invalid value" and ranges:  # a validator's: lsprotocol's integer ranges
            field, what = ranges.pop(0)
            path.append(wire_name(field))
        problems.append(f"{'.'.join(path) or 'params'}: {what}")
    if len(lines) > MAX_PROBLEMS:
        problems.append(f"and {len(lines) - MAX_PROBLEMS} more")
    return "; ".join(problems)


class MarginProtocol(HookedProtocol):
    """pygls' protocol with Margin's position-encoding choice, without pygls' own copy of open
    documents (lsp/pygls_private.py), quiet when the client goes away, and with metadata-only
    logs of failed requests."""

    position_encoding: PositionEncoding = PositionEncoding.UTF16

    @property
    def server(self) -> MarginLanguageServer:
        return cast("MarginLanguageServer", self.language_server)

    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        super().set_writer(ClientWriter(writer, self._client_gone), include_headers)

    def _client_gone(self) -> None:
        log.info("the client closed the connection; stopping")
        self.server.shutdown()

    # --- reading each message ------------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        """json.loads' object hook, called for every JSON object of a message, innermost first:
        everything stays plain JSON here, and `handle_message` reads the message as a whole — so
        an object inside params that looks like a JSON-RPC message is data, not a message.

        JSON can carry half a UTF-16 surrogate pair; UTF-8 (HTTP bodies, SQLite, files) cannot.
        Margin reads one as U+FFFD, as editors write it to disk: one UTF-16 unit and three UTF-8
        bytes either way, so no position moves."""
        for key, value in data.items():
            if isinstance(value, (str, list)):
                data[key] = _whole_characters(value)
        if any(_LONE_SURROGATE.search(key) for key in data):
            return {_whole_characters(key): value for key, value in data.items()}
        return data

    def unreadable(self, body: bytes, error: Exception) -> None:
        """A message Python's JSON parser cannot read: not JSON, not UTF-8, or nested deeper than
        it goes. A request is answered, its id found by a scan (lsp/transport.py): InvalidParams
        when only the depth was the problem, else ParseError — with a null id, as JSON-RPC asks,
        when the body is not JSON and no id is found. A notification is dropped with a log line."""
        found = top_level(body, ("id", "method"))
        method = found.get("method")
        shown = method if isinstance(method, str) and self.handles(method) else "?"
        deep = isinstance(error, RecursionError)
        log.warning("message not readable method=%s bytes=%d: %s", shown, len(body),
                    "nested too deeply" if deep else "not JSON")
        if "id" not in found and (deep or "method" in found):
            return  # a notification
        if deep:
            answer: JsonRpcException = JsonRpcInvalidParams(
                f"{shown}: invalid params: nested too deeply to read (the limit is about 950 levels)")
        else:
            answer = JsonRpcParseError(f"the message is not JSON Margin can read: {type(error).__name__}")
        self.send_response(found.get("id"), error=answer.to_response_error())

    def handle_message(self, message: Any) -> None:
        """A message read whole. Params lsprotocol cannot read (wrong types, missing fields, out
        of range) answer a request with InvalidParams naming the fields, and drop a notification
        with one log line; pygls would log a traceback and leave the request unanswered."""
        if not isinstance(message, dict) or "jsonrpc" not in message:
            log.warning("ignoring a message that is not JSON-RPC")
            return
        method = message.get("method")
        message_type = self.get_message_type(method) if isinstance(method, str) else None
        if message_type is None or "error" in message:
            super().handle_message(super().structure_message(message))
            return
        try:
            structured = self.converter.structure(message, message_type)
        except Exception as error:  # noqa: BLE001 - any failure to read the params is the client's
            if self.shutdown_requested:
                return
            problems = unreadable_fields(error)
            if "id" not in message:
                log.warning("notification not handled method=%s: invalid params problems=%d", method,
                            problems.count("; ") + 1)
                return
            invalid = JsonRpcInvalidParams(f"{method}: invalid params: {problems}")
            log.warning("request failed id=%s method=%s code=%s error=%s", logs.name(message["id"]), method,
                        invalid.code, type(invalid).__name__)
            self.send_response(message["id"], error=invalid.to_response_error())
            return
        super().handle_message(structured)

    # --- logging what happened to each message ---------------------------------------------

    def request_done(self, msg_id: Any, method: str, future: Future[Any]) -> None:
        """The handler's result, or its error, as the response. Expected failures are logged
        as one line; an unexpected exception, a bug, with its traceback."""
        if future.cancelled():
            log.info("request cancelled id=%s method=%s", logs.name(msg_id), method)
            error = JsonRpcRequestCancelled(f'Request with id "{msg_id}" is canceled')
            self.send_response(msg_id, error=error.to_response_error())
            return
        exception = future.exception()
        if exception is None:
            try:
                self.send_response(msg_id, result=future.result())
            except Exception as unsendable:  # noqa: BLE001 - a result that cannot be serialised: a bug
                exception = unsendable
            else:
                if method == types.INITIALIZE:
                    self.server.initialize_answered()
                return
        if isinstance(exception, JsonRpcException):
            level = logging.INFO if isinstance(exception, JsonRpcRequestCancelled) else logging.WARNING
            log.log(level, "request failed id=%s method=%s code=%s error=%s", logs.name(msg_id), method,
                    exception.code, type(exception).__name__)
            self.send_response(msg_id, error=exception.to_response_error())
            return
        log.error("request crashed id=%s method=%s", logs.name(msg_id), method, exc_info=exception)
        error = JsonRpcInternalError.of((type(exception), exception, exception.__traceback__))
        self.send_response(msg_id, error=error.to_response_error())

    def response_after_giving_up(self, msg_id: Any) -> None:
        """The client's answer to a request of Margin's that came after Margin gave up waiting
        (applyEditTimeoutS): dropped."""
        log.info("answer after the request was given up id=%s", logs.name(msg_id))

    def notification_unhandled(self, method: str) -> None:
        if method in QUIETLY_IGNORED:
            log.debug("ignoring notification method=%s", logs.name(method))
        else:
            log.info("ignoring notification method=%s: Margin does not handle it", logs.name(method))

    # --- the `initialize` reply ---------------------------------------------------------------

    def position_encoding_for(self, offered: list[str]) -> str:
        self.position_encoding = choose_position_encoding(offered)
        return self.position_encoding.value

    def experimental_capabilities(self) -> Any:
        return {"margin": {"methods": CUSTOM_METHODS}}
