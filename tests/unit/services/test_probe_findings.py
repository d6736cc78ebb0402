"""What `margin doctor --probe` found is kept beside the thread database and followed: the route
that filled the hole is taken without asking again, refused routes are skipped, and the recall
tool is offered only to a model that called the probe's tool; a finding made on another model,
or a damaged file, is not followed."""

from __future__ import annotations

import json

import pytest

from margin.adapters.openai_http import OpenAICompatibleProvider
from margin.core.llm import BackendInfo
from margin.services.completion_routes import RouteMemory
from margin.services.probe_findings import ProbeFindings, finding
from tests.fakes.fake_openai import raw, status
from tests.fakes.fake_provider import FakeProvider, close, fake_app

LLAMA_URL = "http://127.0.0.1:1/v1"
GEMMA = ("gemma-3-270m-q4_k_m.gguf",)


def llama(models: tuple[str, ...] = GEMMA, tools: bool | None = None) -> BackendInfo:
    return BackendInfo(LLAMA_URL, True, kind="llama.cpp", context_window=4096, models=models, tools=tools)


def test_findings_are_kept_per_backend_and_model_and_a_newer_probe_replaces_the_older(tmp_path):
    kept = ProbeFindings(tmp_path / "threads.probes.json")
    kept.save([finding(LLAMA_URL + "/", None, GEMMA, {"infill": "refused", "chat": "wrong"}, "wrong"),
               finding("https://api.example.com/v1", "m1", (), {"chat": "works"}, "works")])
    kept.save([finding(LLAMA_URL, None, GEMMA, {"infill": "works", "chat": "wrong"}, "refused")])
    again = ProbeFindings(tmp_path / "threads.probes.json")  # another process reads the same file
    now = again.get(LLAMA_URL, None, llama())
    assert now is not None and now.fill_route == "infill" and now.refused_routes == set()
    assert now.takes_tools is False
    other = again.get("https://api.example.com/v1/", "m1", None)
    assert other is not None and other.fill_route == "chat" and other.takes_tools is True
    data = json.loads((tmp_path / "threads.probes.json").read_text())
    assert data["format"] == 1 and len(data["findings"]) == 2
    assert not list(tmp_path.glob("*.tmp"))


def test_how_the_model_acts_as_the_agent_is_kept_and_a_file_from_before_it_is_read(tmp_path):
    kept = ProbeFindings(tmp_path / "p.json")
    kept.save([finding(LLAMA_URL, None, GEMMA, {"infill": "works"}, "wrong", "json")])
    found = ProbeFindings(tmp_path / "p.json").get(LLAMA_URL, None, llama())
    assert found is not None and found.agent_protocol == "json"
    data = json.loads((tmp_path / "p.json").read_text())
    del data["findings"][0]["agentProtocol"]  # as written before the agent was probed
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = ProbeFindings(tmp_path / "old.json").get(LLAMA_URL, None, llama())
    assert old is not None and old.agent_protocol is None and old.fill_route == "infill"
    data["findings"][0]["agentProtocol"] = "telepathy"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    assert ProbeFindings(tmp_path / "bad.json").get(LLAMA_URL, None, llama()) is None


def test_a_finding_made_on_another_served_model_is_not_followed(tmp_path):
    kept = ProbeFindings(tmp_path / "p.json")
    kept.save([finding(LLAMA_URL, None, GEMMA, {"infill": "refused"}, "works")])
    assert kept.get(LLAMA_URL, None, llama()) is not None
    assert kept.get(LLAMA_URL, None, llama(("qwen2.5-coder-1.5b-q8_0.gguf",))) is None  # restarted with another
    assert kept.get(LLAMA_URL, None, BackendInfo(LLAMA_URL, False)) is None  # down: nothing to compare
    assert kept.get(LLAMA_URL, "named", llama()) is None


@pytest.mark.parametrize("text", ["{", '{"format": 9, "findings": []}', '{"format": 1, "findings": [{"x": 1}]}',
                                  ('{"format": 1, "findings": [{"baseUrl": "u", "model": null, "served": [], '
                                   '"routes": {"infill": "maybe"}, "tools": "works", "probedAt": "t"}]}'), "[]"])
def test_a_damaged_file_is_ignored(tmp_path, text, caplog):
    (tmp_path / "p.json").write_text(text)
    assert ProbeFindings(tmp_path / "p.json").get("u", None, None) is None
    assert "probe findings ignored" in caplog.text


async def test_the_route_that_filled_the_hole_is_taken_without_asking_llama_cpp_again(fake):
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=10)
    kept = [finding(fake.base_url, None, GEMMA, {"infill": "works", "chat": "wrong"}, "works")]
    try:
        memory = RouteMemory(lambda base_url, model, info: kept[0] if kept[0].describes(info) else None)
        assert await memory.route(provider, llama(), fake.base_url, None, False) == "infill"
        assert fake.posts == []  # without the finding, a one-token /infill asks first
        kept[0] = finding(fake.base_url, None, GEMMA, {"infill": "refused", "chat": "wrong"}, "works")
        refused = RouteMemory(lambda base_url, model, info: kept[0])
        assert await refused.route(provider, llama(), fake.base_url, None, False) == "chat"
        assert fake.posts == []
        # an answer that was wrong is no refusal: the route is asked, as without a probe
        fake.routes["/infill"] = [raw(json.dumps({"content": "", "timings": {"prompt_n": 1}}))]
        kept[0] = finding(fake.base_url, None, GEMMA, {"infill": "wrong", "chat": "wrong"}, "works")
        wrong = RouteMemory(lambda base_url, model, info: kept[0])
        assert await wrong.route(provider, llama(), fake.base_url, None, False) == "infill"
        assert [path for path, _ in fake.posts] == ["/infill"]
        # a finding that names a route this backend does not offer changes nothing
        fake.routes["/infill"] = [status(501, {"error": {"code": 501, "type": "not_supported_error", "message": "no"}})]
        kept[0] = finding(fake.base_url, None, GEMMA, {"mistral_fim": "works"}, "works")
        other = RouteMemory(lambda base_url, model, info: kept[0])
        assert await other.route(provider, llama(), fake.base_url, None, False) == "chat"
    finally:
        await provider.aclose()


async def test_tools_are_offered_as_the_probe_found_and_a_refusal_in_use_still_wins(tmp_path):
    app = fake_app(tmp_path, FakeProvider(), MARGIN_DEFAULTS_BASE_URL=LLAMA_URL)
    try:
        profile = app.settings.current.profile("chat")
        assert app.probe_findings.path == tmp_path / "threads.probes.json"  # beside the thread database
        assert app.backends.takes_tools(profile, llama(tools=True))  # no probe: the backend's word
        app.probe_findings.save([finding(LLAMA_URL, None, GEMMA, {}, "wrong")])  # it answered in text
        assert not app.backends.takes_tools(profile, llama(tools=True))
        assert app.backends.takes_tools(profile, llama(("other.gguf",), tools=True))  # made on another model
        app.probe_findings.save([finding(LLAMA_URL, None, GEMMA, {}, "works")])
        assert app.backends.takes_tools(profile, llama(tools=False))  # it called the tool when offered
        app.probe_findings.save([finding(LLAMA_URL, None, GEMMA, {}, "failed")])  # no verdict
        assert not app.backends.takes_tools(profile, llama(tools=False))
        app.probe_findings.save([finding(LLAMA_URL, None, GEMMA, {}, "works")])
        app.backends.refused_tools(profile)
        assert not app.backends.takes_tools(profile, llama(tools=True))
    finally:
        await close(app)
