"""The wire format of margin/status (see lsp/wire.py for the rest of Margin's own requests).

A profile's status is services.diagnosis.ProfileStatus in camelCase: its fields, and the
docstring of each, are declared there once for margin/status and `margin doctor` alike."""

from __future__ import annotations

from margin.lsp.wire import _Wire
from margin.services.diagnosis import ProfileStatus
from margin.services.retrieval import Progress


class StatusParams(_Wire):
    refresh: bool = False
    """Probe the backends again instead of reusing a recent probe."""


class FileStatusModel(_Wire):
    uri: str
    version: int
    """the editor's version of it"""
    fingerprint: str
    """sha256 of its text"""
    language_id: str
    """as the editor named it"""


class ProfileStatusModel(ProfileStatus, _Wire):
    pass


class IndexStatusModel(_Wire):
    folder: str
    """the workspace folder's URI"""
    ready: bool
    """the folder's scan has ended: every file is indexed (while false, requests are answered
    from what is indexed so far where the index is kept on disk)"""
    files_scanned: int
    """files the scan has come to so far"""
    files_reused: int
    """of them, taken over unread from the index kept by an earlier run"""
    files_expected: int | None
    """files the kept index held as the scan began (about how many the scan will find), or
    null while it is being opened"""

    @classmethod
    def of_folder(cls, folder: str, progress: Progress) -> IndexStatusModel:
        return cls(folder=folder, ready=progress.ready, files_scanned=progress.scanned,
                   files_reused=progress.reused, files_expected=progress.expected)


class McpServerStatusModel(_Wire):
    name: str
    origin: str
    """`settings` (mcpServers), or `client` (an ACP client's session)"""
    transport: str
    """stdio (a command) or http (a URL)"""
    state: str
    """off, needs approval, approved, refused, starting, running, failed, needs the extra"""
    detail: str
    """why, in words: what changed since approved, why it failed, what to install"""
    tools: int
    """tools offered to the agent"""
    withheld: list[str]
    """tools that changed or appeared since approved: not offered until approved again"""


class McpIgnoredModel(_Wire):
    file: str
    """a file in a workspace folder that names MCP servers for other tools (`.mcp.json`, ...)"""
    servers: list[str]
    """the names it gives: never run by Margin"""


class StatusResult(_Wire):
    version: str
    """Margin's version"""
    position_encoding: str
    """utf-16, utf-8 or utf-32: the one agreed at `initialize`"""
    profiles: dict[str, ProfileStatusModel]
    """each profile by name"""
    files: list[FileStatusModel]
    """the open documents"""
    background: list[str]
    """work running after its request was answered, e.g. `summary <threadId>`"""
    indexes: list[IndexStatusModel]
    """each workspace folder's retrieval index, as far as it is built"""
    mcp_servers: list[McpServerStatusModel]
    """each MCP server the person configured, and its state (docs/mcp.md)"""
    mcp_ignored: list[McpIgnoredModel]
    """files of the workspace that name MCP servers Margin does not run"""
