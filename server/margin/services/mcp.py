"""The person's MCP servers and their tools for the agent (docs/mcp.md).

- **Where servers come from**: `mcpServers` (a user-only setting: the settings file, the
  editor's start-up options, MARGIN_MCP_SERVERS; workspace settings asking for it are refused and
  told) and, in ACP, the client's `session/new` list. Files a repository holds that name servers
  (`.mcp.json`, `.vscode/mcp.json`, `.cursor/mcp.json`) are never read for servers: they are only
  named in the status, so the person knows they were ignored.
- **Approval pinned**: nothing runs until the person approved the server's identity
  (core.mcp.spec: the command line, the environment's names, the program it resolves to and its
  size; or the URL) — asked through the turn's door the first time, or ahead with `margin mcp
  approve NAME`. A different identity is "needs approval again", said with what changed. Each
  tool's name, description and schema are pinned as first listed; a tool that changed or
  appeared since is withheld until approved again.
- **Tools**: namespaced `server__tool`; each call confirmed (an opt-in lets tools their server
  marks read-only and closed-world run unasked); results wrapped as the server's data, capped.
- **Faults**: a server that does not start, stops, does not answer in time or answers too much
  is a message in the step; the turn goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.core.agent.tools import Tool
from margin.core.mcp import spec
from margin.core.mcp import tools as mcp_tools
from margin.core.mcp.ports import ListedTool, McpConnector, McpFault, McpSession, MissingExtra
from margin.core.mcp.spec import McpServer
from margin.core.mcp.tools import META, envelope, tool_of
from margin.services import agent_prompt
from margin.services.agent_turn import Door, Turn
from margin.services.app import MarginApp
from margin.services.mcp_approvals import ApprovalFile, Approved, approval_question, ignored_configs, tools_question

log = logging.getLogger(__name__)

@dataclass
class ServerState:
    name: str
    server: McpServer
    origin: str
    """`settings`, or `client` (ACP's session/new)"""
    state: str = "configured"
    """configured, needs approval, refused, starting, running, failed, off, needs the extra"""
    detail: str = ""
    tools: list[ListedTool] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    """tools that changed or appeared since approved"""
    more: bool = False
    pins: dict[str, str] = field(default_factory=dict)
    """each listed tool's pin, as listed now"""
    session: McpSession | None = None
    schema_tokens: int = 0

    def summary(self) -> dict[str, Any]:
        kind = "url" if self.server.url else "command"
        return {"name": self.name, "origin": self.origin, "transport": "http" if kind == "url" else "stdio",
                "state": self.state, "detail": self.detail, "tools": len(self.tools) - len(self.withheld),
                "withheld": list(self.withheld)}


class McpHub:
    def __init__(self, app: MarginApp, connector: McpConnector | None, missing: MissingExtra,
                 approvals_path: Callable[[], Path]) -> None:
        self.app = app
        self.connector = connector
        self.missing = missing
        self.approvals_path = approvals_path
        self.states: dict[str, ServerState] = {}
        self.client_servers: dict[str, McpServer] = {}
        """servers an ACP client named for its sessions"""
        self._once: dict[str, str] = {}
        """identities approved for as long as Margin runs ("Allow" rather than "Always"), by name"""
        self._once_pins: dict[str, dict[str, str]] = {}
        self._refused: dict[str, str] = {}
        """identities the person refused, by name: not asked again while Margin runs"""
        self._tools_once: dict[str, dict[str, str]] = {}
        """changed tools allowed for as long as Margin runs, by server"""
        self._tools_refused: dict[str, set[tuple[str, str]]] = {}
        """changed tools (name, pin) the person refused, by server: not asked again while Margin runs"""
        self._lock = asyncio.Lock()
        self._told: dict[str, tuple[str, str]] = {}
        """the state each server's trouble was last told to the person in"""

    @property
    def file(self) -> ApprovalFile:
        return ApprovalFile(self.approvals_path())

    def configured(self) -> dict[str, tuple[McpServer, str]]:
        servers = {name: (server, "settings") for name, server in self.app.settings.current.globals.mcp_servers.items()}
        for name, server in self.client_servers.items():
            servers.setdefault(name, (server, "client"))
        return servers

    def status(self, folders: Sequence[Path] = ()) -> dict[str, Any]:
        """Each server's state, and the repository files that name servers (never read for them)."""
        servers = []
        for name, (server, origin) in self.configured().items():
            state = self.states.get(name) or ServerState(name, server, origin)
            missing = self.missing() if self.connector is not None else "the MCP client is not available here"
            if not server.enabled:
                state.state = "off"
            elif missing is not None:
                state.state, state.detail = "needs the extra", missing
            elif state.state == "configured":
                state.state, state.detail = self._approval_state(name, server)
            servers.append(state.summary())
        return {"servers": servers, "ignored": ignored_configs(folders)}

    def _approval_state(self, name: str, server: McpServer) -> tuple[str, str]:
        identity = spec.identity(server, self._executable(server))
        approved = self.file.get(name)
        if approved is not None and approved.hash == spec.digest(identity):
            return "approved", ""
        if self._once.get(name) == spec.digest(identity):
            return "approved", "for as long as Margin runs"
        if approved is not None:
            return "needs approval", "changed since approved: " + "; ".join(spec.changes(approved.identity, identity))
        return "needs approval", "not approved yet: `margin mcp approve " + name + "`, or approve it when the agent asks"

    def _executable(self, server: McpServer) -> spec.Executable | None:
        return spec.resolve(server.command, server.env) if server.command else None

    # --- the tools a turn is offered -----------------------------------------------------------

    async def offered(self, door: Door | None, *, read_only: bool = False) -> list[Tool]:
        """The tools of every server that is approved (asking through `door` for one that is not,
        when there is a door), started and listed; a server that cannot be is skipped, its state
        saying why."""
        tools: list[Tool] = []
        async with self._lock:
            for name, (server, origin) in self.configured().items():
                state = self.states.setdefault(name, ServerState(name, server, origin))
                if state.server != server:  # the settings changed: start again with the new ones
                    await self._stop(state)
                    state = self.states[name] = ServerState(name, server, origin)
                if not server.enabled:
                    state.state = "off"
                    continue
                ready = await self._ready(state, door)
                self._tell(state, door is not None)
                if ready:
                    for listed in state.tools:
                        tool = tool_of(name, listed)
                        if listed.name in state.withheld or (read_only and (not listed.read_only or listed.open_world)):
                            continue
                        if any(t.name == tool.name for t in tools):  # two names alike once made fit: the first
                            continue
                        tools.append(tool)
        return tools

    async def offer(self, turn: Turn, door: Door | None) -> None:
        """The person's MCP tools for `turn`, before `finish` — themselves, or through the `mcp`
        meta-tool when their schemas would take more than mcpToolsShare of the window."""
        out = turn.outcome
        if not self.configured() or out is None:
            return
        found = await self.offered(door, read_only=turn.ask.read_only)
        if not found:
            return
        turn.mcp_tools = {tool.name: tool for tool in found}
        base = turn.tools
        cost = await agent_prompt.tools_tokens(turn, (*base, *found)) - await agent_prompt.tools_tokens(turn, base)
        share = self.app.settings.current.globals.mcp_tools_share
        offered = tuple(found) if cost <= share * out.window else (META,)
        turn.tools = (*base[:-1], *offered, base[-1])
        out.mcp_tokens = (cost if offered == tuple(found)
                          else await agent_prompt.tools_tokens(turn) - await agent_prompt.tools_tokens(turn, base))
        log.info("agent mcp tools offered=%d meta=%s tokens=%d thread=%s", len(found), offered == (META,),
                 out.mcp_tokens, turn.thread.id)

    async def _ready(self, state: ServerState, door: Door | None) -> bool:
        if state.session is not None:
            return True
        missing = self.missing()
        if missing is not None or self.connector is None:
            state.state, state.detail = "needs the extra", missing or "the MCP client is not available here"
            return False
        server, name = state.server, state.name
        executable = await asyncio.to_thread(self._executable, server)  # its program read whole once
        if server.command and executable is None:
            state.state, state.detail = "failed", f"{server.command!r} is not found on PATH"
            return False
        identity = spec.identity(server, executable)
        wanted = spec.digest(identity)
        approved = self.file.get(name)
        if not ((approved is not None and approved.hash == wanted) or self._once.get(name) == wanted):
            if self._refused.get(name) == wanted:
                state.state, state.detail = "refused", "refused while Margin runs; `margin mcp approve " + name + "`"
                return False
            if door is None:
                state.state, state.detail = self._approval_state(name, server)
                return False
            timeout = self.app.settings.current.globals.agent_confirm_timeout_s
            try:
                decision = await asyncio.wait_for(door.confirm(approval_question(name, server, executable, approved,
                                                                                 identity)), timeout)
            except TimeoutError:
                state.state, state.detail = "needs approval", f"not answered within {timeout:g} s"
                return False
            if decision == "always":
                self.file.put(name, Approved(identity, wanted))
            elif decision == "accept":
                self._once[name] = wanted
            else:
                self._refused[name] = wanted
                state.state, state.detail = "refused", "the person did not approve it"
                log.info("mcp server refused name=%s", name)
                return False
        if not await self._start(state, executable, wanted):
            return False
        await self._review_tools(state, door, wanted)
        return True

    def _tell(self, state: ServerState, asked: bool) -> None:
        """A server that cannot give its tools is said to the person (the editor's message, the
        terminal's stderr) once per trouble, when a turn would have used it."""
        trouble = (state.state, state.detail)
        if not asked or state.state not in ("failed", "needs the extra", "needs approval"):
            if state.state == "running":
                self._told.pop(state.name, None)
            return
        if self._told.get(state.name) != trouble:
            self._told[state.name] = trouble
            self.app.tell_user(f"MCP server {state.name!r} {state.state}: {state.detail}. The agent works without its tools.")

    def _known(self, name: str, wanted: str) -> dict[str, str]:
        """The tools' pins the person approved for this identity (stored, or for this run)."""
        approved = self.file.get(name)
        known = dict(approved.tools) if approved is not None and approved.hash == wanted else dict(self._once_pins.get(name, {}))
        known.update(self._tools_once.get(name, {}))
        return known

    async def _review_tools(self, state: ServerState, door: Door | None, wanted: str) -> None:
        """Tools that changed or appeared since approved: withheld, and asked about through `door`
        (once per change while Margin runs)."""
        known = self._known(state.name, wanted)
        state.withheld = sorted(name for name, pin in state.pins.items() if known.get(name) != pin)
        refused = self._tools_refused.setdefault(state.name, set())
        asking = [t for t in state.tools if t.name in state.withheld and (t.name, state.pins[t.name]) not in refused]
        if asking and door is not None:
            approved = self.file.get(state.name)
            before = approved.descriptions if approved is not None and approved.hash == wanted else {}
            timeout = self.app.settings.current.globals.agent_confirm_timeout_s
            try:
                decision = await asyncio.wait_for(door.confirm(tools_question(state.name, asking, before)), timeout)
            except TimeoutError:
                decision = "expired"
            changed = {t.name: state.pins[t.name] for t in asking}
            if decision == "always" and approved is not None and approved.hash == wanted:
                approved.tools.update(changed)
                approved.descriptions.update({t.name: t.description for t in asking})
                self.file.put(state.name, approved)
            elif decision in ("always", "accept"):
                self._tools_once.setdefault(state.name, {}).update(changed)
            elif decision == "reject":
                refused.update(changed.items())
            known = self._known(state.name, wanted)
            state.withheld = sorted(name for name, pin in state.pins.items() if known.get(name) != pin)
        state.detail = (f"{len(state.withheld)} tool(s) changed or new since approved, withheld until approved again: "
                        + ", ".join(state.withheld[:10]) if state.withheld else "")
        if state.more:
            state.detail = (state.detail + "; " if state.detail else "") + f"listed more than {len(state.tools)} tools: the rest left out"

    async def _start(self, state: ServerState, executable: spec.Executable | None, wanted: str) -> bool:
        assert self.connector is not None
        limits = self.app.settings.current.globals
        state.state, state.detail = "starting", ""
        try:
            session = await self.connector.connect(state.name, state.server, executable.path if executable else None,
                                                   limits.mcp_start_timeout_s)
            try:
                listed = await asyncio.wait_for(session.tools(), limits.mcp_start_timeout_s)
            except TimeoutError:
                await session.close()
                raise McpFault(f"it did not list its tools within {limits.mcp_start_timeout_s:g} s") from None
            except McpFault:
                await session.close()
                raise
        except McpFault as fault:
            state.state, state.detail = "failed", str(fault)
            log.info("mcp server failed to start name=%s", state.name)
            return False
        state.session, state.tools, state.more = session, listed.tools, listed.more
        state.pins = {tool.name: spec.tool_pin(tool.name, tool.description, tool.schema) for tool in listed.tools}
        approved = self.file.get(state.name)
        if approved is not None and approved.hash == wanted:
            if not approved.tools:  # approved ahead of its first start: its tools are pinned as listed now
                approved.tools = dict(state.pins)
                approved.descriptions = {tool.name: tool.description for tool in listed.tools}
                self.file.put(state.name, approved)
        else:
            self._once_pins.setdefault(state.name, dict(state.pins))
        state.state = "running"
        log.info("mcp server started name=%s tools=%d", state.name, len(state.tools))
        return True

    # --- calls ---------------------------------------------------------------------------------

    def auto_approved(self, tool: Tool) -> bool:
        """A call that runs unasked: only by the person's opt-in, for a tool its server marks
        read-only and closed-world."""
        if not self.app.settings.current.globals.mcp_auto_approve_read_only:
            return False
        state = self.states.get(tool.server)
        listed = next((t for t in state.tools if t.name == tool.remote), None) if state else None
        return bool(listed and listed.read_only and not listed.open_world)

    async def call(self, tool: Tool, args: dict[str, Any]) -> tuple[str, str]:
        """(status, what the model is shown) for one confirmed call."""
        state = self.states.get(tool.server)
        if state is None or state.session is None:
            return "failed", f"The MCP server {tool.server!r} is not running ({state.detail if state else 'not configured'})."
        timeout = self.app.settings.current.globals.mcp_call_timeout_s
        try:
            answer = await state.session.call(tool.remote, args, timeout)
        except McpFault as fault:
            await self._stop(state)
            state.state, state.detail = "failed", str(fault)
            log.info("mcp call failed server=%s tool=%s", tool.server, tool.remote)
            return "failed", (f"The MCP server {tool.server!r} failed during {tool.name}: {fault}. It is started again "
                              "at the next turn; do something else now.")
        text = mcp_tools.cut(answer.text, answer.size)
        log.info("mcp call server=%s tool=%s chars=%d error=%s", tool.server, tool.remote, answer.size, answer.is_error)
        return ("failed" if answer.is_error else "done"), envelope(tool, text, answer.is_error)

    async def stop(self) -> None:
        for state in list(self.states.values()):
            await self._stop(state)

    async def _stop(self, state: ServerState) -> None:
        session, state.session = state.session, None
        if session is not None:
            try:
                await session.close()
            except Exception:  # noqa: BLE001 — boundary: a server that fails to stop is left to its own end
                log.info("mcp server did not stop cleanly name=%s", state.name)

    def describe(self, tool: Tool) -> str:
        """The meta-tool's `describe`: the description whole, as the server lists it."""
        state = self.states.get(tool.server)
        listed = next((t for t in state.tools if t.name == tool.remote), None) if state else None
        return mcp_tools.describe(tool, listed.description if listed else tool.description)
