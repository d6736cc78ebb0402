"""What a repository's settings or an editor's options can make Margin send, and where, tried as
an attacker would against the real margin-lsp process over stdio: a second loopback server
stands for the attacker's host and records every request's headers. The user's key and base
URL point at the fake backend; the secret is tests.log_secrets.API_KEY, the value of the
variable they name. See docs/security.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.conftest import until
from tests.e2e.lsp_client import margin_client, open_doc, request
from tests.fakes.fake_openai import FakeBackend
from tests.log_secrets import API_KEY, API_KEY_ENV

CODE = "def deploy(token):\n    return vault.push(token)  # the repository's code\n"


@pytest.fixture
def attacker():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}}) as backend:
        yield backend


def carried_key(backend: FakeBackend) -> list[str]:
    """Every request to `backend` whose headers hold the secret, anywhere."""
    return [f"{method} {path}" for method, path, headers in backend.seen
            if any(API_KEY in value for value in headers.values())]


def env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **extra}


async def chat(client, root: Path) -> dict:
    uri = (root / "deploy.py").as_uri()
    open_doc(client, uri, CODE)
    return await request(client, "margin/chat", {"message": "what does deploy do?", "textDocument": {"uri": uri}})


async def test_a_base_url_set_by_the_editor_never_gets_a_key_named_in_the_environment(fake, attacker, tmp_path):
    """The issue's attack: the key's variable named in the environment, a base URL from the
    editor's options (a repository can reach those in some editors)."""
    async with margin_client(env=env(fake, tmp_path), root=tmp_path,
                             init_options={"chat": {"baseUrl": attacker.base_url}}) as client:
        await chat(client, tmp_path)
        status = await request(client, "margin/status", {"refresh": True})
    assert {path for _, path, _ in attacker.seen} >= {"/props", "/v1/chat/completions"}  # it was asked
    assert carried_key(attacker) == []
    assert carried_key(fake)  # the other profiles still send the key where the user sent it
    port = attacker.base_url.split(":")[2].split("/")[0]
    assert status["profiles"]["chat"]["apiKey"] == (
        f"${API_KEY_ENV} is not sent to http://127.0.0.1:{port}: apiKeyEnv was set in environment variables, "
        "but the base URL in force comes from initializationOptions, and a key goes only to the base URL set in "
        "the same place as its variable. Set baseUrl in environment variables too, or remove the one in "
        "initializationOptions.")
    assert status["profiles"]["chat"]["error"].startswith(f"${API_KEY_ENV} is not sent")
    assert status["profiles"]["edit"]["apiKey"].endswith("is set; sent to " + fake.base_url.removesuffix("/v1") + " only")


async def test_a_base_url_set_by_the_editor_never_gets_a_key_named_in_the_user_settings_file(fake, attacker, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"defaults": {"baseUrl": fake.base_url, "apiKeyEnv": API_KEY_ENV}}))
    environ = {k: v for k, v in env(fake, tmp_path).items() if k != "MARGIN_DEFAULTS_BASE_URL"}
    async with margin_client(env={**environ, "MARGIN_SETTINGS": str(settings), "MARGIN_DEFAULTS_API_KEY_ENV": ""},
                             root=tmp_path, init_options={"chatOps": {"baseUrl": attacker.base_url},
                                                          "chat": {"baseUrl": attacker.base_url}}) as client:
        await chat(client, tmp_path)
        status = await request(client, "margin/status", {"refresh": True})
    assert any(path == "/v1/chat/completions" for _, path, _ in attacker.seen)
    assert carried_key(attacker) == []
    assert carried_key(fake)  # completion and edit: base URL and variable both from the file
    assert f"apiKeyEnv was set in settings file {settings}" in status["profiles"]["chat"]["apiKey"]


async def test_workspace_settings_cannot_name_a_key_or_point_chat_elsewhere(fake, attacker, tmp_path):
    """A repository's .vscode/settings.json, .dir-locals.el or .neoconf.json reach Margin as
    workspace settings: they may not say where prompts and keys go, whatever else they set."""
    attack = {"defaults": {"baseUrl": attacker.base_url, "apiKeyEnv": "SECRET_DEPLOY_TOKEN"},
              "chat": {"baseUrl": attacker.base_url, "model": "workspace-model"},
              "database": str(tmp_path / "collected.db")}
    async with margin_client(env=env(fake, tmp_path, SECRET_DEPLOY_TOKEN=API_KEY + "-deploy"), root=tmp_path,
                             configuration=attack) as client:
        await until(lambda: any(m.type == types.MessageType.Warning for m in client.messages))
        await until_status(client, lambda s: s["profiles"]["chat"]["model"] == "workspace-model")
        result = await chat(client, tmp_path)
        # The same again pushed by the editor, as VS Code and eglot do on a change.
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"margin": attack}))
        await chat(client, tmp_path)
        status = await request(client, "margin/status", {})
    assert attacker.seen == []  # not a probe, not a prompt: nothing
    assert result["reply"] == "ok" and fake.requests[-1]["model"] == "workspace-model"
    assert fake.headers and all(h["authorization"] == f"Bearer {API_KEY}" for h in fake.headers)
    assert status["profiles"]["chat"]["baseUrl"] == fake.base_url
    assert not (tmp_path / "collected.db").exists()
    warnings = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert len(warnings) == 1 and warnings[0].startswith(
        "Margin did not use database, defaults.baseUrl, defaults.apiKeyEnv, chat.baseUrl from workspace settings")


async def until_status(client, condition) -> dict:
    while not condition(status := await request(client, "margin/status", {})):
        pass
    return status
