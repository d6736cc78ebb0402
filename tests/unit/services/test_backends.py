"""Backends: one real provider per profile, built from that profile's settings."""

from __future__ import annotations

import pytest

from margin.core.llm import BackendTimeout, ChatMessage, ChatRequest
from margin.core.settings import Source, resolve
from margin.services.backends import Backends
from margin.services.diagnosis import diagnose
from margin.services.tokenizers import Tokenizers
from margin.wiring import make_llama_counter, make_provider
from tests.fakes.fake_openai import hang

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
    tokenizers = Tokenizers(make_llama_counter)
    try:
        reports = await diagnose(settings_for(fake), backends, tokenizers)
        await diagnose(settings_for(fake), backends, tokenizers)  # within the cache's lifetime
    finally:
        await backends.aclose()
        await tokenizers.aclose()
    assert all(r.reachable and r.context_window == 8192 for r in reports)
    assert sorted(fake.gets) == ["/props", "/v1/models"]  # one probe for four profiles, twice
    assert fake.requests == []  # probing never asks for a completion
