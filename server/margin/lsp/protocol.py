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
from concurrent.futures import Future
from typing import Any, Awaitable, Callable, Iterator

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
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    LanguageServerProtocol,
    default_converter,
    lsp_method,
)

from margin import logs
from margin.core.vfs import PositionEncoding, choose_position_encoding
from margin.lsp.transport import top_level

log = logging.getLogger(__name__)

CUSTOM_METHODS = ["margin/status", "margin/chat", "margin/explain", "margin/history", "margin/recall", "margin/threads",
                  "margin/newThread", "margin/deleteThread", "margin/remember", "margin/forget", "margin/memories",
                  "margin/editOps", "margin/applyOps"]
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
_OUT_OF_RANGE = re.compile(r"^\w+\.(\w+) (should be in range \[[-\d]+:\d+\])")


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


def _camel(name: str) -> str:
    """A field's name on the wire (lsprotocol's own renaming of its attributes)."""
    parts = name.removesuffix("_").split("_")
    return parts[0] + "".join(p.title() for p in parts[1:])


def unreadable_fields(error: Exception) -> str:
    """Why lsprotocol could not read a message's params, each problem named by its field's
    path on the wire (`range.start.line: should be in range [0:2147483647]`)."""
    if not isinstance(error, BaseValidationError):
        return f"params: could not be read ({type(error).__name__})"
    out_of_range = list(_out_of_range(error))
    problems = []
    lines = transform_error(error)
    for line in lines[:MAX_PROBLEMS]:
        what, _, where = line.rpartition(" @ ")
        path = [_camel(name) if name else index for name, index in _PATH_PART.findall(where.removeprefix("$"))]
        if path[:1] == ["params"]:
            path = path[1:]
        if what == "invalid value" and out_of_range:  # a validator's: lsprotocol's integer ranges
            field, what = out_of_range.pop(0)
            path.append(_camel(field))
        problems.append(f"{'.'.join(path) or 'params'}: {what}")
    if len(lines) > MAX_PROBLEMS:
        problems.append(f"and {len(lines) - MAX_PROBLEMS} more")
    return "; ".join(problems)


def _out_of_range(error: BaseException) -> Iterator[tuple[str, str]]:
    """The field and the rule of each range check that failed, in the order cattrs lists them."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _out_of_range(inner)
    elif isinstance(error, ValueError) and (found := _OUT_OF_RANGE.match(str(error))) is not None:
        yield found.group(1), found.group(2)


class MarginProtocol(LanguageServerProtocol):
    """pygls' protocol with Margin's position-encoding choice, without pygls' own copy of open
    documents, quiet when the client goes away, and with metadata-only logs of failed requests."""

    position_encoding: PositionEncoding = PositionEncoding.UTF16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._methods: dict[Any, str] = {}
        """the method of each request still running, for its log line"""

    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        super().set_writer(ClientWriter(writer, self._client_gone), include_headers)

    def _client_gone(self) -> None:
        log.info("the client closed the connection; stopping")
        self._server.shutdown()

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
        shown = method if isinstance(method, str) and self._handles(method) else "?"
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
        self._send_response(found.get("id"), error=answer.to_response_error())

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
            structured = self._converter.structure(message, message_type)
        except Exception as error:
            if self._shutdown:
                return
            problems = unreadable_fields(error)
            if "id" not in message:
                log.warning("notification not handled method=%s: invalid params problems=%d", method,
                            problems.count("; ") + 1)
                return
            invalid = JsonRpcInvalidParams(f"{method}: invalid params: {problems}")
            log.warning("request failed id=%s method=%s code=%s error=%s", logs.name(message["id"]), method,
                        invalid.code, type(invalid).__name__)
            self._send_response(message["id"], error=invalid.to_response_error())
            return
        super().handle_message(structured)

    # --- logging what happened to each message ---------------------------------------------

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        self._methods[msg_id] = method_name
        super()._handle_request(msg_id, method_name, params)
        if msg_id not in self._request_futures:  # answered already, or never started (no such method)
            self._methods.pop(msg_id, None)

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        """The handler's result, or its error, as the response. Expected failures are logged
        as one line; an unexpected exception, a bug, with its traceback."""
        self._request_futures.pop(msg_id, None)
        method = self._methods.pop(msg_id, "?")
        if future.cancelled():
            log.info("request cancelled id=%s method=%s", logs.name(msg_id), method)
            error = JsonRpcRequestCancelled(f'Request with id "{msg_id}" is canceled')
            self._send_response(msg_id, error=error.to_response_error())
            return
        exception = future.exception()
        if exception is None:
            try:
                self._send_response(msg_id, result=future.result())
            except Exception as unsendable:  # a result that cannot be serialised: a bug
                exception = unsendable
            else:
                if method == types.INITIALIZE:
                    self._server.initialize_answered()  # type: ignore[attr-defined]
                return
        if isinstance(exception, JsonRpcException):
            level = logging.INFO if isinstance(exception, JsonRpcRequestCancelled) else logging.WARNING
            log.log(level, "request failed id=%s method=%s code=%s error=%s", logs.name(msg_id), method,
                    exception.code, type(exception).__name__)
            self._send_response(msg_id, error=exception.to_response_error())
            return
        log.error("request crashed id=%s method=%s", logs.name(msg_id), method, exc_info=exception)
        error = JsonRpcInternalError.of((type(exception), exception, exception.__traceback__))
        self._send_response(msg_id, error=error.to_response_error())

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """The client's answer to a request of Margin's. One that comes after Margin gave up
        waiting (applyEditTimeoutS) is dropped: pygls would set the result of the cancelled wait
        and log InvalidStateError."""
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            del self._request_futures[msg_id]
            log.info("answer after the request was given up id=%s", logs.name(msg_id))
            return
        super()._handle_response(msg_id, result, error)

    def _handles(self, method: str) -> bool:
        return method == types.CANCEL_REQUEST or method in self.fm.builtin_features or method in self.fm.features

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if not self._handles(method_name):
            if method_name in QUIETLY_IGNORED:
                log.debug("ignoring notification method=%s", logs.name(method_name))
            else:
                log.info("ignoring notification method=%s: Margin does not handle it", logs.name(method_name))
            return
        super()._handle_notification(method_name, params)

    # --- LSP methods pygls handles itself, changed ------------------------------------------

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        general = params.capabilities.general
        offered = [str(getattr(e, "value", e)) for e in (general.position_encodings or [])] if general else []
        self.position_encoding = choose_position_encoding(offered)
        if params.capabilities.general is None:
            params.capabilities.general = types.GeneralClientCapabilities()
        # pygls answers with the first encoding it supports from this list: make that ours.
        params.capabilities.general.position_encodings = [self.position_encoding.value]
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {"margin": {"methods": CUSTOM_METHODS}}
        return result

    # Open documents live in Margin's own store (core.vfs): these pass straight to its handlers.

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None
