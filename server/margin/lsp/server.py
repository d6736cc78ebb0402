"""The language server: Margin's LSP adapter. `create_server` builds it and lets each handler
module in `lsp/handlers/` register its own handlers; this module holds what handlers share —
parsing params, answering failures, progress, edits sent to the editor, settings, background
tasks, and what the client can do (read with pygls' `get_capability`).

Open documents live in Margin's own virtual-file store (`core.vfs`), not in pygls' workspace:
one copy of each document, positions decoded in the negotiated encoding.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from margin import __version__, deferred, logs
from margin.lsp import pygls_private, tcp
from margin.lsp.protocol import MarginProtocol, margin_converter
from margin.lsp.transport import PipeReader, read_messages
from margin.services.errors import RequestError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from margin.core.editops import OffsetEdit
    from margin.core.settings import Problem, Source
    from margin.core.vfs import VirtualFile
    from margin.services.app import MarginApp
    from margin.services.registry import Services

# Loaded after the `initialize` reply (margin.deferred): not needed to answer it.
with deferred.imports():
    import pydantic

    from margin.core import settings
    from margin.lsp import convert
    from margin.services import diagnosis, registry

log = logging.getLogger(__name__)

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
PROGRESS_CREATE_TIMEOUT_S = 2.0

P = TypeVar("P", bound="BaseModel")


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED
    MESSAGE = "Request failed"


def parse_params(model: type[P], params: Any, method: str, where: str = "") -> P:
    """Custom-request params validated, or InvalidParams naming each bad field (inside `where`,
    when the params are a part of the request). No params and an empty array (how Neovim's
    Lua encodes an empty table) both mean `{}`."""
    if params is None or params == []:
        params = {}
    try:
        return model.model_validate(params)
    except pydantic.ValidationError as error:
        problems = []
        for item in error.errors():
            path = ".".join([where, *(str(part) for part in item["loc"])] if where else
                            [str(part) for part in item["loc"]]) or "params"
            what = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
            problems.append(f"{path}: {what}")
        raise JsonRpcInvalidParams(f"{method}: invalid params: " + "; ".join(problems)) from None


@contextlib.contextmanager
def answering_failures() -> Iterator[None]:
    """A service's RequestError (busy, not found, over budget, stale, an unusable answer) as the
    LSP error RequestFailed, with the message a person can act on."""
    try:
        yield
    except RequestError as error:
        raise RequestFailed(str(error)) from None


class MarginLanguageServer(LanguageServer):
    protocol: MarginProtocol

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
        app.workspace.folders = self.workspace_folder_uris
        self._services: Services | None = None
        self.on_initialize: list[Callable[[], None]] = []
        """feature hooks run when `initialize` has read the client's capabilities and options,
        before the server's capabilities are computed (a feature may register itself then)"""
        self.on_settings_changed: list[Callable[[], None]] = []
        """feature hooks run after new settings apply, once the client is initialized"""
        self._pending_messages: list[tuple[str, types.MessageType]] = []
        self._told_notices: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._initialized = False
        self.initialization_options: Any = None
        """Margin's initializationOptions (out of a `{"margin": ...}` wrapper): the reply to
        `initialize` reads them unvalidated (margin.core.settings_preread), `resolve_settings`
        applies them right after it"""
        self.closer: asyncio.Future[None] | None = None
        """closes the app when the connection ends without a shutdown request
        (lsp/handlers/lifecycle.py)"""

    # --- transport: pygls' start-up with Margin's read loop (lsp/transport.py) -----------------

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        stop_event = pygls_private.new_stop_event(self)
        reader = PipeReader(stdin or sys.stdin.buffer)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(read_messages(stop_event, reader, self.protocol, pygls_private.error_reporter(self)))
        except (BrokenPipeError, KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int, token: str | None = None) -> None:
        """Serve one editor at a time on TCP, one whose `initialize` presents `token` (lsp/tcp.py;
        there is always one). The server stops when the editor it served disconnects."""
        if not token:
            raise ValueError("a TCP server needs a token every client presents (margin.lsp.tcp)")
        stop_event = pygls_private.new_stop_event(self)
        report_error = pygls_private.error_reporter(self)
        serving = False

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal serving
            if serving:
                log.warning("tcp connection refused: another client is being served")
                writer.close()
                return
            source = await tcp.admit(reader, writer, token)
            if source is None:
                return
            if serving:  # another client got in while this one was showing its token
                writer.close()
                return
            serving = True
            self.protocol.set_writer(writer)
            await read_messages(stop_event, source, self.protocol, report_error)
            self.shutdown()

        async def serve() -> None:
            listener = await asyncio.start_server(connection, host, port)
            pygls_private.close_on_shutdown(self, listener)
            async with listener:
                await listener.serve_forever()

        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(serve())

    @property
    def services(self) -> Services:
        """Every use case over the app, built on first use (after `initialize`)."""
        if self._services is None:
            self._services = registry.Services.over(self.app)
        return self._services

    def initialize_answered(self) -> None:
        """The `initialize` reply has been sent (called before the next message is read): the
        settings resolved, then what the reply did not need loaded in the background."""
        try:
            self.resolve_settings()
        finally:
            deferred.warm_up()

    # --- the client --------------------------------------------------------------------------

    def can(self, capability: str) -> Any:
        """A client capability by its dotted path (`workspace.apply_edit`), or None."""
        return get_capability(self.client_capabilities, capability)

    def workspace_folder_uris(self) -> list[str]:
        try:
            workspace = self.workspace
        except RuntimeError:  # before initialize
            return []
        folders = [folder.uri for folder in workspace.folders.values()]
        if not folders and workspace.root_uri:
            folders = [workspace.root_uri]
        return folders

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

    # --- background work ---------------------------------------------------------------------

    def run_task(self, coro: Awaitable[Any], name: str) -> None:
        """Run `coro` in the background, keeping a reference and logging its failure."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task %s failed: %s", name, type(t.exception()).__name__)

        task.add_done_callback(done)

    def cancel_background_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def check_backends(self) -> None:
        """Probe the backends (warming the cache) and warn about oversized system prompts."""
        await diagnosis.diagnose(self.app.settings.current, self.app.backends, self.app.tokenizers,
                                 routes=self.app.completion_routes)
        for warning in await diagnosis.system_prompt_warnings(self.app):
            self.tell_user(warning, types.MessageType.Warning)

    # --- progress ----------------------------------------------------------------------------

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
        if self.can("window.work_done_progress"):
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

    # --- edits -------------------------------------------------------------------------------

    def resolves_edits(self) -> bool:
        """Whether the client resolves a code action's `edit` lazily (codeAction/resolve)."""
        properties = self.can("text_document.code_action.resolve_support.properties")
        return bool(properties and "edit" in properties)

    def workspace_edit(self, files: Mapping[str, VirtualFile],
                       edits: Mapping[str, Sequence[OffsetEdit]]) -> types.WorkspaceEdit:
        """Margin's edits as a versioned WorkspaceEdit in the negotiated encoding, marked as
        needing confirmation when `confirmEdits` is on."""
        confirm = self.app.settings.current.globals.confirm_edits
        return convert.workspace_edit(files, edits, self.app.files.encoding, confirm=confirm)

    async def apply_edit(self, edit: types.WorkspaceEdit, *, timeout: float | None = -1.0,
                         label: str = "Margin") -> str | None:
        """workspace/applyEdit, never waiting longer than `timeout` (by default applyEditTimeoutS;
        None: the caller bounds it): None when applied, else why not (the editor refused it,
        answered with an error, or did not answer)."""
        if not self.can("workspace.apply_edit"):
            return "This editor does not accept edits from the server (workspace/applyEdit)."
        if timeout is not None and timeout < 0:
            timeout = self.app.settings.current.globals.apply_edit_timeout_s
        try:
            answer = await asyncio.wait_for(
                self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label)),
                timeout)
        except TimeoutError:
            return (f"The editor did not answer workspace/applyEdit within {timeout or 0:g} s; "
                    "check the file before trying again.")
        except JsonRpcException as error:
            # Editors answer with an error when, say, the document's version moved on (eglot).
            log.info("workspace/applyEdit answered with an error code=%s", error.code)
            return (f"The editor did not apply the edit: it answered workspace/applyEdit with an error "
                    f"({error.code}: {error.message}). Check the file, then try again.")
        if not answer.applied:
            return f"The editor refused the edit: {answer.failure_reason or 'no reason given'}."
        return None

    # --- settings ----------------------------------------------------------------------------

    def resolve_settings(self) -> None:
        """The settings validated (pydantic) and the initializationOptions applied, right after
        the `initialize` reply: it needed only a pre-read of them (margin.core.settings_preread).
        Problems are told at `initialized`, where the features also catch up with settings that
        differ from the pre-read (lsp/handlers/lifecycle.py)."""
        state = self.app.settings
        if state.startup_problems:
            self.report_settings_problems(state.startup_problems, kept=False)
        if self.initialization_options:
            self.apply_settings("init", settings.Source("initializationOptions", self.initialization_options))

    def apply_settings(self, layer: str, source: Source) -> None:
        problems = self.app.settings.update(layer, source)  # type: ignore[arg-type]
        if problems:
            self.report_settings_problems(problems, kept=True)
        else:
            log.info("settings applied from %s", source.name)
            self.tell_new_notices()
            if self._initialized:
                self.app.preload_tokenizers()
                for hook in self.on_settings_changed:
                    hook()

    def tell_new_notices(self) -> None:
        """Say which workspace settings were not taken (they may only narrow what Margin does:
        margin.core.settings_fields.WorkspaceRule), once for each new combination."""
        for notice in self.app.settings.current.notices:
            if notice not in self._told_notices:
                self._told_notices.add(notice)
                log.warning("workspace settings not taken: they may only narrow what Margin does")
                self.tell_user(notice, types.MessageType.Warning)

    def report_settings_problems(self, problems: list[Problem], *, kept: bool) -> None:
        log.warning("invalid settings fields=%s", ",".join(logs.name(p.field) for p in problems))
        consequence = ("Keeping the last good settings." if kept else
                       "Those sources are left out; the other settings apply.")
        details = "; ".join(str(p) for p in problems)
        self.tell_user(f"Margin: invalid settings: {details}. {consequence}")

    async def pull_configuration(self) -> None:
        result = await self.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section="margin")])
        )
        section = result[0] if result else None
        if section is not None:
            self.apply_settings("workspace", settings.Source("workspace settings", section, workspace=True))


def create_server(app: MarginApp) -> MarginLanguageServer:
    from margin.lsp.handlers import register_all

    server = MarginLanguageServer(app)
    register_all(server)
    return server
