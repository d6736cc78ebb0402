"""`margin acp` driven by a second, independent client: the Agent Client Protocol's TypeScript SDK
(@agentclientprotocol/sdk from npm; tests/e2e/acp/ts_client.mjs). The SDK checks every update
Margin sends against ACP v1's schema; the transcript holds every message in arrival order, so
"nothing after the prompt's answer" is a comparison of sequence numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.acp.ts_client import run_ts_client
from tests.e2e.test_acp import CALC, FIXED, action, environ
from tests.fakes.fake_openai import FakeBackend, hang, reply

pytestmark = pytest.mark.timeout(240)
AGENT = [sys.executable, "-m", "margin.cli", "acp"]


@pytest.fixture
def fake():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as backend:
        yield backend


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def updates(transcript: dict, kind: str) -> list[dict]:
    return [m["params"]["update"] for m in transcript["messages"]
            if m["type"] == "update" and m["params"]["update"]["sessionUpdate"] == kind]


def nothing_after_each_answer(transcript: dict) -> None:
    """No session/update of a session arrives after the answer to the prompt that made it."""
    answered = [m["seq"] for m in transcript["messages"] if m["type"] == "response" and m["method"] == "session/prompt"]
    prompts = [m["seq"] for m in transcript["sent"] if m.get("method") == "session/prompt"]
    for update in (m for m in transcript["messages"] if m["type"] in ("update", "permission")):
        assert any(sent < update["seq"] < done for sent, done in zip(prompts, answered, strict=True)), update


def test_a_session_through_the_typescript_sdk(fake, tmp_path):
    root = project(tmp_path)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"agentConfirmTimeoutS": 1}))
    fake.script(reply(action("read", path="calc.py")),
                reply(action("edit", path="calc.py", old="a - b", new="a + b")),             # allowed once
                reply(action("edit", path="calc.py", old="a + b", new="a * b")),             # rejected
                reply(action("edit", path="calc.py", old="a + b", new="a - b")),             # never answered
                reply(action("finish", answer="add adds now.")),
                reply(action("read", path="calc.py")), hang(60))                           # the second prompt: cancelled
    scenario = {
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
        "cwd": str(root), "permissions": ["allow_once", "reject_once", "never"],
        "steps": [{"do": "new"}, {"do": "prompt", "text": "fix add"},
                  {"do": "prompt", "text": "and again", "cancelWhen": {"toolKind": "read"}},
                  {"do": "list"}, {"do": "load"}],
    }
    env = environ(fake, tmp_path)
    transcript = run_ts_client(scenario, [sys.executable, "-m", "margin.cli", "--settings", str(settings), "acp"],
                               cwd=root, env=env, timeout=200)
    assert transcript["errors"] == []
    assert transcript["initialize"]["protocolVersion"] == 1
    new, first, second, listed, loaded = transcript["results"]
    session = new["result"]["sessionId"]
    assert first["result"]["stopReason"] == "end_turn"
    assert second["result"]["stopReason"] == "cancelled" and second["cancelSent"]
    assert (root / "calc.py").read_text() == FIXED  # only the edit allowed
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session]
    assert "error" not in loaded

    every = [m for m in transcript["messages"] if m["type"] == "update"]
    assert every and all(m["sdkParsed"] for m in every)  # each one valid by the SDK's own v1 schema
    nothing_after_each_answer({**transcript, "messages": [m for m in transcript["messages"]
                                                          if m["seq"] < min(x["seq"] for x in transcript["sent"]
                                                                             if x.get("method") == "session/load")]})
    calls = updates(transcript, "tool_call")
    assert [c["kind"] for c in calls[:4]] == ["read", "edit", "edit", "edit"]
    ends = [u["status"] for u in updates(transcript, "tool_call_update") if u.get("status")]
    assert ends[:4] == ["completed", "completed", "failed", "failed"]
    asked = [m["params"] for m in transcript["messages"] if m["type"] == "permission"]
    assert len(asked) == 3 and all(len(a["options"]) == 4 for a in asked)
    assert asked[0]["toolCall"]["content"][0]["type"] == "diff"
    assert "did not answer in time" in json.dumps(fake.requests[4]["messages"])  # the never-answered one expired
    assert fake.disconnects  # the cancelled model call was aborted
    replay = [m for m in transcript["messages"] if m["type"] == "update"
              and m["seq"] > min(x["seq"] for x in transcript["sent"] if x.get("method") == "session/load")]
    said = [m["params"]["update"]["content"]["text"] for m in replay
            if m["params"]["update"]["sessionUpdate"] == "user_message_chunk"]
    assert said == ["fix add", "and again"]


def test_files_through_the_clients_buffers_and_next_edits_over_nes(fake, tmp_path):
    root = project(tmp_path)
    path = str(root / "calc.py")
    unsaved = CALC.replace("def add", "def add_numbers")
    fake.script(reply(action("read", path="calc.py")), reply(action("edit", path="calc.py", old="a - b", new="a + b")),
                reply(action("finish", answer="done")))
    uri = (root / "geometry.py").as_uri()
    before = "def area(r):\n    return 3.14 * r * r\n"
    wanted = "def area(radius):\n    return 3.14 * radius * radius\n"
    fake.script(reply(f"```python\n{wanted.rstrip()}\n```"))
    typed = [{"do": "notify", "method": "document/didChange", "params": {
        "sessionId": "NES", "uri": uri, "version": 2 + n,
        "contentChanges": [{"range": {"start": {"line": 0, "character": 10 + n}, "end": {"line": 0, "character": 10 + n}},
                            "text": char}]}} for n, char in enumerate("adius")]
    scenario = {
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
        "cwd": str(root), "permissions": ["allow_once"], "buffers": {path: unsaved},
        "steps": [{"do": "new"}, {"do": "prompt", "text": "fix add"},
                  {"do": "raw", "method": "nes/start", "params": {"workspaceUri": root.as_uri()}}],
    }
    env = environ(fake, tmp_path, MARGIN_NEXT_EDIT_ENABLED="true")
    transcript = run_ts_client(scenario, AGENT, cwd=root, env=env, timeout=200)
    nes = transcript["results"][2]["result"]["sessionId"]
    assert transcript["buffers"][path] == unsaved.replace("a - b", "a + b")  # written into the buffer
    assert (root / "calc.py").read_text() == CALC  # never behind the editor's back
    assert [m["type"] for m in transcript["messages"] if m["type"] in ("read", "write")] == ["read", "read", "read", "write"]

    # next edits: a second run of the client, its nes session opened, typed into and asked
    steps = [{"do": "raw", "method": "nes/start", "params": {"workspaceUri": root.as_uri()}},
             {"do": "notify", "method": "document/didOpen", "params": {
                 "sessionId": "NES", "uri": uri, "languageId": "python", "version": 1, "text": before}},
             *typed,
             {"do": "raw", "method": "nes/suggest", "params": {
                 "sessionId": "NES", "uri": uri, "version": 6, "position": {"line": 0, "character": 15},
                 "triggerKind": "automatic"}}]
    text = json.dumps(steps).replace('"NES"', json.dumps(nes))  # a fresh process numbers its sessions alike
    transcript = run_ts_client({"cwd": str(root), "steps": json.loads(text)}, AGENT, cwd=root, env=env, timeout=200)
    (suggestion,) = transcript["results"][-1]["result"]["suggestions"]
    assert suggestion["kind"] == "edit" and suggestion["uri"] == uri
    assert applied(before.replace("(r)", "(radius)"), suggestion["edits"]) == wanted


def applied(text: str, edits: list[dict]) -> str:
    """`text` with the edits made (ranges in lines and UTF-16 columns; ASCII here)."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)

    def offset(position: dict) -> int:
        return starts[position["line"]] + position["character"]

    for edit in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        text = text[:offset(edit["range"]["start"])] + edit["newText"] + text[offset(edit["range"]["end"]):]
    return text
