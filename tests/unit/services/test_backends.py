"""Backends: one real provider per profile, built from that profile's settings."""

from __future__ import annotations

import asyncio

import pytest

from margin.adapters import openai_http
from margin.core.llm import BackendTimeout, ChatMessage, ChatRequest
from margin.core.settings import PROFILES, Source, resolve
from margin.services.backends import Backends
from margin.services.diagnosis import diagnose
from margin.services.tokenizers import Tokenizers
from margin.wiring import make_provider, make_server_counter
from tests.conftest import until
from tests.fakes.fake_openai import FakeBackend, hang

REQUEST = ChatRequest([ChatMessage("user", "hi")], max_tokens=4, temperature=0)


def settings_for(fake, **chat):
    return resolve([Source("test", {"defaults": {"baseUrl": fake.base_url}, "chat": chat})])


async def test_api_key_comes_from_the_variable_apiKeyEnv_names(fake):
    settings = settings_for(fake, apiKeyEnv="MY_PROVIDER_KEY")
    backends = Backends(make_provider, {"MY_PROVIDER_KEY": "sk-from-env"})
    try:
        await backends.provider("chat", settings.profile("chat")).complete(REQUEST)
        await backends.provider("edit", settings.profile("edit")).complete(REQUEST)
    finally:
        await backends.aclose()
    assert fake.headers[0]["authorization"] == "Bearer sk-from-env"
    assert "authorization" not in fake.headers[1]  # edit names no key: none is sent


async def test_an_ambient_key_is_never_sent_when_apiKeyEnv_is_unset(fake):
    """"Unset: no key" — whatever keys the environment holds under their usual names."""
    settings = settings_for(fake, model="gpt-5")
    backends = Backends(make_provider, {"OPENAI_API_KEY": "sk-ambient", "MISTRAL_API_KEY": "mk-ambient"})
    try:
        await backends.provider("chat", settings.profile("chat")).complete(REQUEST)
        await backends.probe("chat", settings.profile("chat"), fresh=True)
    finally:
        await backends.aclose()
    assert len(fake.seen) >= 2 and all("authorization" not in headers for _, _, headers in fake.seen)
    assert backends.api_key(settings.profile("chat")).why == "none configured"


async def test_each_profile_gets_its_own_timeout(fake):
    settings = resolve([Source("test", {"defaults": {"baseUrl": fake.base_url},
                                        "chat": {"timeoutS": 0.2}, "edit": {"timeoutS": 5}})])
    backends = Backends(make_provider, {})
    fake.script(hang(2))
    try:
        with pytest.raises(BackendTimeout) as caught:
            await backends.provider("chat", settings.profile("chat")).complete(REQUEST)
        assert caught.value.timeout_s == 0.2
        assert backends.provider("edit", settings.profile("edit")).timeout_s == 5
    finally:
        await backends.aclose()


async def test_provider_is_rebuilt_only_when_its_connection_settings_change(fake):
    backends = Backends(make_provider, {})
    first = backends.provider("chat", settings_for(fake, model="a").profile("chat"))
    try:
        assert backends.provider("chat", settings_for(fake, model="b").profile("chat")) is first
        changed = backends.provider("chat", settings_for(fake, timeoutS=7).profile("chat"))
        assert changed is not first and changed.timeout_s == 7
    finally:
        await backends.aclose()


async def test_profiles_on_one_backend_share_one_probe(fake):
    backends = Backends(make_provider, {})
    tokenizers = Tokenizers(make_server_counter)
    try:
        reports = await diagnose(settings_for(fake), backends, tokenizers)
        await diagnose(settings_for(fake), backends, tokenizers)  # within the cache's lifetime
    finally:
        await backends.aclose()
        await tokenizers.aclose()
    assert all(r.reachable and r.context_window == 8192 for r in reports if r.enabled)
    assert [r.name for r in reports if not r.enabled] == ["nextEdit"]  # off until turned on: not probed
    assert sorted(fake.gets) == ["/props", "/v1/models"]  # one probe for four profiles, twice
    assert fake.requests == []  # probing never asks for a completion


@pytest.fixture
def quick_probes(monkeypatch):
    """Probes give up after 0.2 s instead of 5 s, so a "busy" backend is quick to fake."""
    monkeypatch.setattr(openai_http, "PROBE_TIMEOUT_S", 0.2)


def one_backend_four_models(fake):
    """Every profile on `fake`, each naming a different model."""
    return resolve([Source("test", {"defaults": {"baseUrl": fake.base_url},
                                    **{name: {"model": f"model-{name}"} for name in PROFILES}})])


async def test_concurrent_fresh_probes_of_one_backend_send_one_request(fake):
    settings = one_backend_four_models(fake)
    fake.slow_gets(0.3)  # all four callers ask while the first probe is still in flight
    backends = Backends(make_provider, {})
    try:
        infos = await asyncio.gather(*(backends.probe(name, settings.profile(name), fresh=True)
                                       for name in PROFILES))
    finally:
        await backends.aclose()
    assert all(info.reachable and info.context_window == 8192 for info in infos)
    assert sorted(fake.gets) == ["/props", "/v1/models"]


async def test_a_fresh_probe_after_a_finished_one_asks_again(fake):
    settings = settings_for(fake)
    backends = Backends(make_provider, {})
    try:
        await backends.probe("chat", settings.profile("chat"))
        await backends.probe("edit", settings.profile("edit"))  # cached: same backend
        await backends.probe("edit", settings.profile("edit"), fresh=True)
    finally:
        await backends.aclose()
    assert sorted(fake.gets) == ["/props", "/props", "/v1/models", "/v1/models"]


async def test_one_probe_of_a_vllm_server_still_gives_each_model_its_window():
    with FakeBackend(models=[{"id": "small", "max_model_len": 2048},
                             {"id": "large", "max_model_len": 32768}]) as fake:
        settings = resolve([Source("test", {"defaults": {"baseUrl": fake.base_url},
                                            "chat": {"model": "large"}, "edit": {"model": "small"}})])
        backends = Backends(make_provider, {})
        tokenizers = Tokenizers(make_server_counter)
        try:
            reports = {r.name: r for r in await diagnose(settings, backends, tokenizers, fresh=True)}
        finally:
            await backends.aclose()
            await tokenizers.aclose()
        gets = sorted(fake.gets)
    assert reports["chat"].context_window == 32768 and reports["edit"].context_window == 2048
    assert reports["chat"].context_window_source == "vLLM /models max_model_len"
    assert reports["chat"].backend == reports["edit"].backend == "vllm"
    assert gets == ["/props", "/v1/models"]


async def test_a_backend_too_busy_to_answer_the_probe_is_reachable_but_busy(fake, quick_probes):
    fake.slow_gets(10)  # the connection is accepted; the answer comes long after the probe gave up
    settings = settings_for(fake)
    backends = Backends(make_provider, {})
    tokenizers = Tokenizers(make_server_counter)
    try:
        info = await backends.probe("chat", settings.profile("chat"))
        await until(lambda: len(fake.gets) >= 4)
        tried = sorted(fake.gets)
        reports = {r.name: r for r in await diagnose(settings, backends, tokenizers)}
        await until(lambda: len(fake.gets) >= 8)
    finally:
        await backends.aclose()
        await tokenizers.aclose()
    assert info.reachable and info.timed_out
    assert "busy" in info.error and "0.2 s" in info.error and "twice" in info.error
    assert tried == ["/props", "/props", "/v1/models", "/v1/models"]  # tried twice
    # Not cached: the next request probed again (once more, shared by the four profiles).
    assert len(fake.gets) == 8
    chat = reports["chat"]
    assert chat.reachable is True and "busy" in chat.error and chat.timed_out


async def test_a_backend_slow_only_the_first_time_is_fine_after_the_retry(fake, quick_probes):
    fake.slow_gets(10, times=1)
    backends = Backends(make_provider, {})
    try:
        info = await backends.probe("chat", settings_for(fake).profile("chat"), fresh=True)
    finally:
        await backends.aclose()
    assert info.reachable and info.error is None and info.context_window == 8192
    assert sorted(fake.gets) == ["/props", "/props", "/v1/models", "/v1/models"]


async def test_a_refused_connection_is_unreachable_and_says_so():
    settings = resolve([Source("test", {"defaults": {"baseUrl": "http://127.0.0.1:9/v1"}})])
    backends = Backends(make_provider, {})
    try:
        info = await backends.probe("chat", settings.profile("chat"), fresh=True)
    finally:
        await backends.aclose()
    assert not info.reachable
    assert info.error.startswith("Nothing answers at http://127.0.0.1:9/v1 (ConnectError)")
    assert "busy" not in info.error and "timed out" not in info.error
