"""The person's approvals of MCP servers, kept in `mcp-approvals.json` beside the thread
database (readable by the user alone): for each server, the identity approved (core.mcp.spec)
and each tool's pin and description. Written whole to a temporary file and moved into place, so
a reader never sees half of it; `margin mcp approve` and every server process share it, each
change read, made and written under a lock on `mcp-approvals.json.lock` (two processes approving
at once both keep theirs). Also
the questions the person is asked (a server's first start, its tools that changed), and the
files a repository holds that name servers for other tools (named to the person, never run)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.core.mcp import spec
from margin.core.mcp.ports import ListedTool
from margin.core.mcp.spec import McpServer
from margin.services.agent_turn import Confirm

FILE = "mcp-approvals.json"


@dataclass
class Approved:
    identity: dict[str, Any]
    hash: str
    tools: dict[str, str] = field(default_factory=dict)
    """each tool's pin (core.mcp.spec.tool_pin) by its name on the server"""
    at: float = 0.0
    descriptions: dict[str, str] = field(default_factory=dict)
    """each tool's description as approved (to show what changed)"""


class ApprovalFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Approved]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable: nothing is approved (asked again), never more
        out = {}
        for name, entry in (raw.get("servers") or {}).items() if isinstance(raw, dict) else ():
            with contextlib.suppress(KeyError, TypeError, AttributeError):
                out[name] = Approved(dict(entry["identity"]), str(entry["hash"]),
                                     {str(k): str(v) for k, v in (entry.get("tools") or {}).items()},
                                     float(entry.get("at", 0.0)),
                                     {str(k): str(v) for k, v in (entry.get("descriptions") or {}).items()})
        return out

    def get(self, name: str) -> Approved | None:
        return self.load().get(name)

    def put(self, name: str, approved: Approved) -> None:
        with self._locked():
            servers = self.load()
            approved.at = approved.at or time.time()
            servers[name] = approved
            self._write(servers)

    def forget(self, name: str) -> bool:
        with self._locked():
            servers = self.load()
            if servers.pop(name, None) is None:
                return False
            self._write(servers)
            return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Held while a change is read, made and written (a change takes milliseconds)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, servers: dict[str, Approved]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {"servers": {name: {"identity": a.identity, "hash": a.hash, "tools": a.tools, "at": a.at,
                                   "descriptions": a.descriptions}
                            for name, a in sorted(servers.items())}}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


REPOSITORY_CONFIGS = (".mcp.json", ".vscode/mcp.json", ".cursor/mcp.json", ".gemini/settings.json",
                      ".zed/settings.json")
"""files in which a repository may name MCP servers for other tools: never read for servers"""


def approval_question(name: str, server: McpServer, executable: spec.Executable | None,
                      approved: Approved | None, identity: dict[str, Any]) -> Confirm:
    what = spec.describe(server, executable)
    if approved is not None:
        changed = "; ".join(spec.changes(approved.identity, identity))
        message = (f"The MCP server {name!r} changed since you approved it ({changed}). Start it as it is now? {what}")
    else:
        message = f"Start the MCP server {name!r} for the agent? It runs with your rights, outside the sandbox: {what}"
    return Confirm("mcp", f"start MCP server {name}", message=message, args={"server": name, "identity": spec.digest(identity)},
                   lasting=True)


def tools_question(name: str, changed: list[ListedTool], approved: dict[str, str]) -> Confirm:
    """The tools of an approved server that changed or appeared since, with what each says now."""
    def said(tool: ListedTool) -> str:
        now = " ".join(tool.description.split())[:300]
        if tool.name not in approved:
            return f"- {tool.name} (new): {now}"
        before = " ".join(approved[tool.name].split())[:300]
        return (f"- {tool.name}: its description was {before!r}, now {now!r}" if before != now
                else f"- {tool.name}: its arguments' schema changed")
    message = (f"The MCP server {name!r} changed {len(changed)} of its tools since you approved it; they are withheld "
               "until you approve them:\n" + "\n".join(said(t) for t in changed[:10]))
    return Confirm("mcp", f"MCP server {name}: tools changed", message=message,
                   args={"server": name, "tools": sorted(t.name for t in changed)}, lasting=True)


def ignored_configs(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Files in the workspace folders that name MCP servers for other tools: Margin never runs
    them (a repository may not choose a program to run), and says so."""
    found = []
    for folder in folders:
        for relative in REPOSITORY_CONFIGS:
            path = folder / relative
            try:
                if not path.is_file() or path.stat().st_size > 1_000_000:
                    continue
                data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            except (OSError, ValueError):
                continue
            servers = _server_names(data)
            if servers:
                found.append({"file": str(path), "servers": servers})
    return found


def _server_names(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return []
    for key in ("mcpServers", "servers", "context_servers"):
        value = data.get(key)
        if isinstance(value, dict) and value:
            return sorted(str(name) for name in value)[:20]
    return []


def told_ignored(ignored: list[dict[str, Any]]) -> str:
    if not ignored:
        return ""
    names = "; ".join(f"{Path(i['file']).name} names {', '.join(i['servers'])}" for i in ignored)
    return (f"The workspace names MCP servers ({names}): Margin ignores them, since a repository may not choose "
            "a program to run. Add the ones you trust to mcpServers in your own settings.")
