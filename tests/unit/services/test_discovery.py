"""When `margin doctor` searches this machine for model servers, and what it prints about them."""

from __future__ import annotations

import pytest

from margin.core.local_servers import FoundServer
from margin.services.diagnosis import ProfileReport
from margin.services.discovery import ports_to_search, render_search, search_if_needed
from margin.wiring import find_local_servers
from tests.fakes.fake_ollama import FakeOllama

OLLAMA = FoundServer("127.0.0.1", 11434, "Ollama", ("qwen2.5-coder:1.5b",), "0.12.6", default_of=("Ollama",))


def report(name: str, *, reachable: bool | None, enabled: bool = True, base_url: str = "http://127.0.0.1:8080/v1",
           model: str | None = None) -> ProfileReport:
    return ProfileReport(name=name, enabled=enabled, base_url=base_url, model=model, api_key="none configured",
                         reachable=reachable, backend=None, context_window=4096, context_window_source="fallback",
                         tokenizer="heuristic", exact=False, tokenizer_state="ready", error=None)


class Finder:
    """A finder (the port margin.wiring fills with the loopback scan) that answers `found` without
    a network, remembering what it was asked."""

    def __init__(self, found: list[FoundServer]) -> None:
        self.found = found
        self.asked: list[tuple[int, ...]] = []

    async def __call__(self, ports):
        self.asked.append(tuple(ports))
        return self.found


async def test_no_search_when_every_enabled_backend_answers():
    finder = Finder([OLLAMA])
    reports = [report("chat", reachable=True), report("edit", reachable=None, enabled=False)]
    assert await search_if_needed(reports, finder, [11434]) is None
    assert finder.asked == []


async def test_a_backend_that_does_not_answer_starts_a_search_and_the_settings_are_printed_exactly():
    with FakeOllama(["qwen2.5-coder:1.5b"]) as ollama:  # the real loopback scan, as margin.wiring plugs it in
        search = await search_if_needed([report("chat", reachable=False), report("edit", reachable=False)],
                                        find_local_servers, [ollama.port])
    url = ollama.base_url
    assert search is not None and search.why == "nothing answered at http://127.0.0.1:8080/v1"
    assert render_search(search) == [
        ("Model servers on this machine (searched because nothing answered at http://127.0.0.1:8080/v1; "
         f"loopback ports {ollama.port}):"),
        f"  found Ollama 0.12.6 at {url}, serving qwen2.5-coder:1.5b",
        "  to use it, in VS Code's settings.json:",
        f'    "margin.defaults.baseUrl": "{url}",',
        '    "margin.defaults.model": "qwen2.5-coder:1.5b"',
        "  or in Margin's settings file or initializationOptions:",
        f'    {{"defaults": {{"baseUrl": "{url}", "model": "qwen2.5-coder:1.5b"}}}}',
        "  or in the environment:",
        f"    MARGIN_DEFAULTS_BASE_URL={url}",
        "    MARGIN_DEFAULTS_MODEL=qwen2.5-coder:1.5b",
    ]
    assert search.as_dict()["found"][0]["settings"]["environment"] == [
        f"MARGIN_DEFAULTS_BASE_URL={url}", "MARGIN_DEFAULTS_MODEL=qwen2.5-coder:1.5b"]


async def test_scan_on_request_marks_the_server_already_configured_and_says_when_none_is_found():
    configured = [report("chat", reachable=True, base_url="http://localhost:11434/v1/", model="qwen2.5-coder:1.5b")]
    search = await search_if_needed(configured, Finder([OLLAMA]), [11434], always=True)
    assert search is not None and search.why == "asked to (--scan)"
    assert render_search(search)[1:] == [
        "  found Ollama 0.12.6 at http://127.0.0.1:11434/v1, serving qwen2.5-coder:1.5b  (already configured)"]
    nothing = await search_if_needed([report("chat", reachable=False)], Finder([]), [1234])
    assert nothing is not None and "none answered" in render_search(nothing)[1]


def test_the_ports_come_from_the_command_line_else_the_environment_else_the_defaults():
    assert ports_to_search("5000", {"MARGIN_DOCTOR_PORTS": "6000"}) == (5000,)
    assert ports_to_search(None, {"MARGIN_DOCTOR_PORTS": "6000,6001"}) == (6000, 6001)
    assert ports_to_search(None, {}) == (8080, 11434, 1234, 8000, 1337)
    with pytest.raises(ValueError):
        ports_to_search(None, {"MARGIN_DOCTOR_PORTS": "ollama"})
