"""The real margin-lsp process over stdio: initialize, document sync, status, faults, exit."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from margin import __version__
from tests.e2e.lsp_client import (
    UTF8_CLIENT,
    UTF16_CLIENT,
    change_doc,
    file_status,
    margin_client,
    open_doc,
    request,
    status,
)
from tests.fakes.fake_openai import reply

URI = "file:///work/demo.py"


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


async def test_initialize_advertises_what_margin_does():
    async with margin_client() as client:
        caps = client.init_result.capabilities
        sync = caps.text_document_sync
        assert sync.open_close is True
        assert sync.change == types.TextDocumentSyncKind.Incremental
        assert caps.position_encoding == types.PositionEncodingKind.Utf16
        assert caps.experimental["margin"]["methods"] == [
            "margin/status", "margin/chat", "margin/explain", "margin/history", "margin/recall", "margin/threads",
            "margin/newThread", "margin/deleteThread", "margin/remember", "margin/forget", "margin/memories",
            "margin/editOps", "margin/applyOps", "margin/nextEdit", "margin/agent",
            "margin/approvals"]
        assert list(caps.execute_command_provider.commands) == ["margin.applyOps", "margin.editSelection"]
        assert client.init_result.server_info.name == "margin"
        assert client.init_result.server_info.version == __version__
        # Nothing Margin does not implement is claimed; the completion menu is opt-in.
        assert caps.code_action_provider.resolve_provider is True
        assert caps.inline_completion_provider is not None
        assert caps.completion_provider is None and caps.hover_provider is None


async def test_utf8_is_chosen_when_offered():
    async with margin_client(capabilities=UTF8_CLIENT) as client:
        assert client.init_result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
        assert (await status(client))["positionEncoding"] == "utf-8"


async def test_open_and_full_and_incremental_changes_track_text_version_and_fingerprint():
    async with margin_client() as client:
        open_doc(client, URI, "def f():\n    return 1\n")
        change_doc(client, URI, 2, ((1, 11, 1, 12), "42"))
        change_doc(client, URI, 3, ((2, 0, 2, 0), "print(f())\n"), ((0, 4, 0, 5), "g"))
        entry = await file_status(client, URI)
        assert entry == {"uri": URI, "version": 3, "languageId": "python",
                         "fingerprint": sha("def g():\n    return 42\nprint(f())\n")}
        change_doc(client, URI, 4, (None, "x = 1\n"))
        assert (await file_status(client, URI))["fingerprint"] == sha("x = 1\n")
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(URI)))
        assert (await status(client))["files"] == []


EMOJI_CRLF = "a😀b = 1\r\n# 😀😀 é\r\nz\r\n"


async def test_utf16_positions_around_emoji_and_crlf():
    async with margin_client(capabilities=UTF16_CLIENT) as client:
        open_doc(client, URI, EMOJI_CRLF)
        # Line 0: "a😀b": the emoji is two UTF-16 units, so 'b' is at column 3.
        change_doc(client, URI, 2, ((0, 3, 0, 4), "B"))
        # Line 1: "# 😀😀 é": replace the second emoji (columns 4-6) and the é (column 7-8).
        change_doc(client, URI, 3, ((1, 4, 1, 6), "X"), ((1, 6, 1, 7), "e"))
        # A column past the end of a CRLF line means the end of the line, before \r\n.
        change_doc(client, URI, 4, ((2, 99, 2, 99), "!"))
        # Join lines 0 and 1 by deleting the CRLF between them.
        change_doc(client, URI, 5, ((0, 8, 1, 0), " "))
        assert (await file_status(client, URI))["fingerprint"] == sha("a😀B = 1 # 😀X e\r\nz!\r\n")


async def test_utf8_positions_around_emoji_and_crlf():
    async with margin_client(capabilities=UTF8_CLIENT) as client:
        open_doc(client, URI, EMOJI_CRLF)
        # The emoji is four UTF-8 bytes: 'b' is at byte column 5.
        change_doc(client, URI, 2, ((0, 5, 0, 6), "B"))
        # "# 😀😀 é": second emoji at bytes 6-10, 'é' (two bytes) at 11-13.
        change_doc(client, URI, 3, ((1, 6, 1, 10), "X"), ((1, 8, 1, 10), "e"))
        change_doc(client, URI, 4, ((2, 1, 2, 1), "!"))
        assert (await file_status(client, URI))["fingerprint"] == sha("a😀B = 1\r\n# 😀X e\r\nz!\r\n")


async def test_status_reports_profiles_from_a_reachable_backend(fake):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_EDIT_ENABLED": "false"}
    fake.tokenize = lambda body: {"tokens": [1] * len(body["content"])}  # llama.cpp counts
    async with margin_client(env=env) as client:
        result = await status(client, refresh=True)
    assert result["version"] == __version__
    chat = result["profiles"]["chat"]
    assert chat["reachable"] is True and chat["baseUrl"] == fake.base_url
    assert chat["contextWindow"] == 8192 and "props" in chat["contextWindowSource"]
    assert chat["tokenizer"] == "llama.cpp" and chat["exact"] is True
    assert result["profiles"]["edit"]["enabled"] is False and result["profiles"]["edit"]["reachable"] is None
    assert set(result["profiles"]) == {"completion", "edit", "chat", "chatOps", "nextEdit", "agent"}


async def test_status_reports_tokenizers_loaded_in_the_background_and_missing_ones(fake):
    init = {"defaults": {"baseUrl": fake.base_url}, "chat": {"model": "gpt-5"},
            "edit": {"tokenizer": "tekken:tekken_missing"}}
    async with margin_client(init_options=init) as client:
        deadline = asyncio.get_running_loop().time() + 30
        while (profiles := (await status(client))["profiles"])["chat"]["tokenizerState"] != "ready":
            assert asyncio.get_running_loop().time() < deadline, profiles["chat"]
            await asyncio.sleep(0.1)
    assert profiles["chat"]["tokenizer"] == "tiktoken:o200k_base" and profiles["chat"]["exact"] is True
    edit = profiles["edit"]
    assert (edit["tokenizer"], edit["exact"]) == ("heuristic", False)
    assert edit["tokenizerState"].startswith("unavailable") and "tekken_missing" in edit["tokenizerState"]


async def test_status_names_an_unreachable_backend():
    async with margin_client(env={"MARGIN_DEFAULTS_BASE_URL": "http://127.0.0.1:9/v1"}) as client:
        chat = (await status(client))["profiles"]["chat"]
    assert chat["reachable"] is False and "Nothing answers at http://127.0.0.1:9/v1" in chat["error"]


async def test_malformed_params_get_invalid_params_naming_the_field_and_server_keeps_serving():
    async with margin_client() as client:
        with pytest.raises(JsonRpcInvalidParams) as caught:
            await request(client, "margin/status", {"bogus": 1})
        assert "bogus: unknown field" in str(caught.value)
        with pytest.raises(JsonRpcInvalidParams) as caught:
            await request(client, "margin/status", {"refresh": "sometimes"})
        assert "refresh" in str(caught.value)
        assert (await status(client))["version"] == __version__
        # Neovim's Lua sends an empty table as [] and pygls sends no params as null.
        assert (await request(client, "margin/status", []))["version"] == __version__


async def test_change_for_unopened_document_is_ignored_without_crashing():
    async with margin_client() as client:
        change_doc(client, "file:///never/opened.py", 2, ((0, 0, 0, 0), "x"))
        open_doc(client, URI, "ok\n")
        assert [f["uri"] for f in (await status(client))["files"]] == [URI]


async def test_shutdown_then_exit_ends_the_process_cleanly():
    async with margin_client() as client:
        pass
    assert client._server.returncode == 0


async def test_logs_carry_metadata_only(tmp_path, fake):
    secret = "SECRET-CONTENT-7f3a"
    log_file = tmp_path / "margin.log"
    env = {"MARGIN_LOG_LEVEL": "DEBUG", "MARGIN_DEFAULTS_BASE_URL": fake.base_url}
    # The invalid value is echoed to the user (who typed it) in window/showMessage; the log
    # must not carry it, even though pygls logs outgoing messages.
    init = {"chat": {"model": f"model-{secret}"}, "edit": {"temperature": f"hot-{secret}"}}
    env["MARGIN_DATABASE"] = str(tmp_path / "t.db")
    env["MARGIN_CHAT_TOKENIZER"] = "heuristic"
    fake.script(reply(f"the reply repeats {secret}"))
    async with margin_client(env=env, args=("--log-file", str(log_file)), init_options=init) as client:
        open_doc(client, URI, f"password = '{secret}'\n")
        change_doc(client, URI, 2, ((0, 0, 0, 0), f"# {secret}\n"))
        await status(client, refresh=True)
        answer = await request(client, "margin/chat", {"message": f"what is {secret}?",
                                                       "textDocument": {"uri": URI}})
        assert secret in answer["reply"]
        assert any(secret in m.message for m in client.messages)
    text = log_file.read_text()
    assert "initialize client=pytest-lsp" in text and "probe base_url=" in text
    assert "chat done thread=" in text
    assert "invalid settings fields=edit.temperature" in text
    assert secret not in text
