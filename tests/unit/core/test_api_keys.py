"""Where an API key may go (margin.core.api_keys): to the base URL set in the same place as the
variable that names it, and never in clear text to another machine. No traffic: the decision
alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.core.api_keys import BUILTIN_PLACE, KeyRoute, decide, is_loopback, origin
from margin.core.settings import Source, resolve

ENV, FILE, EDITOR = "environment variables", "settings file /home/me/.config/margin/settings.json", "initializationOptions"


def route(named_in: str, own: str, base_url_from: str | None = None) -> KeyRoute:
    return KeyRoute(named_in=named_in, base_url_from=base_url_from or named_in, own_base_url=own)


def test_a_key_goes_to_the_base_url_set_where_its_variable_was_named():
    decision = decide("OPENAI_API_KEY", "https://api.openai.com/v1", route(ENV, "https://api.openai.com/v1"), True)
    assert decision.send and decision.why == "$OPENAI_API_KEY is set; sent to https://api.openai.com only"


def test_a_base_url_from_another_place_gets_no_key_and_says_what_to_do():
    decision = decide("SECRET_DEPLOY_TOKEN", "https://collector.example/v1",
                      route(ENV, "https://api.openai.com/v1", base_url_from=EDITOR), True)
    assert not decision.send
    assert decision.why == (
        "$SECRET_DEPLOY_TOKEN is not sent to https://collector.example: apiKeyEnv was set in environment "
        "variables, but the base URL in force comes from initializationOptions, and a key goes only to the "
        "base URL set in the same place as its variable. Set baseUrl in environment variables too, or remove "
        "the one in initializationOptions.")


@pytest.mark.parametrize("other", [
    "https://api.openai.com:8443/v1",  # another port
    "http://api.openai.com/v1",  # another scheme
    "https://api.openai.com.collector.example/v1",  # another host that starts the same
    "https://openai.com/v1",
])
def test_the_same_origin_means_the_same_scheme_host_and_port(other):
    assert not decide("K", other, route(FILE, "https://api.openai.com/v1", base_url_from=EDITOR), True).send


def test_another_path_on_the_same_origin_is_the_same_origin():
    """The key is for the server, not for one path of its API."""
    decision = decide("K", "https://API.openai.com:443/v2", route(EDITOR, "https://api.openai.com/v1", ENV), True)
    assert decision.send


def test_plain_http_to_another_machine_never_carries_a_key():
    for url in ("http://10.0.0.7:8080/v1", "http://gpu-box.lan:8000/v1", "http://0.0.0.0:8080/v1",
                "http://203.0.113.9/v1", "http://[2001:db8::1]:8080/v1"):
        decision = decide("K", url, route(ENV, url), True)
        assert not decision.send, url
        assert "plain HTTP to another machine" in decision.why and "Use an https:// base URL" in decision.why


def test_plain_http_on_this_machine_may_carry_a_key():
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1",
                "http://127.3.2.1/v1", "http://LOCALHOST.:8080/v1"):
        assert decide("K", url, route(ENV, url), True).send, url


def test_a_name_under_localhost_is_not_this_machine():
    """The resolver answers for `api.localhost` (an /etc/hosts line, a DNS search domain): only
    `localhost` itself and literal loopback addresses count."""
    for url in ("http://api.localhost/v1", "http://localhost.attacker.example/v1", "http://127.0.0.1.nip.io/v1"):
        assert not decide("K", url, route(ENV, url), True).send, url


@given(st.ip_addresses())
def test_only_loopback_addresses_count_as_this_machine(address):
    assert is_loopback(str(address)) == (address.is_loopback or getattr(address, "ipv4_mapped", None) is not None
                                         and address.ipv4_mapped.is_loopback)
    url = f"http://[{address}]:8080/v1" if address.version == 6 else f"http://{address}:8080/v1"
    assert decide("K", url, route(ENV, url), True).send == is_loopback(str(address))


def test_no_variable_no_key_and_a_missing_variable_is_named():
    assert decide(None, "https://x.example/v1", None, False).why == "none configured"
    missing = decide("K", "https://x.example/v1", route(ENV, "https://x.example/v1"), False)
    assert not missing.send and missing.missing and missing.why == "$K is NOT set"


def test_a_profile_made_without_its_sources_sends_no_key():
    assert not decide("K", "https://x.example/v1", None, True).send


def test_origins():
    assert origin("https://Api.OpenAI.com/v1") == ("https", "api.openai.com", 443)
    assert origin("http://127.0.0.1:8080/v1") == ("http", "127.0.0.1", 8080)
    assert origin("http://host:99999/v1") is None and origin("ftp://host/v1") is None


# --- where settings were set, as resolve() records it -----------------------------------------

def key_of(sources, profile="chat"):
    settings = resolve(sources)
    p = settings.profile(profile)
    return decide(p.api_key_env, p.base_url, p.key_route, True)


def test_resolve_records_where_the_variable_and_the_base_url_were_set():
    env = Source(ENV, {"defaults": {"apiKeyEnv": "K", "baseUrl": "https://api.openai.com/v1"}})
    editor = Source(EDITOR, {"chat": {"baseUrl": "https://collector.example/v1"}})
    assert key_of([env]).send
    assert not key_of([editor, env]).send  # chat's own baseUrl beats any defaults block
    assert key_of([editor, env], "edit").send
    assert resolve([editor, env]).profile("chat").key_route == KeyRoute(ENV, EDITOR, "https://api.openai.com/v1")


def test_the_same_base_url_set_again_elsewhere_still_gets_the_key():
    file = Source(FILE, {"defaults": {"apiKeyEnv": "K", "baseUrl": "https://api.mistral.ai/v1"}})
    editor = Source(EDITOR, {"chat": {"baseUrl": "https://api.mistral.ai/v1", "model": "devstral-small-latest"}})
    assert key_of([file, editor]).send


def test_a_variable_named_without_a_base_url_goes_only_to_the_built_in_one():
    """A key for a local server started with --api-key: only the built-in loopback URL."""
    editor = Source(EDITOR, {"chat": {"apiKeyEnv": "LLAMA_KEY"}})
    assert key_of([editor]).send
    elsewhere = Source(ENV, {"defaults": {"baseUrl": "https://collector.example/v1"}})
    decision = key_of([editor, elsewhere])
    assert not decision.send and decision.why.endswith("Set baseUrl in initializationOptions too, or remove the one "
                                                       "in environment variables.")
    assert resolve([]).profile("chat").key_route == KeyRoute(BUILTIN_PLACE, BUILTIN_PLACE, "http://127.0.0.1:8080/v1")


def test_workspace_settings_name_no_key_and_choose_no_base_url():
    env = Source(ENV, {"defaults": {"apiKeyEnv": "OPENAI_API_KEY", "baseUrl": "https://api.openai.com/v1"}})
    workspace = Source("workspace settings", {"defaults": {"apiKeyEnv": "AWS_SECRET_ACCESS_KEY"},
                                              "chat": {"baseUrl": "https://collector.example/v1", "model": "m"}},
                       workspace=True)
    settings = resolve([workspace, env])
    chat = settings.profile("chat")
    assert (chat.base_url, chat.api_key_env, chat.model) == ("https://api.openai.com/v1", "OPENAI_API_KEY", None)
    assert key_of([workspace, env]).send
