"""Settings through the real server: precedence of every source, and invalid settings."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from tests.conftest import until
from tests.e2e.lsp_client import margin_client, status


def models(result):
    return {name: profile["model"] for name, profile in result["profiles"].items()}


def windows(result):
    return {name: profile["contextWindow"] for name, profile in result["profiles"].items()}


def change_configuration(client, settings) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))


async def wait_for(predicate, client, timeout=5.0):
    """Notifications are not answered: poll status until the server has taken the change."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await status(client)
        if predicate(result):
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met; last status: {result['profiles']}")
        await asyncio.sleep(0.05)


async def test_precedence_builtin_defaults_init_workspace_env():
    env = {"MARGIN_CHAT_OPS_MODEL": "env-chatops", "MARGIN_DEFAULTS_MAX_OUTPUT_TOKENS": "700",
           "MARGIN_EDIT_CONTEXT_WINDOW": "12000"}
    init = {
        "defaults": {"model": "init-default", "temperature": 0.5, "contextWindow": 16000},
        "edit": {"model": "init-edit", "contextWindow": 8000},
        "chat": {"model": "init-chat", "contextWindow": 10000},
        "chatOps": {"model": "init-chatops"},
    }
    async with margin_client(env=env, init_options=init) as client:
        result = await status(client)
        assert models(result) == {"completion": "init-default", "edit": "init-edit",
                                  "chat": "init-chat", "chatOps": "env-chatops", "nextEdit": "init-default",
                                  "agent": "init-default"}
        assert windows(result) == {"completion": 16000, "edit": 12000, "chat": 10000, "chatOps": 16000,
                                   "nextEdit": 16000, "agent": 16000}

        # Workspace settings only narrow: the lower window is taken, whatever block or source
        # set the user's; a model is not.
        change_configuration(client, {"margin": {
            "defaults": {"contextWindow": 14000, "model": "ws-default"},
            "chat": {"contextWindow": 9000, "model": "ws-chat"},
            "chatOps": {"contextWindow": 32000},
        }})
        result = await wait_for(lambda r: r["profiles"]["chat"]["contextWindow"] == 9000, client)
        assert models(result) == {"completion": "init-default", "edit": "init-edit",
                                  "chat": "init-chat", "chatOps": "env-chatops", "nextEdit": "init-default",
                                  "agent": "init-default"}
        assert windows(result) == {"completion": 14000, "edit": 12000, "chat": 9000, "chatOps": 14000,
                                   "nextEdit": 14000, "agent": 14000}


async def test_profiles_do_not_share_settings_implicitly():
    async with margin_client(init_options={"chat": {"contextWindow": 8192, "model": "a"}}) as client:
        profiles = (await status(client))["profiles"]
    assert profiles["chat"]["contextWindow"] == 8192
    assert profiles["chatOps"]["model"] is None and profiles["chatOps"]["contextWindow"] != 8192


async def test_initialization_options_may_be_wrapped_in_a_margin_section():
    async with margin_client(init_options={"margin": {"defaults": {"model": "wrapped"}}}) as client:
        assert set(models(await status(client)).values()) == {"wrapped"}


async def test_invalid_update_keeps_last_good_settings_and_names_the_field():
    async with margin_client(init_options={"chat": {"model": "good", "contextWindow": 8192}}) as client:
        change_configuration(client, {"margin": {"chat": {"contextWindow": 4096, "temperature": "hot"}}})
        await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
        message = client.messages[-1]
        assert message.type == types.MessageType.Error
        assert "chat.temperature" in message.message and "'hot'" in message.message
        assert "Keeping the last good settings" in message.message
        assert (await status(client))["profiles"]["chat"]["contextWindow"] == 8192

        # The next valid update is taken.
        change_configuration(client, {"margin": {"chat": {"contextWindow": 6000}}})
        await wait_for(lambda r: r["profiles"]["chat"]["contextWindow"] == 6000, client)


async def test_unknown_setting_is_reported_with_a_suggestion():
    async with margin_client(init_options={"chat": {"modle": "x"}}) as client:
        await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
        assert "chat.modle: unknown setting (did you mean 'model'?)" in client.messages[-1].message
        assert (await status(client))["profiles"]["chat"]["model"] is None


async def test_invalid_environment_variable_is_reported_and_ignored():
    async with margin_client(env={"MARGIN_CHAT_TIMEOUT_S": "-5", "MARGIN_CHAT_MODEL": "from-env"}) as client:
        await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
        assert "MARGIN_CHAT_TIMEOUT_S" in client.messages[-1].message
        assert (await status(client))["profiles"]["chat"]["model"] is None


async def test_settings_are_pulled_when_the_notification_carries_none():
    async with margin_client() as client:
        client.set_configuration({"chat": {"enabled": False}}, section="margin")
        change_configuration(client, None)
        await wait_for(lambda r: r["profiles"]["chat"]["enabled"] is False, client)


async def test_settings_are_pulled_at_startup_from_clients_that_support_it():
    # Neovim, for one, answers workspace/configuration from its `settings` table and sends no
    # didChangeConfiguration of its own when that table is empty.
    async with margin_client(configuration={"edit": {"enabled": False}}) as client:
        await wait_for(lambda r: r["profiles"]["edit"]["enabled"] is False, client)


async def test_oversized_system_prompt_is_warned_about_at_start_up(fake, tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "chat_v1.md").write_text("[required]\n" + "Follow these rules carefully. " * 60 + "\n")
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_PROMPTS_DIR": str(prompts),
           "MARGIN_CHAT_CONTEXT_WINDOW": "1024", "MARGIN_CHAT_TOKENIZER": "tiktoken:o200k_base"}
    async with margin_client(env=env) as client:
        await until(lambda: any("system prompt" in m.message for m in client.messages))
    warning = next(m for m in client.messages if "system prompt" in m.message)
    assert warning.type == types.MessageType.Warning
    assert "chat profile" in warning.message and "1024-token window" in warning.message
