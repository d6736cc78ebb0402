"""An MCP server as the person configures it (`mcpServers`, a user-only setting: the settings
file, the editor's start-up options, MARGIN_MCP_SERVERS; never workspace settings) and what an
approval of it binds to.

An approval binds to the server's identity: the command, its arguments and the names of the
environment variables it is given (never their values), or the URL — plus, for a command, the
executable it resolves to on PATH and that file's size and sha256 (a program replaced by another of
the same size is a change too). Each tool's name, description and input
schema are pinned by hash as first approved. Anything else is "needs approval again", said with
what changed (`changes`): a committed config or an update that swaps the command runs nothing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, model_validator

from margin.core.settings_fields import MODEL_CONFIG

HELP = {
    "servers": ("MCP servers whose tools the agent may use, by name: `{\"fs\": {\"command\": \"npx\", \"args\": [...], "
                "\"env\": {...}}}` or `{\"docs\": {\"url\": \"https://...\", \"headers\": {...}}}`. Only your own places set "
                "it (never a workspace's); each is approved before it first runs, and again when its command, program or tools "
                "change (`margin mcp approve NAME`). Needs `margin-lsp[mcp]`."),
    "share": ("The share of the agent's window the MCP tools' schemas may take in every step; over it, the agent gets one "
              "`mcp` tool that searches, describes and calls them instead."),
    "read_only": ("Call an MCP tool without asking when its server marks it read-only and not open-world (annotations are "
                  "the server's word, not proof: off by default)."),
    "call": "Seconds an MCP tool call may take before the agent is told it did not answer.",
    "start": "Seconds an MCP server may take to start and list its tools.",
}
"""the MCP settings' descriptions (margin.core.settings.GlobalSettings)"""

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
"""a server's name: it prefixes its tools' names (`name__tool`)"""


class McpServer(BaseModel):
    """One server: a command run over stdio, or a Streamable HTTP URL."""

    model_config = MODEL_CONFIG

    command: Annotated[str | None, Field(min_length=1)] = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    """variables given to the command (it gets only these and a minimal PATH/HOME set: never
    Margin's own environment, which may hold API keys)"""
    url: Annotated[str | None, Field(min_length=1)] = None
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent to a URL server (an `Authorization` token): their names are shown and
    approved, never their values"""
    enabled: bool = True

    @model_validator(mode="after")
    def _one_way(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give an MCP server either a `command` (run over stdio) or a `url` (Streamable HTTP)")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"an MCP server's url is http:// or https://, not {self.url[:40]!r}")
        if self.headers and self.url is None:
            raise ValueError("`headers` go with a `url`; a command's server gets `env`")
        return self


def mcp_servers_value(value: Any) -> Any:
    """`mcpServers` as given: an object by name (JSON text from an environment variable); each
    name checked (it prefixes the server's tools)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise ValueError('must be a JSON object of servers by name: {"fs": {"command": "...", "args": [...]}}') from None
    if isinstance(value, dict):
        for name in value:
            if not isinstance(name, str) or not NAME.match(name):
                raise ValueError(f"an MCP server's name is letters, digits, '-' and '_' (at most 32), not {name!r}")
    return value


@dataclass(frozen=True)
class Executable:
    """What a command resolves to on PATH when it is approved or started: the path run (a venv's
    `python` or `npx` is a link, and runs as one), and the file it links to, with its size and
    the sha256 of its content."""

    path: str
    real: str
    size: int
    sha256: str = ""


_HASHED: dict[tuple[str, int, int, int, int, int], str] = {}
"""a file's sha256 by its path and what stat says of it (device, inode, size, modified and changed
times: a file written or replaced in place changes its ctime, which no one can set back), so a
program is read whole once per process, not at every status or start"""


def file_sha256(path: Path) -> str:
    """The sha256 of the file at `path` (OSError when it cannot be read)."""
    stat = path.stat()
    key = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if key not in _HASHED:
        digest = hashlib.sha256()
        with path.open("rb") as program:
            while chunk := program.read(1 << 20):
                digest.update(chunk)
        _HASHED[key] = digest.hexdigest()
    return _HASHED[key]


def resolve(command: str, env: dict[str, str] | None = None) -> Executable | None:
    """The file `command` runs (PATH searched as the server will be started), or None."""
    path = (env or {}).get("PATH") or os.environ.get("PATH", os.defpath)
    found = shutil.which(command, path=path)
    if found is None:
        return None
    real = Path(found).resolve()
    try:
        return Executable(str(Path(found).absolute()), str(real), real.stat().st_size, file_sha256(real))
    except OSError:
        return None


def identity(server: McpServer, executable: Executable | None) -> dict[str, Any]:
    """What an approval of `server` binds to (shown to the person whole)."""
    if server.url is not None:
        return {"url": server.url, "headers": sorted(server.headers)} if server.headers else {"url": server.url}
    return {"command": server.command, "args": list(server.args), "env": sorted(server.env),
            "executable": executable.path if executable else None, "program": executable.real if executable else None,
            "size": executable.size if executable else None, "sha256": executable.sha256 if executable else None}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                          .encode()).hexdigest()


def tool_pin(name: str, description: str, schema: dict[str, Any]) -> str:
    """A tool as approved: its name, description and input schema."""
    return digest({"name": name, "description": description, "schema": schema})


LABELS = {"command": "the command", "args": "its arguments", "env": "the environment variables' names",
          "executable": "the program it starts", "program": "the file that program is",
          "size": "the program's size", "sha256": "the program's content (sha256)", "url": "the URL",
          "headers": "the HTTP headers' names"}


def changes(approved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between the identity approved and the one now, in words."""
    said = []
    for key in dict.fromkeys([*approved, *now]):
        before, after = approved.get(key), now.get(key)
        if before != after:
            if key == "sha256" and before and after:
                before, after = f"{before[:16]}…", f"{after[:16]}…"
            said.append(f"{LABELS.get(key, key)}: {json.dumps(before, ensure_ascii=False)} → "
                        f"{json.dumps(after, ensure_ascii=False)}")
    return said


def describe(server: McpServer, executable: Executable | None) -> str:
    """The server as the person approves it: the full command line or URL, the environment's
    names (never values), and the program the command resolves to."""
    if server.url is not None:
        return f"URL {server.url}" + (f"; headers: {', '.join(sorted(server.headers))}" if server.headers else "")
    words = " ".join(json.dumps(word) if (not word or re.search(r"\s|\"", word)) else word
                     for word in (server.command or "", *server.args))
    env = f"; environment: {', '.join(sorted(server.env))}" if server.env else ""
    real = f" → {executable.real}" if executable and executable.real != executable.path else ""
    runs = (f"; runs {executable.path}{real} ({executable.size:,} bytes, sha256 {executable.sha256[:16]}…)"
            if executable else "; the program is not found on PATH")
    return f"command {words}{env}{runs}"
