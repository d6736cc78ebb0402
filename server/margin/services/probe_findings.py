"""What `margin doctor --probe` found, kept for the language server: per backend (base URL) and
model, the completion route that filled the hole, the routes the backend refused, and whether the
model calls a tool it is offered.

The findings are a JSON file beside the thread database (`threads.db` → `threads.probes.json`),
so they follow the user-only `database` setting and a workspace cannot point them elsewhere. A
newer probe of the same backend and model replaces the older; other backends' findings stay.

A finding is used only while it still describes the server it was made on: for a profile that
names no model (llama.cpp serves whatever it loaded), the models the backend lists must be the
ones it listed when probed, so a server restarted with another model is tried afresh. What the
server learns in use still wins over a finding (a route refused now is skipped from now on).
A file that cannot be read is ignored (and logged): Margin then finds routes by trying, as
without a probe.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from margin.core.llm import BackendInfo

log = logging.getLogger(__name__)

FORMAT = 1
Verdict = Literal["works", "wrong", "refused", "failed", "not tried"]
"""what a probe's check found: it works; it answered, wrongly; the backend refused it as
unsupported; it failed (an error that says nothing about the capability); it was not tried"""


@dataclass(frozen=True)
class Finding:
    base_url: str
    model: str | None
    served: tuple[str, ...]
    """the models the backend listed when probed"""
    routes: dict[str, Verdict]
    """by completion route, best first"""
    tools: Verdict
    probed_at: str
    agent_protocol: str | None = None
    """how the model acts as the agent (services/probe.py): native, json, text; None: in no way"""

    @property
    def fill_route(self) -> str | None:
        return next((route for route, verdict in self.routes.items() if verdict == "works"), None)

    @property
    def refused_routes(self) -> set[str]:
        return {route for route, verdict in self.routes.items() if verdict == "refused"}

    @property
    def takes_tools(self) -> bool | None:
        """True: it called the tool; False: refused, or answered in text; None: no verdict"""
        return True if self.tools == "works" else False if self.tools in ("wrong", "refused") else None

    def describes(self, info: BackendInfo | None) -> bool:
        """Whether the finding still holds for the backend as `info` (a fresh look) sees it."""
        if self.model is not None:
            return True  # the model is named: the same base URL and model are the same model
        return info is not None and info.reachable and tuple(sorted(info.models)) == self.served

    def as_dict(self) -> dict[str, Any]:
        return {"baseUrl": self.base_url, "model": self.model, "served": list(self.served), "routes": self.routes,
                "tools": self.tools, "probedAt": self.probed_at, "agentProtocol": self.agent_protocol}


FindingLookup = Callable[[str, "str | None", "BackendInfo | None"], "Finding | None"]
"""(base URL, model, what a fresh look at the backend saw) → the finding that holds, if any"""


def _key(base_url: str, model: str | None) -> tuple[str, str | None]:
    return base_url.rstrip("/"), model


def finding(base_url: str, model: str | None, served: tuple[str, ...], routes: dict[str, Verdict],
            tools: Verdict, agent_protocol: str | None = None, probed_at: str | None = None) -> Finding:
    return Finding(_key(base_url, model)[0], model, tuple(sorted(served)), dict(routes), tools,
                   probed_at or datetime.now(UTC).isoformat(timespec="seconds"), agent_protocol)


class ProbeFindings:
    """The findings file, read again whenever it changes on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._findings: dict[tuple[str, str | None], Finding] = {}

    def get(self, base_url: str, model: str | None, info: BackendInfo | None) -> Finding | None:
        """The finding for this backend and model, if there is one and it still holds."""
        found = self._read().get(_key(base_url, model))
        return found if found is not None and found.describes(info) else None

    def save(self, findings: list[Finding]) -> None:
        """Keep `findings`, replacing older ones for the same backends and models; written whole
        to a temporary file and renamed, so a reader never sees half a file."""
        kept = dict(self._read())
        kept.update((_key(f.base_url, f.model), f) for f in findings)
        text = json.dumps({"format": FORMAT, "findings": [f.as_dict() for f in kept.values()]}, indent=2)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._stamp = None

    def _read(self) -> dict[tuple[str, str | None], Finding]:
        try:
            stat = self.path.stat()
        except OSError:
            self._stamp, self._findings = None, {}
            return self._findings
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)  # each save is a new file (os.replace)
        if stamp != self._stamp:
            self._stamp, self._findings = stamp, self._parse()
        return self._findings

    def _parse(self) -> dict[tuple[str, str | None], Finding]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
            parsed = [_parse_one(entry) for entry in data["findings"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log.warning("probe findings ignored path=%s error=%s", self.path, type(error).__name__)
            return {}
        return {_key(f.base_url, f.model): f for f in parsed}


VERDICTS: tuple[Verdict, ...] = ("works", "wrong", "refused", "failed", "not tried")


def _verdict(value: Any) -> Verdict:
    if value not in VERDICTS:
        raise ValueError(f"unknown verdict {value!r}")
    return cast(Verdict, value)


def _parse_one(entry: dict[str, Any]) -> Finding:
    model = entry["model"]
    if not isinstance(entry["baseUrl"], str) or not (model is None or isinstance(model, str)):
        raise TypeError("baseUrl and model are strings")
    served = tuple(str(name) for name in entry["served"])
    routes = {str(route): _verdict(verdict) for route, verdict in entry["routes"].items()}
    protocol = entry.get("agentProtocol")  # absent from files written before it was probed
    if protocol not in (None, "native", "json", "text"):
        raise ValueError(f"unknown agent protocol {protocol!r}")
    return finding(entry["baseUrl"], model, served, routes, _verdict(entry["tools"]), protocol, str(entry["probedAt"]))
