"""What real editors do that the protocol's happy path does not: found by using Margin from Emacs
(eglot 1.9) and on a loaded machine. An editor that answers workspace/applyEdit with an error,
sends didSave unasked, or sends notifications Margin does not know; and the log a person reads
while all that happens: one metadata line per expected failure, a traceback only for a bug."""

from __future__ import annotations

import json
import re

from tests.conftest import until
from tests.e2e.raw_lsp import RpcError, raw_client
from tests.fakes.fake_openai import reply

WS = "file:///ws"
A = f"{WS}/a.py"
TEXT = "def f():\n    return 1\n\n# margin: return two\ndef g():\n    return 2\n"
CAPS = {"workspace": {"applyEdit": True}, "window": {"workDoneProgress": True}}
EGLOT_REFUSAL = {"code": -32001, "message": "Edits on `a.py' require version 1, you have 2"}
UNFILLED = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrifx]|%\(\w+\)")


def env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_LOG_FILE": str(tmp_path / "margin.log"),
            "MARGIN_LOG_LEVEL": "INFO", **extra}


def open_a(client, version: int = 1) -> None:
    client.notify("textDocument/didOpen", {"textDocument": {"uri": A, "languageId": "python", "version": version,
                                                            "text": TEXT}})


def refuse_with_an_error(params):
    raise RpcError(EGLOT_REFUSAL)


def log_lines(tmp_path) -> list[str]:
    return (tmp_path / "margin.log").read_text().splitlines()


async def test_an_apply_edit_answered_with_an_error_is_a_refusal_not_a_crash(fake, tmp_path):
    fake.script(reply(json.dumps({"assistant_message": "g returns 3.", "ops": [
        {"op": "replace", "target_file": "a.py", "target": "match", "match": "    return 2\n",
         "content": "    return 3\n"}]})), reply(json.dumps({"replacement": "def g():\n    return 2.0\n"})))
    async with raw_client(env(fake, tmp_path), capabilities=CAPS, root_uri=WS) as client:
        open_a(client)
        client.answers["workspace/applyEdit"] = refuse_with_an_error
        proposal = await client.request("margin/editOps", {"message": "g returns 3", "textDocument": {"uri": A}})
        applied = await client.message("margin/applyOps", {"ops": proposal["ops"],
                                                           "baseFingerprints": proposal["baseFingerprints"]})
        assert "error" not in applied, applied
        result = applied["result"]
        assert result["applied"] is False and result["rebased"] is False and result["staleFiles"] == []
        assert EGLOT_REFUSAL["message"] in result["failureReason"]

        # eglot cannot resolve code actions: it runs the action's command.
        (action, *_) = await client.request("textDocument/codeAction", {
            "textDocument": {"uri": A}, "range": {"start": {"line": 4, "character": 0}, "end": {"line": 6, "character": 0}},
            "context": {"diagnostics": []}})
        ran = await client.message("workspace/executeCommand", action["command"])
        assert "error" not in ran, ran
        assert ran["result"]["applied"] is False and EGLOT_REFUSAL["message"] in ran["result"]["failureReason"]
        await until(lambda: any(n["method"] == "window/showMessage" and EGLOT_REFUSAL["message"] in
                                n["params"]["message"] for n in client.notifications))
    lines = log_lines(tmp_path)
    text = "\n".join(lines)
    assert "Traceback" not in text and " ERROR " not in text, text
    answered = [line for line in lines if "workspace/applyEdit answered with an error" in line]
    assert len(answered) == 2 and all("-32001" in line for line in answered), text
    assert "you have 2" not in text  # the editor's words are shown to the user, not logged


async def test_expected_failures_are_one_metadata_line_each_and_no_placeholder_is_left_unfilled(fake, tmp_path):
    fake.script(reply("not JSON at all"))
    async with raw_client(env(fake, tmp_path), capabilities=CAPS, root_uri=WS) as client:
        open_a(client)
        bad = await client.message("margin/chat", {"message": ""})
        assert bad["error"]["code"] == -32602
        missing = await client.message("margin/history", {"threadId": "nope"})
        assert missing["error"]["code"] == -32803
        prose = await client.message("codeAction/resolve", {
            "title": "Margin: return two", "data": {"uri": A, "kind": "comment", "instruction": "",
                                                    "range": {"start": {"line": 4, "character": 0},
                                                              "end": {"line": 6, "character": 0}}}})
        assert prose["error"]["code"] == -32803 and "valid JSON" in prose["error"]["message"]
        unknown = await client.message("margin/nothing", {})
        assert unknown["error"]["code"] == -32601
        client.notify("custom/somethingNew", {"text": "secret content"})
        client.notify("$/setTrace", {"value": "off"})
        await client.drain()
    lines = log_lines(tmp_path)
    text = "\n".join(lines)
    assert "Traceback" not in text and " ERROR " not in text, text
    assert not [line for line in lines if UNFILLED.search(line.split(": ", 1)[-1])], text
    failed = [line for line in lines if "request failed" in line]
    assert len(failed) == 3, text
    assert any("method=margin/chat" in line and "InvalidParams" in line for line in failed), text
    assert any("method=margin/history" in line and "RequestFailed" in line for line in failed), text
    assert any("method=codeAction/resolve" in line for line in failed), text
    assert any("custom/somethingNew" in line for line in lines), text
    assert "secret content" not in text


async def test_did_save_that_was_not_asked_for_is_accepted_quietly(fake, tmp_path):
    async with raw_client(env(fake, tmp_path), capabilities=CAPS, root_uri=WS) as client:
        assert not client.init_result["capabilities"]["textDocumentSync"].get("save")  # not advertised
        open_a(client)
        for _ in range(3):
            client.notify("textDocument/didSave", {"textDocument": {"uri": A}, "text": TEXT})
        await client.drain()
        status = await client.request("margin/status", {})
        assert [f["uri"] for f in status["files"]] == [A]
    text = "\n".join(log_lines(tmp_path))
    assert " WARNING " not in text and "didSave" not in text, text
