"""The services one Margin process runs with, shared by the language server and the terminal:
settings, backends, tokenizers, templates, open files, the workspace and thread storage.

Only the open files are made with the app; the rest — the settings too — is made, and its
modules imported, on first use (margin.deferred: the language server answers `initialize`
without them, and resolves the settings right after its reply).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from margin import deferred
from margin.core.vfs import VirtualFileStore
from margin.services.background import BackgroundQueue
from margin.services.workspace import Workspace

if TYPE_CHECKING:
    from margin.core.agent.ports import Hands
    from margin.core.mcp.ports import McpConnector, MissingExtra
    from margin.core.prompts import Templates
    from margin.core.settings_state import SettingsState
    from margin.core.threads import FileContextRepository, ThreadStore
    from margin.core.workspace_access import WorkspaceAccess
    from margin.services.backends import Backends, ProviderFactory
    from margin.services.completion_routes import RouteMemory
    from margin.services.probe_findings import ProbeFindings
    from margin.services.thread_storage import ThreadStorage
    from margin.services.tokenizers import ServerCounterFactory, Tokenizers

# Imported on first use (margin.deferred).
with deferred.imports():
    from margin.core import prompts, settings_state, threads
    from margin.core.tokens import choice as tokenizer_choice
    from margin.services import backends as backends_module
    from margin.services import completion_routes as routes_module
    from margin.services import probe_findings, settings_file, thread_storage
    from margin.services import tokenizers as tokenizers_module

log = logging.getLogger(__name__)

MCP_EXTRA = ("MCP servers need Margin's MCP client, an optional extra: install margin-lsp[mcp] "
             "(pip install 'margin-lsp[mcp]', or uv tool install 'margin-lsp[mcp]')")
MCP_APPROVALS = "mcp-approvals.json"


def _message_file_contexts(store: ThreadStore) -> FileContextRepository:
    return threads.MessageFileContexts(store)


@dataclass
class MarginApp:
    make_provider: ProviderFactory
    make_server_counter: ServerCounterFactory
    make_store: Callable[[Path], ThreadStore]
    environ: Mapping[str, str]
    workspace_access: WorkspaceAccess
    """the workspace folders' files, git history and stored indexes (retrieval, instruction files)"""
    files: VirtualFileStore = field(default_factory=VirtualFileStore)
    workspace: Workspace = field(default_factory=Workspace)
    file_contexts: Callable[[ThreadStore], FileContextRepository] = _message_file_contexts
    """where file contexts are kept, given the thread store in use"""
    tell_user: Callable[[str], None] = lambda message: None
    show_text: Callable[[str], None] = lambda text: None
    """where requests are shown when showRequests is on (the editor's log, stderr)"""
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    """work done after a request has been answered (thread summaries): cancelled at shutdown"""
    queue: BackgroundQueue = field(default_factory=BackgroundQueue)
    """the order of work: completion, requests, summaries, indexing (services.background)"""
    _storage: ThreadStorage | None = None
    _storage_from: str | None = None
    """the `database` setting `_storage` was opened for"""
    _retired: list[ThreadStorage] = field(default_factory=list)
    """stores left when the `database` setting changed: requests begun on one may still be
    writing to it, so each is closed at shutdown"""
    _templates: Templates | None = None
    _findings: ProbeFindings | None = None
    hands: Hands | None = None
    """what the agent does outside Margin: run a command in the sandbox, write a file (None: neither)"""
    mcp_connector: McpConnector | None = None
    """the MCP client (adapters.mcp_client; None: none here)"""
    mcp_missing: MissingExtra = lambda: MCP_EXTRA
    closers: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    """what else ends with the app (the MCP servers it started)"""
    """None when the MCP client can run; else what to install"""
    settings_path: str | None = None
    """the user settings file named on the command line (`margin --settings FILE`); else
    $MARGIN_SETTINGS or the default place (margin.services.settings_file)"""

    @classmethod
    def create(
        cls,
        make_provider: ProviderFactory,
        make_server_counter: ServerCounterFactory,
        make_store: Callable[[Path], ThreadStore],
        environ: Mapping[str, str],
        workspace_access: WorkspaceAccess,
    ) -> MarginApp:
        return cls(make_provider=make_provider, make_server_counter=make_server_counter, make_store=make_store,
                   environ=environ, workspace_access=workspace_access)

    @cached_property
    def settings(self) -> SettingsState:
        """The settings in force, resolved from the user settings file and `environ` when first
        used (pydantic: the language server answers `initialize` without them and resolves them
        right after its reply)."""
        file, problems = settings_file.read(self.environ, self.settings_path)
        return settings_state.SettingsState(self.environ, file, problems)

    @cached_property
    def backends(self) -> Backends:
        made = backends_module.Backends(self.make_provider, self.environ)
        made.show_request = self._show_request
        made.findings = lambda base_url, model, info: self.probe_findings.get(base_url, model, info)
        return made

    @cached_property
    def tokenizers(self) -> Tokenizers:
        return tokenizers_module.Tokenizers(self.make_server_counter)

    @cached_property
    def completion_routes(self) -> RouteMemory:
        """how inline completion reaches each backend, found once (status and doctor show it)"""
        return routes_module.RouteMemory(lambda base_url, model, info: self.probe_findings.get(base_url, model, info))

    def _show_request(self, profile: str, url: str, body: dict[str, Any]) -> None:
        if self.settings.current.globals.show_requests:
            self.show_text(f"Margin request ({profile} profile): POST {url}\n"
                           f"{json.dumps(body, ensure_ascii=False, indent=2)}")

    def mcp_approvals_path(self) -> Path:
        """The person's MCP approvals, beside the thread database (services.mcp_approvals)."""
        return self.database_path().with_name(MCP_APPROVALS)

    def database_path(self) -> Path:
        """Where the thread database is, by the user-only `database` setting."""
        database = self.settings.current.globals.database
        return Path(database).expanduser() if database else thread_storage.default_database_path()

    @property
    def probe_findings(self) -> ProbeFindings:
        """What `margin doctor --probe` found, kept beside the thread database."""
        database = self.database_path()
        path = database.with_name(database.stem + ".probes.json")
        if self._findings is None or self._findings.path != path:
            self._findings = probe_findings.ProbeFindings(path)
        return self._findings

    @property
    def storage(self) -> ThreadStorage:
        """The thread store, opened on first use at the configured path."""
        settings = self.settings.current.globals
        if self._storage is not None and self._storage_from == settings.database:
            return self._storage  # asked for several times a request: the path is made when the setting changes
        path = self.database_path()
        self._storage_from = settings.database
        if self._storage is None or self._storage.path != path:
            if self._storage is not None:
                self._retired.append(self._storage)
            self._storage = thread_storage.ThreadStorage(self.make_store, path, ttl_days=settings.thread_ttl_days,
                                                         tell_user=lambda message: self.tell_user(message))
        return self._storage

    @property
    def templates(self) -> Templates:
        folder = self.settings.current.globals.prompts_dir
        user_dir = Path(folder).expanduser() if folder else None
        if self._templates is None or self._templates.user_dir != user_dir:
            self._templates = prompts.Templates(user_dir)
        return self._templates

    def preload_tokenizers(self) -> None:
        """Start building the in-process tokenizers the enabled profiles name (by setting or by
        model family; the llama.cpp tokenizer is the server's and needs no building)."""
        profiles = [p for p in self.settings.current.profiles.values() if p.enabled]
        self.tokenizers.preload(tokenizer_choice.choose_tokenizer(p.tokenizer, p.model, None) for p in profiles)

    def run_in_background(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run `work` after the request that started it has been answered; its failure is logged
        (never raised to anyone), and shutdown cancels it."""
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self.background.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self.background.discard(finished)
            if not finished.cancelled() and (error := finished.exception()) is not None:
                log.warning("background work failed name=%s error=%s", name, type(error).__name__)

        task.add_done_callback(done)
        return task

    async def aclose(self) -> None:
        for close in reversed(self.closers):
            await close()
        for task in list(self.background):
            task.cancel()
        if self.background:
            await asyncio.wait(list(self.background))
        if "backends" in self.__dict__:  # made (cached_property): else there is nothing to close
            await self.backends.aclose()
        if "tokenizers" in self.__dict__:
            await self.tokenizers.aclose()
        for storage in [*self._retired, self._storage]:
            if storage is not None:
                await storage.close()
