"""`margin doctor`'s search for a model server on this machine: when a profile's backend does
not answer (or when asked), the default ports of local model servers are searched and each
server found is shown with the settings that point Margin at it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from margin.core.local_servers import (
    DEFAULT_PORTS,
    PORTS_ENV,
    Finder,
    FoundServer,
    SettingLines,
    describe,
    parse_ports,
    settings_for,
)
from margin.services.diagnosis import ProfileReport


@dataclass(frozen=True)
class LocalSearch:
    why: str
    ports: tuple[int, ...]
    found: tuple[tuple[FoundServer, SettingLines, bool], ...]
    """each server found, the settings that point Margin at it, and whether a profile already does"""

    def as_dict(self) -> dict[str, object]:
        return {"why": self.why, "ports": list(self.ports), "found": [
            {**server.as_dict(), "configured": configured, "settings": lines.as_dict()}
            for server, lines, configured in self.found]}


def ports_to_search(given: str | None, environ: Mapping[str, str]) -> tuple[int, ...]:
    """`given` (the command line's), else $MARGIN_DOCTOR_PORTS, else the default ports of local
    model servers. ValueError when the ports given are not port numbers."""
    text = given if given is not None else environ.get(PORTS_ENV)
    return parse_ports(text) if text is not None else tuple(known.port for known in DEFAULT_PORTS)


def _same_backend(a: str, b: str) -> bool:
    return a.rstrip("/").replace("localhost", "127.0.0.1") == b.rstrip("/").replace("localhost", "127.0.0.1")


async def search_if_needed(reports: Sequence[ProfileReport], find: Finder, ports: Sequence[int], *,
                           always: bool = False) -> LocalSearch | None:
    """Searches `ports` when an enabled profile's backend did not answer, or `always`; None when
    there was no need."""
    unreachable = list(dict.fromkeys(r.base_url for r in reports if r.enabled and r.reachable is False))
    if not unreachable and not always:
        return None
    why = f"nothing answered at {', '.join(unreachable)}" if unreachable else "asked to (--scan)"
    found = await find(ports)
    models = [r.model for r in reports if r.enabled]
    return LocalSearch(why, tuple(ports), tuple(
        (server, settings_for(server, models), any(_same_backend(server.base_url, r.base_url) for r in reports))
        for server in found))


def render_search(search: LocalSearch) -> list[str]:
    """The lines `margin doctor` prints about the search."""
    ports = ", ".join(map(str, search.ports))
    lines = [f"Model servers on this machine (searched because {search.why}; loopback ports {ports}):"]
    if not search.found:
        lines.append("  none answered. Start one (e.g. `llama-server -m MODEL.gguf --port 8080`, "
                     "`ollama serve`), or set margin.defaults.baseUrl to where yours listens.")
    for server, settings, configured in search.found:
        lines.append(f"  found {describe(server)}" + ("  (already configured)" if configured else ""))
        if configured:
            continue
        lines.append("  to use it, in VS Code's settings.json:")
        lines.extend(f"    {line}{',' if n < len(settings.editor) else ''}"
                     for n, line in enumerate(settings.editor, 1))
        lines.append("  or in Margin's settings file or initializationOptions:")
        lines.append(f"    {settings.settings_file}")
        lines.append("  or in the environment:")
        lines.extend(f"    {line}" for line in settings.environment)
    return lines
