"""The person's approvals of MCP servers, kept in `mcp-approvals.json` beside the thread
database (readable by the user alone): for each server, the identity approved (core.mcp.spec)
and each tool's pin. Written whole to a temporary file and moved into place, so a reader never
sees half of it; `margin mcp approve` and every server process share it."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE = "mcp-approvals.json"


@dataclass
class Approved:
    identity: dict[str, Any]
    hash: str
    tools: dict[str, str] = field(default_factory=dict)
    """each tool's pin (core.mcp.spec.tool_pin) by its name on the server"""
    at: float = 0.0


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
                                     float(entry.get("at", 0.0)))
        return out

    def get(self, name: str) -> Approved | None:
        return self.load().get(name)

    def put(self, name: str, approved: Approved) -> None:
        servers = self.load()
        approved.at = approved.at or time.time()
        servers[name] = approved
        self._write(servers)

    def forget(self, name: str) -> bool:
        servers = self.load()
        if servers.pop(name, None) is None:
            return False
        self._write(servers)
        return True

    def _write(self, servers: dict[str, Approved]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {"servers": {name: {"identity": a.identity, "hash": a.hash, "tools": a.tools, "at": a.at}
                            for name, a in sorted(servers.items())}}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=1, sort_keys=True)
        os.replace(tmp, self.path)
