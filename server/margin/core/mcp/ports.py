"""The MCP client as a port (the composition root, margin.wiring, plugs in adapters.mcp_client,
on the `mcp` SDK: an optional extra, `margin-lsp[mcp]`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from margin.core.mcp.spec import McpServer


class McpFault(Exception):
    """A server failed: it did not start, stopped, did not answer in time, or answered what
    cannot be used. The message says which, for the person and the model."""


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool = False
    """annotations.readOnlyHint"""
    open_world: bool = True
    """annotations.openWorldHint (unset: true, as the spec says)"""


@dataclass(frozen=True)
class ToolAnswer:
    text: str
    """the content blocks as text (images and binary named, not inlined)"""
    is_error: bool = False
    size: int = 0
    """characters the server sent before any cut"""


@dataclass
class Started:
    tools: list[ListedTool] = field(default_factory=list)
    more: bool = False
    """the server listed more tools than are taken"""


class McpSession(Protocol):
    async def tools(self) -> Started:
        """The server's tools (every page, up to the cap)."""

    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> ToolAnswer:
        """Call a tool; McpFault when the server fails or does not answer within `timeout_s`."""

    async def close(self) -> None:
        """Stop the server (a command's process ends)."""


class McpConnector(Protocol):
    async def connect(self, name: str, server: McpServer, command: str | None, timeout_s: float) -> McpSession:
        """Start (a command: exactly the executable `command`, resolved and approved) or reach (a
        URL) the server and open its session within `timeout_s`; McpFault when it cannot."""


MissingExtra = Callable[[], str | None]
"""None when the MCP client can run; else what to install (the `mcp` extra)"""
