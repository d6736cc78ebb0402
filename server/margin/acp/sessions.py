"""ACP's sessions on Margin's agent: initialize, a session per agent thread (new, load, list,
resume, close, delete), its mode and options, a prompt as one agent turn, and cancel.

- A session is an agent thread of Margin's store: listed, loaded (its steps replayed as
  session/update) and deleted like any, and `margin agent --thread ID` goes on with it.
- Modes: `ask` (edits and commands asked, the default) and `read-only` (the reading tools
  only: an edit or a command is refused without asking).
- Options (session/set_config_option): `model` (category model: the models the agent
  profile's server serves) and `approvals` (`remember`: "always" answers hold for the session;
  `ask`: every edit and command asked every time).
- A prompt is one turn of services/agent.py through the session's door (door.py); a cancel
  aborts its model call and the prompt answers `cancelled`. Every update is sent before the
  prompt's answer.
- `mcpServers` (stdio and HTTP) become the agent's MCP tools (services/mcp.py), asked about
  through session/request_permission before each first runs, pinned like the person's own; one
  that cannot run (SSE, or the `mcp` extra missing) is never silently ignored: the session
  starts (Zed and JetBrains pass the editor's own servers to every agent), its answer's `_meta`
  names it, and the first prompt's first update says, by name, why it was not started.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import (
    AgentCapabilities,
    AuthEnvVar,
    EnvVarAuthMethod,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionDeleteCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    Usage,
)

from margin import __version__
from margin.acp import door as acp_door
from margin.acp.nes import NES_CAPABILITIES
from margin.acp.server import Peer
from margin.core.mcp.spec import McpServer
from margin.core.where import Where
from margin.services.agent import CONTEXT, PROFILE, AgentAsk
from margin.services.errors import RequestError as MarginError
from margin.services.registry import Services
from margin.services.threads import DISPLAY
from margin.services.workspace import path_of

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
MODES = {"ask": ("Ask", "Edits and commands are asked before they happen."),
         "read-only": ("Read only", "Only the tools that read: an edit or a command is refused without asking.")}
APPROVALS = {"remember": ("Remember", "An \"always\" answer holds for that exact call for the rest of the session."),
             "ask": ("Ask every time", "Every edit and command is asked, whatever was answered before.")}
STOPS = {"finished": "end_turn", "step cap": "max_turn_requests", "over budget": "max_tokens"}
"""how a turn's end is told (any other: end_turn, the reason in the last message)"""


def refused(message: str) -> RequestError:
    return RequestError(-32602, message)


def _name(server: Any) -> str:
    return " ".join(str(getattr(server, "name", "") or "unnamed").split())[:80]


def client_servers(mcp_servers: Any, missing: str | None) -> tuple[dict[str, McpServer], list[str]]:
    """The client's servers Margin can run (by a name fit to prefix tools), and each other one
    named with why it is not started."""
    runnable: dict[str, McpServer] = {}
    not_started: list[str] = []
    for server in mcp_servers or ():
        name = _name(server)
        url, command = getattr(server, "url", None), getattr(server, "command", None)
        if missing is not None:
            not_started.append(f"{name} (Margin's MCP client is not installed: margin-lsp[mcp])")
            continue
        if url is not None and getattr(server, "type", "http") == "sse":
            not_started.append(f"{name} (SSE, which Margin does not speak: give it a Streamable HTTP URL)")
            continue
        key = re.sub(r"[^A-Za-z0-9_-]", "-", name).strip("-")[:32] or "server"
        try:
            if url is not None:
                runnable[key] = McpServer(url=url, headers={h.name: h.value for h in getattr(server, "headers", None) or ()})
            elif command is not None:
                runnable[key] = McpServer(command=command, args=tuple(getattr(server, "args", None) or ()),
                                          env={e.name: e.value for e in getattr(server, "env", None) or ()})
            else:
                not_started.append(f"{name} (a transport Margin does not speak)")
        except ValueError as error:
            not_started.append(f"{name} ({str(error).splitlines()[-1][:120]})")
    return runnable, not_started


def _not_started_meta(session: Session) -> dict[str, Any] | None:
    return {"margin": {"mcpServersNotStarted": session.not_started}} if session.not_started else None


@dataclass
class Session:
    id: str
    """the agent thread's id"""
    cwd: Path
    folder: str
    """the cwd as a workspace folder URI"""
    mode: str = "ask"
    approvals: str = "remember"
    model: str | None = None
    never: set[tuple[str, str]] = field(default_factory=set)
    """calls answered "reject always": refused without asking again in this session"""
    running: asyncio.Task[Any] | None = None
    cancelled: bool = False
    not_started: list[str] = field(default_factory=list)
    """the MCP servers the client named, not run (said once, at the first prompt)"""


class MarginAgent:
    """The ACP agent's methods (the SDK's router calls them with the request's fields)."""

    def __init__(self, services: Services, peer: Peer) -> None:
        self.services = services
        self.app = services.app
        self.peer = peer
        self.sessions: dict[str, Session] = {}
        self.folders: set[str] = set()
        self.client_files = False
        """the client advertised both fs.readTextFile and fs.writeTextFile"""
        self.app.workspace.folders = lambda: sorted(self.folders)

    # --- initialize and authenticate -------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **_: Any) -> InitializeResponse:
        fs = getattr(client_capabilities, "fs", None)
        self.client_files = bool(fs is not None and fs.read_text_file and fs.write_text_file)
        log.info("acp initialize version=%d client_files=%s", protocol_version, self.client_files)
        return InitializeResponse(
            protocol_version=min(PROTOCOL_VERSION, max(protocol_version, 0)) or PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=self.app.mcp_missing() is None, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities(), resume=SessionResumeCapabilities(),
                                                         close=SessionCloseCapabilities(), delete=SessionDeleteCapabilities()),
                nes=NES_CAPABILITIES),
            auth_methods=self._auth_methods(),
            agent_info=Implementation(name="margin-lsp", title="Margin", version=__version__))

    def _auth_methods(self) -> list[Any]:
        """An API key's environment variable, for a profile that needs one; none for a local server."""
        name = self.app.settings.current.profile(PROFILE).api_key_env
        if not name:
            return []
        return [EnvVarAuthMethod(type="env_var", id=f"env:{name}", name=f"API key in {name}",
                                 description=f"Margin reads the agent's API key from the environment variable {name}.",
                                 vars=[AuthEnvVar(name=name, label="API key", secret=True)])]

    async def authenticate(self, method_id: str, **_: Any) -> None:
        methods = {method.id: method for method in self._auth_methods()}
        if method_id not in methods:
            raise refused(f"There is no auth method {method_id!r}: the agent profile needs no key"
                          if not methods else f"There is no auth method {method_id!r}: use {next(iter(methods))}.")
        missing = [var.name for var in methods[method_id].vars if not os.environ.get(var.name)]
        if missing:
            raise RequestError.auth_required({"message": f"{missing[0]} is not set in the environment Margin runs in."})

    # --- sessions ------------------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        return session

    def _folder(self, cwd: str) -> tuple[Path, str]:
        path = Path(cwd)
        if not path.is_absolute() or not path.is_dir():
            raise refused(f"cwd must be an absolute path of a folder on this machine: {cwd!r} is not.")
        folder = path.resolve().as_uri()
        self.folders.add(folder)
        return path.resolve(), folder

    def _modes(self, session: Session) -> SessionModeState:
        return SessionModeState(current_mode_id=session.mode, available_modes=[
            SessionMode(id=mode, name=name, description=about) for mode, (name, about) in MODES.items()])

    async def _options(self, session: Session) -> list[Any]:
        settings = self.app.settings.current.profile(PROFILE)
        models = [settings.model] if settings.model else []
        info = await self.app.backends.probe(PROFILE, settings)  # a server that is down lists none
        models += [m for m in info.models if m not in models]
        current = session.model or (models[0] if models else "default")
        choices = [SessionConfigSelectOption(value=m, name=m) for m in models] or \
            [SessionConfigSelectOption(value="default", name="the server's model")]
        return [SessionConfigOptionSelect(type="select", id="model", name="Model", category="model",
                                          description="The model the agent asks, on the agent profile's server.",
                                          current_value=current, options=choices),
                SessionConfigOptionSelect(type="select", id="approvals", name="Approvals", category="mode",
                                          description="Whether an \"always\" answer is remembered in this session.",
                                          current_value=session.approvals,
                                          options=[SessionConfigSelectOption(value=v, name=n, description=d)
                                                   for v, (n, d) in APPROVALS.items()])]

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **_: Any) -> NewSessionResponse:
        path, folder = self._folder(cwd)
        thread = await self.app.storage.run(lambda store: store.new_thread(folder, CONTEXT, None))
        session = self.sessions[thread.id] = Session(thread.id, path, folder, not_started=self._servers(mcp_servers))
        log.info("acp session new id=%s mcp_servers_not_started=%d", thread.id, len(session.not_started))
        return NewSessionResponse(session_id=thread.id, modes=self._modes(session), config_options=await self._options(session),
                                  field_meta=_not_started_meta(session))

    async def _opened(self, cwd: str, session_id: str, mcp_servers: Any) -> Session:
        path, folder = self._folder(cwd)
        thread = await self.app.storage.run(lambda store: store.get_thread(session_id))
        if thread is None or thread.context != CONTEXT:
            raise RequestError.resource_not_found(session_id)
        known = self.sessions.get(session_id)
        session = self.sessions[session_id] = known or Session(thread.id, path, folder)
        session.not_started = self._servers(mcp_servers)
        return session

    def _servers(self, mcp_servers: Any) -> list[str]:
        """The client's MCP servers given to the agent's tools; those that cannot run, named."""
        runnable, not_started = client_servers(mcp_servers, self.app.mcp_missing())
        self.services.mcp.client_servers.update(runnable)
        return not_started

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, additional_directories: Any = None,
                           **_: Any) -> LoadSessionResponse:
        session = await self._opened(cwd, session_id, mcp_servers)
        for update in acp_door.replayed(await self.services.threads.timeline(session_id), session.cwd):
            await self.peer.update(session_id, update)
        return LoadSessionResponse(modes=self._modes(session), config_options=await self._options(session),
                                   field_meta=_not_started_meta(session))

    async def resume_session(self, session_id: str, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                             **_: Any) -> ResumeSessionResponse:
        session = await self._opened(cwd, session_id, mcp_servers)
        return ResumeSessionResponse(modes=self._modes(session), config_options=await self._options(session),
                                     field_meta=_not_started_meta(session))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> ListSessionsResponse:
        folder = Path(cwd).resolve().as_uri() if cwd else None
        listed = await self.services.threads.list_threads(folder)
        sessions = []
        for thread in listed.threads:
            where = path_of(thread.workspace)
            if thread.context != CONTEXT or where is None:
                continue
            title = thread.title or await self._title(thread.id)
            updated = datetime.datetime.fromtimestamp(thread.updated_at, datetime.UTC).isoformat()
            sessions.append(SessionInfo(session_id=thread.id, cwd=str(where), title=title, updated_at=updated))
        return ListSessionsResponse(sessions=sessions)

    async def _title(self, thread_id: str) -> str | None:
        messages = await self.app.storage.run(lambda store: store.messages(thread_id, include_hidden=False))
        first = next((m for m in messages if m.role == "user"), None)
        return " ".join(str(first.meta.get(DISPLAY, first.content)).split())[:60] if first is not None else None

    async def close_session(self, session_id: str, **_: Any) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None and session.running is not None:
            session.cancelled = True
            session.running.cancel()

    async def delete_session(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = str(params.get("sessionId", ""))
        await self.close_session(session_id)
        if not await self.services.threads.delete(session_id):
            raise RequestError.resource_not_found(session_id)
        return {}

    async def set_session_mode(self, mode_id: str, session_id: str, **_: Any) -> None:
        if mode_id not in MODES:
            raise refused(f"There is no mode {mode_id!r}: the modes are {', '.join(MODES)}.")
        self._session(session_id).mode = mode_id

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **_: Any) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        if config_id == "approvals":
            if value not in APPROVALS:
                raise refused(f"approvals is {' or '.join(APPROVALS)}, not {value!r}.")
            session.approvals = str(value)
            if value == "ask":  # nothing remembered any more
                self.services.agent.approvals.pop(session.id, None)
        elif config_id == "model":
            if not isinstance(value, str) or not value.strip():
                raise refused("model names a model of the agent profile's server.")
            session.model = None if value == "default" else value
        else:
            raise refused(f"There is no option {config_id!r}: the options are model and approvals.")
        return SetSessionConfigOptionResponse(config_options=await self._options(session))

    # --- a prompt ------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.running is not None and not session.running.done():
            raise refused("A prompt is already running in this session: cancel it first.")
        task = acp_door.task_of(prompt)
        if session.approvals == "ask":
            self.services.agent.approvals.pop(session.id, None)
        door = acp_door.AcpDoor(self.app, self.peer, session, self.client_files)
        if session.not_started:
            door.say(f"(MCP servers not started: {'; '.join(session.not_started)}. The agent works without "
                     f"{'it' if len(session.not_started) == 1 else 'them'}.)\n\n")
            session.not_started = []
        ask = AgentAsk(task, Where(thread_id=session.id), read_only=session.mode == "read-only",
                       folder=session.folder, model=session.model)
        session.cancelled = False
        session.running = asyncio.ensure_future(self._run(ask, door))
        try:
            outcome = await asyncio.shield(session.running)
        except asyncio.CancelledError:
            if not session.cancelled:  # the connection is closing: the turn goes with it
                session.running.cancel()
                raise
            await door.settled()
            log.info("acp prompt cancelled session=%s", session.id)
            return PromptResponse(stop_reason="cancelled")
        except MarginError as error:
            raise refused(str(error)) from None
        await door.settled()
        usage = outcome.usage
        sent, received = usage.prompt_tokens or 0, usage.completion_tokens or 0
        return PromptResponse(stop_reason=STOPS.get(outcome.stopped, "end_turn"),  # type: ignore[arg-type]
                              usage=Usage(input_tokens=sent, output_tokens=received, total_tokens=sent + received))

    async def _run(self, ask: AgentAsk, door: acp_door.AcpDoor) -> Any:
        await self.services.retrieval.indexed(ask.folder)
        return await self.services.agent.run(ask, door)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.running is None or session.running.done():
            return
        session.cancelled = True
        session.running.cancel()
