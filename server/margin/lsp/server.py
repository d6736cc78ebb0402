"""The language server: Margin's LSP adapter. Every handler is registered here, in one place,
and does nothing but translate between LSP and Margin's services.

Open documents live in Margin's own virtual-file store (`core.vfs`), not in pygls' workspace:
one copy of each document, positions decoded in the negotiated encoding.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from lsprotocol import converters, types
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
from margin.lsp import params as wire
from margin.services.app import MarginApp
from margin.services.chat import ChatError, ChatOutcome, ChatParams, ChatService
from margin.services.diagnosis import diagnose, system_prompt_warnings
from margin.services.editops import EditOpsService, prepare_apply
from margin.services.selection_edit import SelectionEditError, SelectionEditService
from margin.core.selection_edit import Diagnostic
from margin.lsp.edits import workspace_edit

log = logging.getLogger(__name__)

STATUS = "margin/status"
CHAT = "margin/chat"
EXPLAIN = "margin/explain"
HISTORY = "margin/history"
THREADS = "margin/threads"
NEW_THREAD = "margin/newThread"
DELETE_THREAD = "margin/deleteThread"
EDIT_OPS = "margin/editOps"
APPLY_OPS = "margin/applyOps"
APPLY_OPS_COMMAND = "margin.applyOps"
EDIT_SELECTION_COMMAND = "margin.editSelection"
"""A chosen code action, for clients that cannot resolve a code action's edit."""
REWRITE_KIND = "refactor.rewrite.margin"
FIX_KIND = "quickfix.margin"
CUSTOM_METHODS = [STATUS, CHAT, EXPLAIN, HISTORY, THREADS, NEW_THREAD, DELETE_THREAD, EDIT_OPS, APPLY_OPS]
"""Margin's own requests this server answers (advertised under capabilities.experimental)."""

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
PROGRESS_CREATE_TIMEOUT_S = 2.0


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
        app.tell_user = lambda message: self.tell_user(message, types.MessageType.Warning)
        app.show_text = lambda text: self.window_log_message(
            types.LogMessageParams(type=types.MessageType.Log, message=text))
        self.chat = ChatService(app, workspace_folders=self.workspace_folder_uris)
        self.editops = EditOpsService(self.chat)
        self.selection_edits = SelectionEditService(self.chat)
        self._pending_messages: list[tuple[str, types.MessageType]] = []
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

    def tell_user(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        """Something the user must see (window/showMessage); held back until `initialized`."""
        if not self._initialized:
            self._pending_messages.append((message, kind))
            return
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def client_ready(self) -> None:
        """`initialized` arrived: say what was held back."""
        self._initialized = True
        for message, kind in self._pending_messages:
            self.tell_user(message, kind)
        self._pending_messages.clear()

    async def check_backends(self) -> None:
        """Probe the backends (warming the cache) and warn about oversized system prompts."""
        await diagnose(self.app.settings.current, self.app.backends, self.app.tokenizers)
        for warning in await system_prompt_warnings(self.app):
            self.tell_user(warning, types.MessageType.Warning)

    def workspace_folder_uris(self) -> list[str]:
        try:
            workspace = self.workspace
        except RuntimeError:  # before initialize
            return []
        folders = [folder.uri for folder in workspace.folders.values()]
        if not folders and workspace.root_uri:
            folders = [workspace.root_uri]
        return folders

    def start_work(self, token: Any, title: str) -> None:
        """Cancellable work-done progress on the client's token; cancelling it cancels the
        current request."""
        if token is None:
            return
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True))
        task = asyncio.current_task()
        cancel = self.work_done_progress.tokens[token]
        cancel.add_done_callback(lambda f: task.cancel() if f.cancelled() and task else None)

    def end_work(self, token: Any, message: str) -> None:
        if token is None:
            return
        self.work_done_progress.tokens.pop(token, None)
        self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    @contextlib.asynccontextmanager
    async def server_progress(self, title: str) -> AsyncIterator[None]:
        """Cancellable progress the server starts itself (for requests that carry no token),
        when the client supports it; a client slow to accept it gets none rather than a wait."""
        token = None
        window = self.client_capabilities.window
        if window and window.work_done_progress:
            candidate = f"margin-{uuid.uuid4()}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(candidate), PROGRESS_CREATE_TIMEOUT_S)
                token = candidate
            except (TimeoutError, JsonRpcException):
                log.info("the client did not accept a progress token; working without one")
        self.start_work(token, title)
        outcome = "failed"
        try:
            yield
            outcome = "done"
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.end_work(token, outcome)

    def resolves_edits(self) -> bool:
        """Whether the client resolves a code action's `edit` lazily (codeAction/resolve)."""
        text = self.client_capabilities.text_document
        support = text.code_action.resolve_support if text and text.code_action else None
        return bool(support and "edit" in support.properties)

    async def apply_edit(self, edit: types.WorkspaceEdit) -> str | None:
        """workspace/applyEdit, never waiting longer than applyEditTimeoutS: None when applied,
        else why not."""
        workspace = self.client_capabilities.workspace
        if not (workspace and workspace.apply_edit):
            return "This editor does not accept edits from the server (workspace/applyEdit)."
        timeout = self.app.settings.current.globals.apply_edit_timeout_s
        try:
            answer = await asyncio.wait_for(
                self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="Margin")),
                timeout)
        except TimeoutError:
            return (f"The editor did not answer workspace/applyEdit within {timeout:g} s; "
                    "check the file before trying again.")
        if not answer.applied:
            return f"The editor refused the edit: {answer.failure_reason or 'no reason given'}."
        return None

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


def parse_params(model: type[P], params: Any, method: str, where: str = "") -> P:
    """Custom-request params validated, or InvalidParams naming each bad field (inside `where`,
    when the params are a part of the request). No params and an empty array (how Neovim's
    Lua encodes an empty table) both mean `{}`."""
    if params is None or params == []:
        params = {}
    try:
        return model.model_validate(params)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            path = ".".join([where, *(str(part) for part in item["loc"])] if where else
                            [str(part) for part in item["loc"]]) or "params"
            what = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
            problems.append(f"{path}: {what}")
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
        ls.run_task(ls.check_backends(), "probe backends")

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

    def failed(error: ChatError) -> RequestFailed:
        return RequestFailed(str(error))

    def outcome_json(outcome: ChatOutcome) -> dict[str, Any]:
        result: dict[str, Any] = {
            "threadId": outcome.thread_id,
            "reply": outcome.reply,
            "usage": {"promptTokens": outcome.usage.prompt_tokens,
                      "completionTokens": outcome.usage.completion_tokens},
            "budget": outcome.budget,
        }
        if outcome.over_budget or outcome.upstream_error:
            result["message"] = outcome.over_budget or outcome.upstream_error
        return result

    @server.feature(CHAT)
    async def chat(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.ChatRequestParams, params, CHAT)
        token = request.partial_result_token

        def on_delta(text: str) -> None:
            if token is not None:
                ls.progress(types.ProgressParams(token=token, value={"delta": text}))

        ls.start_work(request.work_done_token, "Margin is answering")
        outcome_message = "cancelled"
        try:
            outcome = await ls.chat.chat(request.core(), on_delta)
            outcome_message = "done" if not (outcome.over_budget or outcome.upstream_error) else "not sent"
            return outcome_json(outcome)
        except ChatError as error:
            outcome_message = "failed"
            raise failed(error) from None
        finally:
            ls.end_work(request.work_done_token, outcome_message)

    @server.feature(EXPLAIN)
    async def explain(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.ExplainParams, params, EXPLAIN)
        try:
            prepared = await ls.chat.prepare(request.core(), request.profile)
        except ChatError as error:
            raise failed(error) from None
        result = {"threadId": prepared.thread.id, "budget": prepared.budget(),
                  "messages": [m.as_json() for m in prepared.assembly.messages]}
        if prepared.assembly.over_budget:
            result["message"] = prepared.assembly.over_budget
        return result

    @server.feature(HISTORY)
    async def history(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.HistoryParams, params, HISTORY)
        where = ChatParams(message="", thread_id=request.thread_id,
                           text_document=request.text_document.uri if request.text_document else None)
        try:
            thread = await ls.app.threads.run(lambda store: ls.chat.thread_for(store, where))
        except ChatError as error:
            raise failed(error) from None
        messages = await ls.app.threads.run(lambda store: store.messages(thread.id, include_hidden=False))
        return {"threadId": thread.id, "messages": [
            {"id": m.id, "role": m.role, "content": m.meta.get("display", m.content), "createdAt": m.created_at}
            for m in messages]}

    @server.feature(THREADS)
    async def threads(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.ThreadsParams, params, THREADS)
        found = await ls.app.threads.run(lambda store: store.list_threads(request.workspace))
        return {"threads": [{"id": t.id, "workspace": t.workspace, "context": t.context, "title": t.title,
                             "createdAt": t.created_at, "updatedAt": t.updated_at} for t in found],
                "persistent": ls.app.threads.persistent}

    @server.feature(NEW_THREAD)
    async def new_thread(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.NewThreadParams, params, NEW_THREAD)
        workspace = ls.chat.workspace_of(request.text_document.uri if request.text_document else None)
        thread = await ls.app.threads.run(lambda store: store.new_thread(workspace, "chat", request.title))
        return {"threadId": thread.id}

    @server.feature(DELETE_THREAD)
    async def delete_thread(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.DeleteThreadParams, params, DELETE_THREAD)
        deleted = await ls.app.threads.run(lambda store: store.delete_thread(request.thread_id))
        return {"deleted": deleted}

    unstructure = converters.get_converter().unstructure

    @server.feature(EDIT_OPS)
    async def edit_ops(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.ChatRequestParams, params, EDIT_OPS)
        outcome = await ls.editops.propose(request.core())
        result: dict[str, Any] = {
            "enabled": outcome.enabled,
            "assistantMessage": outcome.assistant_message,
            "ops": [wire.OpModel.wire(op) for op in outcome.ops],
            "baseFingerprints": outcome.base_fingerprints,
            "budget": outcome.budget,
            "threadId": outcome.thread_id,
        }
        if outcome.edits:
            confirm = ls.app.settings.current.globals.confirm_edits
            result["edit"] = unstructure(workspace_edit(outcome.bases, outcome.edits, ls.app.files.encoding,
                                                        confirm=confirm))
        return result

    async def apply_ops(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        request = parse_params(wire.ApplyOpsParams, params, APPLY_OPS)
        prepared = prepare_apply(ls.editops, request.core())
        refused = {"applied": False, "rebased": False, "staleFiles": []}
        if prepared.failure:
            return {**refused, "failureReason": prepared.failure}
        plan = prepared.plan
        assert plan is not None
        if plan.stale:
            return {**refused, "staleFiles": plan.stale, "failureReason": (
                f"Not applied: {', '.join(plan.stale)} changed where the edit goes since it was proposed "
                "(or was closed). Ask again for a fresh proposal.")}
        confirm = ls.app.settings.current.globals.confirm_edits
        failure = await ls.apply_edit(workspace_edit(prepared.files, plan.edits, ls.app.files.encoding,
                                                     confirm=confirm))
        if failure:
            return {**refused, "failureReason": failure}
        log.info("ops applied files=%d rebased=%s", len(plan.edits), plan.rebased)
        return {"applied": True, "rebased": plan.rebased, "staleFiles": []}

    @server.feature(APPLY_OPS)
    async def apply_ops_request(ls: MarginLanguageServer, params: Any) -> dict[str, Any]:
        return await apply_ops(ls, params)

    @server.command(APPLY_OPS_COMMAND)
    async def apply_ops_command(ls: MarginLanguageServer, *arguments: Any) -> dict[str, Any]:
        return await apply_ops(ls, arguments[0] if arguments else None)

    def to_range(r: types.Range) -> Range:
        return Range(Position(r.start.line, r.start.character), Position(r.end.line, r.end.character))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[FIX_KIND, REWRITE_KIND], resolve_provider=True))
    def code_action(ls: MarginLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        """Margin's actions for a non-empty selection. Nothing is asked of the model here."""
        uri = params.text_document.uri
        diagnostics = params.context.diagnostics
        problems = [Diagnostic(d.range.start.line, d.message, d.source, None if d.code is None else str(d.code),
                               d.range.end.line) for d in diagnostics]
        offered = ls.selection_edits.offer(uri, to_range(params.range), problems)
        file = ls.app.files.get(uri)
        if not offered or file is None:
            return []
        only = params.context.only or []
        lazy = ls.resolves_edits()
        actions = []
        for offer in offered:
            kind = FIX_KIND if offer.kind == "fix" else REWRITE_KIND
            if only and not any(kind == o or kind.startswith(f"{o}.") for o in only):
                continue
            span = types.Range(types.Position(offer.range.start.line, offer.range.start.character),
                               types.Position(offer.range.end.line, offer.range.end.character))
            data = {"uri": uri, "range": unstructure(span), "kind": offer.kind,
                    "fingerprint": file.fingerprint, "instruction": offer.instruction}
            if offer.kind == "fix":
                data["diagnostics"] = [wire.DiagnosticModel.wire(problem) for problem in problems]
            action = types.CodeAction(offer.title, kind=kind, data=data, is_preferred=offer.kind == "comment",
                                      diagnostics=list(diagnostics) if offer.kind == "fix" else None)
            if not lazy:
                action.command = types.Command(title=offer.title, command=EDIT_SELECTION_COMMAND, arguments=[data])
            actions.append(action)
        return actions

    async def selection_edit(ls: MarginLanguageServer, data: Any, method: str, where: str) -> types.WorkspaceEdit:
        request = parse_params(wire.SelectionEditData, data, method, where)
        try:
            async with ls.server_progress("Margin is editing the selection"):
                outcome = await ls.selection_edits.propose(request.core())
        except SelectionEditError as error:
            raise RequestFailed(str(error)) from None
        confirm = ls.app.settings.current.globals.confirm_edits
        return workspace_edit({outcome.current.uri: outcome.current}, outcome.plan.edits,
                              ls.app.files.encoding, confirm=confirm)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: MarginLanguageServer, params: types.CodeAction) -> types.CodeAction:
        """The chosen action's edit: the model is asked now, and the edit is of the exact text
        it saw (rebased only when the document changed clear of it)."""
        params.edit = await selection_edit(ls, params.data, types.CODE_ACTION_RESOLVE, "data")
        return params

    @server.command(EDIT_SELECTION_COMMAND)
    async def edit_selection_command(ls: MarginLanguageServer, *arguments: Any) -> dict[str, Any]:
        edit = await selection_edit(ls, arguments[0] if arguments else None, EDIT_SELECTION_COMMAND, "arguments.0")
        failure = await ls.apply_edit(edit)
        if failure:
            raise RequestFailed(failure)
        return {"applied": True}

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
