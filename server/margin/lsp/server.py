"""The language server: Margin's LSP adapter. Every handler is registered here, in one place,
and does nothing but translate between LSP and Margin's services.

Open documents live in Margin's own virtual-file store (`core.vfs`), not in pygls' workspace:
one copy of each document, positions decoded in the negotiated encoding.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any, Awaitable, Callable, TypeVar

from lsprotocol import types
from pydantic import BaseModel, ConfigDict, ValidationError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    LanguageServerProtocol,
    default_converter,
    lsp_method,
)

from margin import __version__
from margin.core.settings import Problem, Source
from margin.core.vfs import (
    Position,
    PositionEncoding,
    Range,
    SyncError,
    TextChange,
    choose_position_encoding,
)
from margin.services.app import MarginApp
from margin.services.diagnosis import diagnose

log = logging.getLogger(__name__)

STATUS = "margin/status"
CUSTOM_METHODS = [STATUS]
"""Margin's own requests this server answers (advertised under capabilities.experimental)."""

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED
    MESSAGE = "Request failed"


def margin_converter():
    """pygls' converter, except that params of methods lsprotocol does not know (Margin's own)
    stay plain JSON, to be validated by pydantic models."""
    converter = default_converter()

    def keep_json(obj: dict[str, Any], cls: type) -> Any:
        fields = {"method": obj.get("method"), "jsonrpc": obj.get("jsonrpc"), "params": obj.get("params")}
        if cls is JsonRPCRequestMessage:
            fields["id"] = obj.get("id")
        return cls(**fields)

    converter.register_structure_hook(JsonRPCRequestMessage, keep_json)
    converter.register_structure_hook(JsonRPCNotification, keep_json)
    return converter


class _ClientWriter:
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
    documents, and quiet when the client goes away."""

    position_encoding: PositionEncoding = PositionEncoding.UTF16

    def set_writer(self, writer: Any, include_headers: bool = True) -> None:
        super().set_writer(_ClientWriter(writer, self._client_gone), include_headers)

    def _client_gone(self) -> None:
        log.info("the client closed the connection; stopping")
        self._server.shutdown()

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


class MarginLanguageServer(LanguageServer):
    def __init__(self, app: MarginApp) -> None:
        super().__init__(
            "margin",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=MarginProtocol,
            converter_factory=margin_converter,
        )
        self.app = app
        self._pending_messages: list[str] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._initialized = False

    # --- helpers -----------------------------------------------------------------------

    def run_task(self, coro: Awaitable[Any], name: str) -> None:
        """Run `coro` in the background, keeping a reference and logging its failure."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task %s failed: %s", name, type(t.exception()).__name__)

        task.add_done_callback(done)

    def tell_user(self, message: str) -> None:
        """An error the user must see (window/showMessage); held back until `initialized`."""
        if not self._initialized:
            self._pending_messages.append(message)
            return
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    def client_ready(self) -> None:
        """`initialized` arrived: say what was held back."""
        self._initialized = True
        for message in self._pending_messages:
            self.tell_user(message)
        self._pending_messages.clear()

    def cancel_background_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def apply_settings(self, layer: str, source: Source) -> None:
        problems = self.app.settings.update(layer, source)  # type: ignore[arg-type]
        if problems:
            self.report_settings_problems(problems, kept=True)
        else:
            log.info("settings applied from %s", source.name)
            if self._initialized:
                self.app.preload_tokenizers()

    def report_settings_problems(self, problems: list[Problem], *, kept: bool) -> None:
        log.warning("invalid settings fields=%s", ",".join(p.field for p in problems))
        consequence = "Keeping the last good settings." if kept else "Using the built-in defaults."
        details = "; ".join(str(p) for p in problems)
        self.tell_user(f"Margin: invalid settings: {details}. {consequence}")

    def supports_configuration_pull(self) -> bool:
        workspace = self.client_capabilities.workspace
        return bool(workspace and workspace.configuration)

    async def pull_configuration(self) -> None:
        result = await self.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section="margin")])
        )
        section = result[0] if result else None
        if section is not None:
            self.apply_settings("workspace", Source("workspace settings", section))


P = TypeVar("P", bound=BaseModel)


class StatusParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    refresh: bool = False
    """Probe the backends again instead of reusing a recent probe."""


def parse_params(model: type[P], params: Any, method: str) -> P:
    """Custom-request params validated, or InvalidParams naming each bad field. No params and
    an empty array (how Neovim's Lua encodes an empty table) both mean `{}`."""
    if params is None or params == []:
        params = {}
    try:
        return model.model_validate(params)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = ".".join(str(part) for part in item["loc"]) or "params"
            what = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
            problems.append(f"{where}: {what}")
        raise JsonRpcInvalidParams(f"{method}: invalid params: " + "; ".join(problems)) from None


def _change(event: Any) -> TextChange:
    if isinstance(event, types.TextDocumentContentChangePartial):
        start, end = event.range.start, event.range.end
        return TextChange(
            event.text,
            Range(Position(start.line, start.character), Position(end.line, end.character)),
        )
    return TextChange(event.text)


def create_server(app: MarginApp) -> MarginLanguageServer:
    server = MarginLanguageServer(app)
    register(server)
    return server


def register(server: MarginLanguageServer) -> None:
    """Every LSP method Margin handles, in one place."""

    @server.feature(types.INITIALIZE)
    def initialize(ls: MarginLanguageServer, params: types.InitializeParams) -> None:
        started = time.perf_counter()
        encoding = ls.protocol.position_encoding  # type: ignore[attr-defined]
        ls.app.files.encoding = encoding
        if ls.app.settings.startup_problems:
            ls.report_settings_problems(ls.app.settings.startup_problems, kept=False)
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("margin"), dict):
            options = options["margin"]
        if options:
            ls.apply_settings("init", Source("initializationOptions", options))
        log.info(
            "initialize client=%s encoding=%s ms=%.1f",
            params.client_info.name if params.client_info else "unknown",
            encoding.value,
            (time.perf_counter() - started) * 1000,
        )

    @server.feature(types.INITIALIZED)
    def initialized(ls: MarginLanguageServer, params: types.InitializedParams) -> None:
        ls.client_ready()
        if ls.supports_configuration_pull():
            ls.run_task(ls.pull_configuration(), "pull configuration")
        # Tokenizers build in a worker thread; the probe cache warms; neither delays anything.
        ls.app.preload_tokenizers()
        ls.run_task(diagnose(ls.app.settings.current, ls.app.backends, ls.app.tokenizers), "probe backends")

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: MarginLanguageServer, params: types.DidChangeConfigurationParams
    ) -> None:
        settings = params.settings
        if isinstance(settings, dict) and "margin" in settings:
            if settings["margin"] is not None:
                ls.apply_settings("workspace", Source("workspace settings", settings["margin"]))
        elif ls.supports_configuration_pull():
            await ls.pull_configuration()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MarginLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.app.files.open(doc.uri, doc.language_id, doc.version, doc.text)
        log.debug("open uri=%s version=%d chars=%d", doc.uri, doc.version, len(doc.text))

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: MarginLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = params.text_document
        try:
            ls.app.files.change(doc.uri, doc.version, [_change(c) for c in params.content_changes])
        except SyncError as error:
            log.warning("change not applied uri=%s version=%d: %s", doc.uri, doc.version, error)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MarginLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.app.files.close(params.text_document.uri)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: MarginLanguageServer, params: None) -> None:
        ls.cancel_background_tasks()
        try:
            await ls.app.aclose()
        except asyncio.CancelledError:
            # The client quit without waiting for this reply (editors do) and the connection
            # is being torn down: there is no one left to answer.
            log.info("shutdown interrupted: the client has gone")

    @server.feature(STATUS)
    async def status(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(StatusParams, params, STATUS)
        reports = await diagnose(ls.app.settings.current, ls.app.backends, ls.app.tokenizers,
                                 fresh=request.refresh)
        return {
            "version": __version__,
            "positionEncoding": ls.app.files.encoding.value,
            "profiles": {report.name: report.as_status() for report in reports},
            "files": [
                {
                    "uri": file.uri,
                    "version": file.version,
                    "fingerprint": file.fingerprint,
                    "languageId": file.language_id,
                }
                for file in ls.app.files.files()
            ],
        }
