"""Every use Margin makes of pygls' and lsprotocol's private parts, in one place: the rest of
`lsp/` calls the small, typed, documented hooks and functions below, never a private name of
either library. Checked on pygls 2.1.1 and lsprotocol 2025.0.0 (both pinned in pyproject.toml);
tests/unit/lsp/test_pygls_private.py pins what this module relies on (versions, signatures of
the methods overridden or called, attributes read, the behaviours below), so an upgrade fails
there, naming what moved, rather than in an editor.

Each use, why Margin needs it, and the change upstream that would make it unnecessary (the
numbers are referred to below):

pygls, `pygls.protocol.json_rpc.JsonRPCProtocol`

1. `_handle_request(msg_id, method_name, params)`, overridden: notes each request's method.
   pygls gives the result callback (`_send_handler_result`) only the id, and Margin's log line
   for a finished request names its method (metadata-only logs). Upstream: pass the method
   name to the result callback, or keep it on a public per-request context
   (`protocol.request_method(msg_id)`).

2. `_send_handler_result(future, *, msg_id)`, overridden: Margin answers and logs a handler's
   outcome itself (`HookedProtocol.request_done`). pygls logs every `JsonRpcException` a
   handler raises with `logger.exception` — a traceback for each expected failure (busy, over
   budget, stale, invalid params) — and reports it through `report_server_error`; Margin logs
   one metadata line for those and keeps tracebacks for real bugs. Margin also resolves its
   settings right after the `initialize` reply is written, before the next message is read
   (start-up speed: the reply needs only a pre-read). Upstream: a public, overridable
   `on_request_done(msg_id, method_name, future)` hook (or a logging policy that does not
   treat a `JsonRpcException` raised on purpose as a crash), and a hook run after a response
   is written.

3. `_handle_response(msg_id, result=None, error=None)`, overridden: a bug fix. When a request
   of the server's is given up (`asyncio.wait_for(ls.workspace_apply_edit_async(...), t)`
   timing out cancels the concurrent Future behind `send_request_async`) and the client
   answers afterwards, pygls calls `future.set_result` on the cancelled Future and
   `concurrent.futures.InvalidStateError` escapes to the read loop as a crash. Upstream fix:
   in `_handle_response`, pop the future and return (logging at debug) when `future.done()`.

4. `_handle_notification(method_name, params)`, overridden: a notification no handler takes
   is ignored with Margin's own log line (debug for `didSave`/`willSave`, which editors send
   unasked; info otherwise) where pygls logs a warning. Upstream: a public
   `on_unknown_notification(method_name)` hook, or log notifications the LSP allows a server
   to ignore (those the client sends unasked, `$/`-prefixed ones) at debug.

5. `_send_response(msg_id, result=None, error=None)`, called (`HookedProtocol.send_response`):
   answers requests pygls never dispatches — a body that is not JSON (ParseError) or nests
   deeper than Python's parser goes, and params lsprotocol cannot read (InvalidParams naming
   each field). pygls raises `JsonRpcInvalidParams` inside its read loop there, which logs a
   traceback and leaves the request unanswered: the editor waits for ever. Upstream: make
   `send_response` public (`notify` and `send_request` are), and fix the read loop to answer
   a request whose body or params cannot be read with ParseError / InvalidParams.

6. `_converter`, read (`HookedProtocol.converter`): Margin structures a message's params
   against its lsprotocol type itself, so that a failure is answered (5). Upstream: a public
   `converter` attribute (today it is reachable only as the undocumented `fm.converter`).

7. `_shutdown`, read (`HookedProtocol.shutdown_requested`): after `shutdown`, a message whose
   params cannot be read is dropped as pygls drops every message but `exit` then. Upstream: a
   public read-only `is_shut_down`, or the fix in 5.

8. `_request_futures`, read and popped by 1–3: whether a request is still running; the waiting
   Future of a request of the server's. Upstream: goes with 1–3.

9. `_server`, read (`HookedProtocol.language_server`): the protocol's server, to stop it when
   the client has gone (the transport raised BrokenPipeError or ConnectionResetError; pygls'
   `_send_data` logs a traceback and re-raises for every message it can no longer send) and to
   tell it the `initialize` reply was sent (2). Upstream: a public `server` property on the
   protocol, and a closed transport treated as the end of the connection (stop quietly).

10. `fm` (the undocumented `FeatureManager`: `features`, `builtin_features`), read
   (`HookedProtocol.handles`, `has_feature`): whether a method has a handler — to ignore
   notifications (4), to name a method in a log line only when Margin handles it (never a
   client's arbitrary string), and to register the completion menu once. Upstream: a public
   `LanguageServer.has_feature(method_name)`.

pygls, `pygls.protocol.language_server.LanguageServerProtocol` (built-in handlers: methods
found by `lsp_method`'s `method_name` attribute, generators that `yield (handler, args,
kwargs)` to run the user's handler — an undocumented protocol)

11. `lsp_initialize(params)`, overridden: Margin chooses the position encoding by its own
   preference (`core.vfs.choose_position_encoding`); pygls takes the first encoding of the
   client's list that it supports (`ServerCapabilitiesBuilder.choose_position_encoding`), so
   the list is narrowed to Margin's choice before pygls reads it. It also sets
   `capabilities.experimental` (Margin's own methods), which pygls has no way to add.
   Upstream: a `LanguageServer(position_encodings=[...])` preference list, and an
   `experimental` capabilities argument (or a hook to amend the ServerCapabilities pygls
   computed before the reply is sent).

12. `lsp_text_document__did_open`, `__did_change`, `__did_close`, overridden: pygls keeps no
   copy of open documents — Margin's store (`core.vfs`) is the one copy, positions decoded in
   the negotiated encoding — so each change is applied once, not twice. Upstream: an option
   `LanguageServer(sync_text_documents=False)` (or a pluggable workspace).

pygls, `pygls.server.JsonRPCServer` — Margin runs its own read loop (lsp/transport.py), which
answers bodies pygls' `pygls.io_.run_async` cannot read (5), and its own TCP accept loop
(lsp/tcp.py: one editor at a time, an optional token)

13. `_stop_event`, set (`new_stop_event`): pygls' `shutdown()` — which Margin calls when the
   client has gone or its connection ends — stops a read loop only through this Event. Upstream: the fix in 5 (then
   `start_io` needs no replacing), or a public `serve(reader, writer)` that runs pygls' loop
   over given streams.

14. `_server`, set (`close_on_shutdown`): the listening `asyncio.Server`, which pygls'
   `shutdown()` closes. Upstream: a hook in `start_tcp` to accept or refuse a connection and
   wrap its reader (`on_connection`), so it needs no replacing.

15. `_report_server_error(error, source)`, called (`error_reporter`): the read loop reports a
   message that crashed while being handled as pygls' own loop does (this wrapper keeps a
   failing reporter from crashing the loop). Upstream: goes with 13.

lsprotocol

16. The text of its integer validators' ValueError (`lsprotocol.validators`: "Position.line
   should be in range [0:2147483647], but was -1."), parsed (`out_of_range`): cattrs'
   `transform_error` says only "invalid value" there, and InvalidParams should say which
   rule. Upstream: raise a ValueError subclass carrying the field and bounds, or document the
   message's format.

17. Its rename of attribute names to wire names (the private `_to_camel_case` inside
   `lsprotocol._hooks`: `range_length` -> `rangeLength`, `from_` -> `from`), mirrored
   (`wire_name`): cattrs' error paths name attributes, InvalidParams names wire fields.
   Upstream: expose the rename (`lsprotocol.converters.wire_name`).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, lsp_method

if TYPE_CHECKING:
    from collections.abc import Generator

    from cattrs import Converter
    from pygls.lsp.server import LanguageServer
    from pygls.server import JsonRPCServer

PYGLS_VERSION = "2.1.1"
LSPROTOCOL_VERSION = "2025.0.0"
"""The versions this module was checked against (pinned in pyproject.toml)."""

ErrorReporter = Callable[[Exception, type], Any]


class HookedProtocol(LanguageServerProtocol):
    """pygls' LSP protocol with public hooks where Margin needs to differ (uses 1–12). A
    subclass overrides the hooks; the private methods stay here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._methods: dict[Any, str] = {}
        """the method of each request still running, for `request_done`"""

    # --- hooks --------------------------------------------------------------------------------

    def request_done(self, msg_id: Any, method: str, future: Future[Any]) -> None:
        """A request's handler has finished (or was cancelled): answer it, with
        `send_response`. By default, as pygls does."""
        LanguageServerProtocol._send_handler_result(self, future, msg_id=msg_id)

    def response_after_giving_up(self, msg_id: Any) -> None:
        """The client answered a request of the server's that is no longer awaited (its wait
        timed out or was cancelled); the answer is dropped."""

    def notification_unhandled(self, method: str) -> None:
        """A notification no handler takes; it is dropped."""

    def position_encoding_for(self, offered: list[str]) -> str:
        """The position encoding to answer `initialize` with, from those the client offers
        (their values, `utf-16` and so on, in the client's order). By default, pygls' choice:
        the first it supports, else UTF-16."""
        supported = {kind.value for kind in types.PositionEncodingKind}
        return next((e for e in offered if e in supported), types.PositionEncodingKind.Utf16.value)

    def experimental_capabilities(self) -> Any:
        """The server's `capabilities.experimental` in the `initialize` reply (None: none)."""
        return None

    # --- what the hooks and their callers use --------------------------------------------------

    def send_response(self, msg_id: Any, result: Any = None, error: types.ResponseError | None = None) -> None:
        """Answer request `msg_id` with `result`, or with `error` when one is given."""
        self._send_response(msg_id, result=result, error=error)

    @property
    def converter(self) -> Converter:
        """The cattrs converter pygls reads and writes messages with."""
        return self._converter

    @property
    def shutdown_requested(self) -> bool:
        """Whether the client has sent `shutdown` (pygls then drops every message but `exit`)."""
        return self._shutdown

    @property
    def language_server(self) -> LanguageServer:
        """The server this protocol belongs to."""
        return self._server

    def handles(self, method: str) -> bool:
        """Whether a message with `method` has a handler: pygls' own or a registered one."""
        return method == types.CANCEL_REQUEST or method in self.fm.builtin_features or method in self.fm.features

    # --- pygls' private methods (uses 1-4) -------------------------------------------------

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        self._methods[msg_id] = method_name
        super()._handle_request(msg_id, method_name, params)
        if msg_id not in self._request_futures:  # answered already, or never started (no such method)
            self._methods.pop(msg_id, None)

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        self._request_futures.pop(msg_id, None)
        self.request_done(msg_id, self._methods.pop(msg_id, "?"), future)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            del self._request_futures[msg_id]
            self.response_after_giving_up(msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if not self.handles(method_name):
            self.notification_unhandled(method_name)
            return
        super()._handle_notification(method_name, params)

    # --- pygls' built-in handlers (uses 11, 12) -------------------------------------------------

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        general = params.capabilities.general
        offered = [str(getattr(e, "value", e)) for e in (general.position_encodings or [])] if general else []
        chosen = self.position_encoding_for(offered)
        if params.capabilities.general is None:
            params.capabilities.general = types.GeneralClientCapabilities()
        # pygls answers with the first encoding it supports from this list: make that the choice.
        params.capabilities.general.position_encodings = [chosen]
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = self.experimental_capabilities()
        return result

    # Open documents are not kept by pygls: these pass straight to the registered handlers.

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


def has_feature(server: JsonRPCServer, method: str) -> bool:
    """Whether a handler for `method` has been registered with `server.feature` (use 10)."""
    return method in server.protocol.fm.features


# --- the server's read loops (uses 13-15) ---------------------------------------------------


def new_stop_event(server: JsonRPCServer) -> threading.Event:
    """A fresh Event for a read loop to watch, set by the server's `shutdown()`."""
    server._stop_event = event = threading.Event()
    return event


def close_on_shutdown(server: JsonRPCServer, listener: asyncio.Server) -> None:
    """Have the server's `shutdown()` close `listener` (the TCP server accepting editors)."""
    server._server = listener


def error_reporter(server: JsonRPCServer) -> ErrorReporter:
    """What a read loop calls with a message's unexpected error and its kind (pygls'
    `report_server_error`, kept from raising)."""
    return cast(ErrorReporter, server._report_server_error)


# --- lsprotocol (uses 16, 17) ---------------------------------------------------------------

_OUT_OF_RANGE = re.compile(r"^\w+\.(\w+) (should be in range \[[-\d]+:\d+\])")


def out_of_range(error: BaseException) -> Iterator[tuple[str, str]]:
    """The attribute and the rule of each lsprotocol integer range check that failed inside
    `error` (a cattrs error group), in the order cattrs lists them."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from out_of_range(inner)
    elif isinstance(error, ValueError) and (found := _OUT_OF_RANGE.match(str(error))) is not None:
        yield found.group(1), found.group(2)


def wire_name(attribute: str) -> str:
    """The name on the wire of an lsprotocol attribute (`range_length` -> `rangeLength`)."""
    parts = attribute.removesuffix("_").split("_")
    return parts[0] + "".join(p.title() for p in parts[1:])
