"""One fixed script over every custom method (and the standard requests Margin answers itself),
against the fake backend, recording each response exactly as it came over the wire. The record
is compared with `golden/wire.json` by tests/e2e/test_wire_format.py, so a change to the shape
of any response shows up as a diff.

Volatile values are replaced by stable names: thread ids (in order of appearance), timestamps,
the fake backend's port.

    .venv/bin/python -m tests.e2e.wire_script --write   # record anew (a deliberate change)
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

from tests.e2e.raw_lsp import RawClient, RpcError, raw_client
from tests.fakes.fake_openai import FakeBackend, reply, stream

GOLDEN = Path(__file__).parent / "golden" / "wire.json"
WS = "file:///ws"
A = f"{WS}/a.py"
B = f"{WS}/b.py"
A_TEXT = "import os  # 😀\n\n# margin: make it iterative\ndef total(n):\n    return n + total(n - 1) if n else 0\n\nprint(total(3))\n"
B_TEXT = "def g():\n    return 2\r\n"
ITERATIVE = "def total(n):\n    result = 0\n    while n:\n        result, n = result + n, n - 1\n    return result\n"
FUNCTION = {"start": {"line": 3, "character": 0}, "end": {"line": 5, "character": 0}}
RESOLVING = {
    "workspace": {"applyEdit": True, "configuration": True},
    "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}, "dataSupport": True}},
    "window": {"workDoneProgress": True},
}
PLAIN = {"workspace": {"applyEdit": True, "configuration": True}}


def answered_with_an_error(params: Any) -> Any:
    """How eglot answers workspace/applyEdit when the buffer's version moved on."""
    raise RpcError({"code": -32001, "message": "Edits on `b.py' require version 4, you have 5"})


def ops_answer(ops: list[dict[str, Any]], message: str = "Done.") -> str:
    return json.dumps({"assistant_message": message, "ops": ops})


class Recorder:
    def __init__(self, client: RawClient) -> None:
        self.client = client
        self.entries: list[dict[str, Any]] = []

    async def call(self, label: str, method: str, params: Any) -> dict[str, Any]:
        response = await self.client.message(method, params)
        self.record(label, method, params, response)
        return response

    def record(self, label: str, method: str, params: Any, response: dict[str, Any]) -> None:
        kept = {key: response[key] for key in ("result", "error") if key in response}
        if "error" in kept:  # the code and the message; `data` may carry a traceback
            kept["error"] = {"code": kept["error"]["code"], "message": kept["error"]["message"]}
        self.entries.append({"label": label, "method": method, "response": kept})


def env(fake: FakeBackend, database: Path, **extra: str) -> dict[str, str]:
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(database),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_LOG_LEVEL": "INFO", **extra}


async def main_session(fake: FakeBackend, folder: Path) -> list[dict[str, Any]]:
    # Next edits are on in the user's own settings, asked only by the requests below (not after a
    # pause: the script's replies stay in order), and turned off by the workspace's until then.
    async with raw_client(env(fake, folder / "threads.db", MARGIN_NEXT_EDIT_ENABLED="true", MARGIN_NEXT_EDIT_PAUSE_MS="0"),
                          capabilities=RESOLVING, root_uri=WS, configuration={"nextEdit": {"enabled": False}}) as client:
        r = Recorder(client)
        r.record("initialize", "initialize", None, {"result": client.init_result})
        client.notify("textDocument/didOpen", {"textDocument": {"uri": A, "languageId": "python", "version": 3,
                                                                "text": A_TEXT}})
        client.notify("textDocument/didOpen", {"textDocument": {"uri": B, "languageId": "python", "version": 1,
                                                                "text": B_TEXT}})
        fake.script(reply("Hello there, friend.", chunk_size=5))
        await r.call("chat", "margin/chat", {"message": "hi", "partialResultToken": "p1"})
        r.entries.append({"label": "chat partial results", "method": "$/progress", "response": [
            n["params"] for n in client.notifications if n["method"] == "$/progress"]})
        fake.script(reply("It adds."))
        await r.call("chat with a selection", "margin/chat", {
            "message": "what is this?", "textDocument": {"uri": A}, "files": [A],
            "selection": {"start": {"line": 3, "character": 0}, "end": {"line": 4, "character": 10}}})
        await r.call("chat, invalid params", "margin/chat", {"message": "", "bogus": 1})
        await r.call("chat, no such thread", "margin/chat", {"message": "hi", "threadId": "nope"})
        await r.call("explain", "margin/explain", {"message": "and now?", "textDocument": {"uri": A}})
        await r.call("explain chatOps", "margin/explain", {"message": "and now?", "profile": "chatOps",
                                                            "textDocument": {"uri": B}})
        await r.call("history", "margin/history", {})
        await r.call("history by document", "margin/history", {"textDocument": {"uri": A}})
        await r.call("history, no such thread", "margin/history", {"threadId": "nope"})
        await r.call("recall a file", "margin/recall", {"pointer": "[t1 a.py]"})
        await r.call("recall a reply", "margin/recall", {"pointer": "t1 reply", "textDocument": {"uri": A}})
        await r.call("recall, not a pointer", "margin/recall", {"pointer": "a.py"})
        await r.call("recall, nothing there", "margin/recall", {"pointer": "[t9 a.py]"})
        await r.call("threads", "margin/threads", {})
        created = await r.call("new thread", "margin/newThread", {"title": "Scratch", "textDocument": {"uri": A}})
        await r.call("threads, two", "margin/threads", {"workspace": WS})
        await r.call("history of the new thread", "margin/history", {"threadId": created["result"]["threadId"]})
        await r.call("delete thread", "margin/deleteThread", {"threadId": created["result"]["threadId"]})
        await r.call("delete thread again", "margin/deleteThread", {"threadId": created["result"]["threadId"]})
        remembered = await r.call("remember", "margin/remember", {"text": " we use pytest, never unittest ",
                                                                  "textDocument": {"uri": A}})
        await r.call("remember global", "margin/remember", {"text": "the API base is /v2", "scope": "global"})
        await r.call("remember, invalid params", "margin/remember", {"text": "  ", "scope": "team"})
        await r.call("memories", "margin/memories", {"textDocument": {"uri": A}})
        await r.call("forget", "margin/forget", {"id": remembered["result"]["id"]})
        await r.call("forget again", "margin/forget", {"id": remembered["result"]["id"]})
        await r.call("forget, invalid params", "margin/forget", {})
        await r.call("memories after forget", "margin/memories", {})

        fake.script(reply(ops_answer([{"op": "replace", "target_file": "b.py", "target": "match",
                                       "match": "    return 2\r\n", "content": "    return 3\r\n"}],
                                     "g now returns 3.")))
        proposal = await r.call("edit-ops", "margin/editOps", {"message": "make g return 3",
                                                               "textDocument": {"uri": B}})
        fake.script(reply("this is not JSON"))
        await r.call("edit-ops, prose", "margin/editOps", {"message": "again", "textDocument": {"uri": B}})
        fake.script(reply('{"assistant_message": "x", "ops": [', finish_reason="length"))
        await r.call("edit-ops, cut off", "margin/editOps", {"message": "again", "textDocument": {"uri": B}})
        fake.script(reply(ops_answer([{"op": "delete", "target_file": "b.py", "target": "match",
                                       "match": "nowhere"}])))
        await r.call("edit-ops, bad op", "margin/editOps", {"message": "again", "textDocument": {"uri": B}})
        ops = proposal["result"]["ops"]
        bases = proposal["result"]["baseFingerprints"]
        await r.call("apply-ops, no base", "margin/applyOps", {
            "ops": [{"op": "delete", "targetFile": f"{WS}/other.py", "target": "document"}], "baseFingerprints": {}})
        await r.call("apply-ops, invalid params", "margin/applyOps", {"ops": "all"})
        client.notify("textDocument/didChange", {"textDocument": {"uri": B, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
             "text": "import os\r\n"}]})
        await r.call("apply-ops, rebased", "margin/applyOps", {"ops": ops, "baseFingerprints": bases})
        client.notify("textDocument/didChange", {"textDocument": {"uri": B, "version": 3}, "contentChanges": [
            {"range": {"start": {"line": 2, "character": 11}, "end": {"line": 2, "character": 12}}, "text": "9"}]})
        await r.call("apply-ops, stale", "margin/applyOps", {"ops": ops, "baseFingerprints": bases})
        client.answers["workspace/applyEdit"] = lambda params: {"applied": False, "failureReason": "user said no"}
        client.notify("textDocument/didChange", {"textDocument": {"uri": B, "version": 4}, "contentChanges": [
            {"text": B_TEXT}]})
        await r.call("apply-ops, refused", "margin/applyOps", {"ops": ops, "baseFingerprints": bases})
        client.answers["workspace/applyEdit"] = lambda params: {"applied": True}
        await r.call("apply-ops command", "workspace/executeCommand", {
            "command": "margin.applyOps", "arguments": [{"ops": ops, "baseFingerprints": bases}]})

        offered = await r.call("code actions", "textDocument/codeAction", {
            "textDocument": {"uri": A}, "range": FUNCTION, "context": {"diagnostics": []}})
        await r.call("code actions, fix at the cursor", "textDocument/codeAction", {
            "textDocument": {"uri": A}, "range": {"start": {"line": 4, "character": 3}, "end": {"line": 4, "character": 3}},
            "context": {"diagnostics": [{"range": {"start": {"line": 4, "character": 4},
                                                   "end": {"line": 4, "character": 10}},
                                         "message": "recursion", "source": "lint", "code": 7}]}})
        await r.call("code actions, only quickfix", "textDocument/codeAction", {
            "textDocument": {"uri": A}, "range": FUNCTION, "context": {"diagnostics": [], "only": ["quickfix"]}})
        comment = offered["result"][0]
        fake.script(reply(json.dumps({"replacement": ITERATIVE})))
        await r.call("resolve", "codeAction/resolve", comment)
        fake.script(reply("no JSON at all"))
        await r.call("resolve, prose", "codeAction/resolve", comment)
        await r.call("resolve, invalid data", "codeAction/resolve", {**comment, "data": {"uri": A}})

        fake.script(stream(["one ", "two ", "three ", "four"], chunk_delay_s=0.3))
        first_id, first = client.send_request("margin/chat", {"message": "slow please"})
        while len(fake.requests) < 9:
            await asyncio.sleep(0.02)
        await r.call("chat, busy", "margin/chat", {"message": "me too"})
        client.cancel(first_id)
        r.record("chat, cancelled", "margin/chat", None, await asyncio.wait_for(first, 60))
        await r.call("status", "margin/status", {})
        await r.call("status, invalid params", "margin/status", {"refresh": [1]})
        await r.call("status, refreshed", "margin/status", {"refresh": True})
        await r.call("unknown method", "margin/nothing", {})
        c = A.replace("a.py", "c.py")
        client.notify("textDocument/didOpen", {"textDocument": {"uri": c, "languageId": "python", "version": 1,
                                                                "text": "values = [1]\nbiggest = max()\n"}})
        fake.script(reply("```python\nvalues)\n```"))
        inline = {"textDocument": {"uri": c}, "position": {"line": 1, "character": 14}, "context": {"triggerKind": 1}}
        await r.call("inline completion", "textDocument/inlineCompletion", inline)
        await r.call("inline completion, from the cache", "textDocument/inlineCompletion", inline)
        await r.call("inline completion, an older version", "textDocument/inlineCompletion",
                     {**inline, "textDocument": {"uri": c, "version": 0}})
        await r.call("inline completion, invalid params", "textDocument/inlineCompletion",
                     {**inline, "position": {"line": -1, "character": 0}})
        client.notify("workspace/didChangeConfiguration", {"settings": {"margin": {}}})  # the workspace's "off" gone
        await r.call("status, next edit on", "margin/status", {})  # the settings are in force
        d = A.replace("a.py", "d.py")
        client.notify("textDocument/didOpen", {"textDocument": {"uri": d, "languageId": "python", "version": 1,
                                                                "text": "def area(r):\n    return r * r\n"}})
        client.notify("textDocument/didChange", {"textDocument": {"uri": d, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 10}}, "text": "adius"}]})
        fake.script(reply("```python\ndef area(radius):\n    return radius * radius\n```"))  # once: then kept
        at = {"textDocument": {"uri": d, "version": 2}, "position": {"line": 0, "character": 15}}
        await r.call("next edit", "margin/nextEdit", at)
        await r.call("next edit, Copilot's shape", "textDocument/copilotInlineEdit", at)
        await r.call("next edit, an older version", "margin/nextEdit", {**at, "textDocument": {"uri": d, "version": 1}})
        await r.call("next edit, invalid params", "margin/nextEdit", {"textDocument": {"uri": d}, "position": at["position"]})
        client.notify("workspace/didChangeConfiguration", {"settings": {"margin": {"nextEdit": {"enabled": False}}}})
        client.notify("workspace/didChangeConfiguration", {"settings": {"margin": {"chat": {"enabled": False}}}})
        await r.call("chat, disabled", "margin/chat", {"message": "hi"})
        client.notify("workspace/didChangeConfiguration", {"settings": {"margin": {
            "chat": {"enabled": True, "contextWindow": 300, "maxOutputTokens": 100}}}})
        await r.call("chat, over budget", "margin/chat", {"message": "word " * 400})
        client.answers["workspace/applyEdit"] = answered_with_an_error
        await r.call("apply-ops, the editor answers with an error", "margin/applyOps",
                     {"ops": ops, "baseFingerprints": bases})
        return r.entries


async def command_session(fake: FakeBackend, folder: Path) -> list[dict[str, Any]]:
    """A client that cannot resolve code actions: they carry the margin.editSelection command."""
    async with raw_client(env(fake, folder / "threads2.db"), capabilities=PLAIN, root_uri=WS) as client:
        r = Recorder(client)
        client.notify("textDocument/didOpen", {"textDocument": {"uri": A, "languageId": "python", "version": 1,
                                                                "text": A_TEXT}})
        offered = await r.call("code actions with commands", "textDocument/codeAction", {
            "textDocument": {"uri": A}, "range": FUNCTION, "context": {"diagnostics": []}})
        command = offered["result"][0]["command"]
        fake.script(reply(json.dumps({"replacement": ITERATIVE})))
        await r.call("edit selection command", "workspace/executeCommand", command)
        r.entries.append({"label": "the edit sent", "method": "workspace/applyEdit", "response": [
            m["params"] for m in client.server_requests if m["method"] == "workspace/applyEdit"]})
        fake.script(reply("no JSON"))
        await r.call("edit selection command, prose", "workspace/executeCommand", command)
        fake.script(reply(json.dumps({"replacement": ITERATIVE})))
        client.answers["workspace/applyEdit"] = answered_with_an_error
        await r.call("edit selection command, the editor answers with an error", "workspace/executeCommand",
                     command)
        r.entries.append({"label": "what the user was shown", "method": "window/showMessage", "response": [
            n["params"] for n in client.notifications if n["method"] == "window/showMessage"]})
        return r.entries


async def agent_session(fake: FakeBackend, folder: Path) -> list[dict[str, Any]]:
    """The agent in a folder on disk: a turn that reads a file, is told of a bad call, and finishes."""
    root = folder / "agent-ws"
    root.mkdir()
    (root / "a.py").write_text("def total(n):\n    return n\n")
    async with raw_client(env(fake, folder / "threads3.db", MARGIN_RETRIEVAL="false"), capabilities=PLAIN,
                          root_uri=root.as_uri()) as client:
        r = Recorder(client)
        client.notify("margin/diagnostics", {"uri": (root / "a.py").as_uri(), "diagnostics": [{
            "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 10}},
            "severity": 2, "message": "unused", "source": "lint"}]})
        fake.script(reply(json.dumps({"tool": "read", "args": {"path": "a.py"}}), chunk_size=50),
                    reply(json.dumps({"tool": "diagnostics", "args": {"path": "a.py"}}), chunk_size=50),
                    reply(json.dumps({"tool": "open", "args": {}}), chunk_size=50),
                    reply(json.dumps({"tool": "finish", "args": {"answer": "It returns n."}}), chunk_size=50))
        await r.call("agent", "margin/agent", {"task": "what does total do?", "partialResultToken": "a1"})
        r.entries.append({"label": "agent partial results", "method": "$/progress (margin/agent)", "response": [
            n["params"] for n in client.notifications if n["method"] == "$/progress"]})
        thread = r.entries[-2]["response"]["result"]["threadId"]
        await r.call("approvals", "margin/approvals", {"threadId": thread})
        await r.call("agent, invalid params", "margin/agent", {"task": ""})
        return [{**entry, "response": json.loads(json.dumps(entry["response"]).replace(root.as_uri(), "<folder>"))}
                for entry in r.entries]


def normalise(entries: Any, port: int) -> Any:
    threads: dict[str, str] = {}

    def fix(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: fix(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        if key in ("createdAt", "updatedAt", "created") and isinstance(value, (int, float)):
            return "<time>"
        if isinstance(value, str):
            value = value.replace(f"127.0.0.1:{port}", "<fake>")

            def thread(match: re.Match[str]) -> str:
                return threads.setdefault(match.group(0), f"<thread {len(threads) + 1}>")

            value = re.sub(r"\b[0-9a-f]{32}\b", thread, value)
        return value

    return fix(entries)


async def record(folder: Path) -> list[dict[str, Any]]:
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as fake:
        entries = await main_session(fake, folder)
        entries += await command_session(fake, folder)
        entries += await agent_session(fake, folder)
        return normalise(entries, fake.port)


def dump(entries: list[dict[str, Any]]) -> str:
    return json.dumps(entries, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        recorded = dump(asyncio.run(record(Path(tmp))))
    if "--write" in sys.argv:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(recorded, encoding="utf-8")
        print(f"wrote {GOLDEN}")
    else:
        sys.stdout.write(recorded)
