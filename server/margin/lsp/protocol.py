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
from concurrent.futures import Future
from typing import Any, Awaitable, Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcRequestCancelled
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    LanguageServerProtocol,
    default_converter,
    lsp_method,
)

from margin.core.vfs import PositionEncoding, choose_position_encoding

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
            log.info("request cancelled id=%s method=%s", msg_id, method)
            error = JsonRpcRequestCancelled(f'Request with id "{msg_id}" is canceled')
            self._send_response(msg_id, error=error.to_response_error())
            return
        exception = future.exception()
        if exception is None:
            try:
                self._send_response(msg_id, result=future.result())
                return
            except Exception as unsendable:  # a result that cannot be serialised: a bug
                exception = unsendable
        if isinstance(exception, JsonRpcException):
            level = logging.INFO if isinstance(exception, JsonRpcRequestCancelled) else logging.WARNING
            log.log(level, "request failed id=%s method=%s code=%s error=%s", msg_id, method, exception.code,
                    type(exception).__name__)
            self._send_response(msg_id, error=exception.to_response_error())
            return
        log.error("request crashed id=%s method=%s", msg_id, method, exc_info=exception)
        error = JsonRpcInternalError.of((type(exception), exception, exception.__traceback__))
        self._send_response(msg_id, error=error.to_response_error())

    def _handle_notification(self, method_name: str, params: Any) -> None:
        known = method_name == types.CANCEL_REQUEST or method_name in self.fm.builtin_features \
            or method_name in self.fm.features
        if not known:
            if method_name in QUIETLY_IGNORED:
                log.debug("ignoring notification method=%s", method_name)
            else:
                log.info("ignoring notification method=%s: Margin does not handle it", method_name)
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
