"""The agent through the real margin-lsp process, a scripted model playing each trajectory the
field's agents fail at: a call described instead of made, malformed JSON, an unknown tool, the
same call three times, a result of 10 MB, the backend dying mid-step, a confirmation never
answered, a 2k served window, and the person typing between the agent's read and its edit.
Every turn ends (0 hung), nothing is written over text the model did not read (0 stale writes),
and no request is larger than the window the server serves."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import threading

import pytest
import tiktoken
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from margin.core.tokens.assets import openai_encoding_args
from tests.e2e.agent_editor import Editor, attach
from tests.e2e.lsp_client import margin_client, request
from tests.fakes.fake_openai import FakeBackend, hang, reply, stream, tool_calls

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = CALC.replace("a - b", "a + b")
EDITOR = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
    apply_edit=True, workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)))
"""an editor that applies edits, without change annotations: confirmations are asked apart"""
ENCODING = tiktoken.Encoding(**openai_encoding_args("o200k_base"))  # the packaged asset, offline


def action(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args})


def workspace(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text(CALC)
    (root / "README.md").write_text("A calculator.\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def start(fake, tmp_path, root, **extra):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
           "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", "MARGIN_RETRIEVAL": "false", **extra}
    return margin_client(env=env, root=root, capabilities=EDITOR)


async def agent(client, editor: Editor, task: str, **params):
    token = f"agent-{len(editor.events)}"
    editor.events[token] = []
    result = await asyncio.wait_for(
        request(client, "margin/agent", {"task": task, "partialResultToken": token, **params}), 60)
    return result, editor.events[token]


async def server_holds(client, uri: str, text: str) -> None:
    """Until margin-lsp's copy of the document is `text` (margin/status: its fingerprint)."""
    want = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    for _ in range(3000):
        files = (await request(client, "margin/status", {}))["files"]
        if any(f["uri"] == uri and f["fingerprint"] == want for f in files):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the server never got the typed text")


def prompt_tokens(body: dict) -> int:
    """A request's messages counted with the model's tokenizer (a lower bound of the prompt)."""
    return sum(len(ENCODING.encode_ordinary(m.get("content") or "")) for m in body["messages"])


def assert_within_window(fake, window: int) -> None:
    for body in fake.requests:
        assert prompt_tokens(body) + body["max_tokens"] <= window


async def test_a_task_is_read_edited_once_confirmed_and_finished_and_kept_in_its_thread(fake, tmp_path):
    root = workspace(tmp_path)
    uri = (root / "src" / "calc.py").as_uri()
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        editor.open(uri, CALC)
        explained = await request(client, "margin/explain", {"message": "fix add", "profile": "agent",
                                                             "textDocument": {"uri": uri}})
        assert explained["tools"] == ["read", "list", "search", "edit", "run", "diagnostics", "recall", "finish"]
        sections = {s["name"]: s["tokens"] for s in explained["budget"]["sections"]}
        assert 150 < sections["tools"] <= 300 and explained["budget"]["counted"] <= explained["budget"]["limit"]
        assert "- edit {" in explained["messages"][0]["content"] and explained["messages"][1]["content"] == "Task: fix add\n\n(The person has src/calc.py open.)"
        status = await request(client, "margin/status", {})
        assert status["profiles"]["agent"]["agentProtocol"].startswith("json · llama.cpp holds an answer")
        assert fake.requests == []  # explaining and the status call no model
        fake.script(reply(action("read", path="src/calc.py")),
                    reply(action("edit", path="src/calc.py", old="    return a - b", new="    return a + b")),
                    reply(action("finish", answer="add now adds.")))
        result, events = await agent(client, editor, "fix add", textDocument={"uri": uri})

        assert result["stopped"] == "finished" and result["answer"] == "add now adds."
        assert result["protocol"] == "json"  # llama.cpp without tool calls in its template: JSON actions
        assert editor.text(uri) == FIXED and result["edits"] == [{"path": "src/calc.py", "startLine": 2, "endLine": 2}]
        assert len(editor.asked) == 1 and "return a + b" in editor.asked[0]  # the diff, asked before
        assert (root / "src" / "calc.py").read_text() == CALC  # the buffer changed; saving is the person's
        assert [e["kind"] for e in events if e["kind"] != "text"] == ["step", "call", "step", "call", "step", "final"]
        assert [s["calls"][0]["status"] for s in result["steps"][:2]] == ["done", "done"]
        # The JSON action protocol: each request held to the action schema, the tools not offered natively.
        for body in fake.requests:
            assert body["response_format"]["json_schema"]["schema"]["oneOf"][0]["properties"]["tool"] == {"const": "read"}
            assert "tools" not in body
        second = json.dumps(fake.requests[1]["messages"])
        assert "return a - b" in second and "[t1 read src/calc.py]" in second
        assert all(s["promptTokens"] <= result["limit"] for s in result["steps"])
        budget = result["budget"]
        assert [s["name"] for s in budget["sections"]] == ["system", "tools", "steps", "task"]
        assert budget["counted"] == result["steps"][-1]["promptTokens"] and budget["limit"] == result["limit"]
        assert budget["sections"][2]["kept"] == 2 and budget["sections"][2]["dropped"] == []  # the two newest: whole

        history = await request(client, "margin/history", {"threadId": result["threadId"]})
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool", "assistant", "tool",
                                                           "assistant", "assistant"]
        threads = await request(client, "margin/threads", {})
        assert result["threadId"] in [t["id"] for t in threads["threads"]]
        recalled = await request(client, "margin/recall", {"pointer": "[t1 read src/calc.py]", "threadId": result["threadId"]})
        assert recalled["content"].endswith(CALC) and recalled["pointer"] == "[t1 read src/calc.py]"
        with pytest.raises(JsonRpcException, match="is an agent thread"):
            await request(client, "margin/chat", {"message": "hi", "threadId": result["threadId"]})
    assert_within_window(fake, 8192)


async def test_described_malformed_and_unknown_calls_are_told_back_and_counted_never_dropped(fake, tmp_path):
    root = workspace(tmp_path)
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        fake.script(reply("I will use the read tool on src/calc.py to see it."),
                    reply('{"tool": "read", "args": {"path": "src/calc.py"'),
                    reply(action("read", path="src/calc.py")),
                    reply(action("open_file", path="src/calc.py")),
                    reply(action("read", path="src/calc.py", line=3)),
                    reply(action("finish", answer="It subtracts.")))
        result, events = await agent(client, editor, "what does add do?")
        assert result["stopped"] == "finished" and result["answer"] == "It subtracts."
        told = [t["kind"] for s in result["steps"] for t in s["told"]]
        assert told == ["described", "malformed", "unknown tool", "bad arguments"]
        assert result["described"] == 1 and result["rejected"] == 4
        assert [e["rejection"] for e in events if e["kind"] == "told"] == told
        # Each was told to the model in the next step's prompt.
        assert "described a tool call" in json.dumps(fake.requests[1]["messages"])
        assert "not valid JSON" in json.dumps(fake.requests[2]["messages"])
        assert "There is no tool 'open_file'" in json.dumps(fake.requests[4]["messages"])
        assert "read takes path, start, end, not 'line'" in json.dumps(fake.requests[5]["messages"])


async def test_the_same_call_three_times_is_told_then_stops_the_turn(fake, tmp_path):
    root = workspace(tmp_path)
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        fake.script(*[reply(action("read", path="src/calc.py")) for _ in range(3)])
        result, _ = await agent(client, editor, "look at calc")
        assert result["stopped"] == "stuck" and "three times" in result["why"]
        assert [s["calls"][0]["status"] for s in result["steps"]] == ["done", "repeated", "repeated"]
        assert "You already called read" in json.dumps(fake.requests[2]["messages"])
        assert len(fake.requests) == 3


async def test_a_10_mb_file_and_a_2k_window_never_make_a_request_larger_than_the_window(tmp_path):
    root = workspace(tmp_path)
    (root / "big.txt").write_text("word " * (2 << 20))
    (root / "long.py").write_text("".join(f"value_{i} = {i}  # a line of the long file\n" for i in range(3000)))
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 2048}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as small:
        async with start(small, tmp_path, root, MARGIN_AGENT_MAX_OUTPUT_TOKENS="256") as client:
            editor = attach(client)
            small.script(reply(action("read", path="big.txt")), reply(action("read", path="long.py")),
                         reply(action("read", path="src/calc.py")), reply(action("list", path=".")),
                         reply(action("finish", answer="done")))
            result, _ = await agent(client, editor, "read everything")
            assert result["stopped"] == "finished" and result["window"] == 2048
            assert "too large to read" in json.dumps(small.requests[1]["messages"])
            third = json.dumps(small.requests[2]["messages"])
            assert "value_0 = 0" in third and "value_2999" not in third and "did not fit" in third
            assert all(s["promptTokens"] <= result["limit"] for s in result["steps"])
            # The older results became pointers to fit: the last prompt still shows the newest whole.
            last = json.dumps(small.requests[-1]["messages"])
            assert "[t2 read long.py]" in last and "value_0 = 0" not in last
            dropped = [d["item"] for d in result["budget"]["sections"][2]["dropped"]]
            assert "[t2 read long.py]" in dropped
        assert_within_window(small, 2048)


async def test_the_backend_dying_mid_step_ends_the_turn_and_keeps_the_steps_before(fake, tmp_path):
    root = workspace(tmp_path)
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        fake.script(reply(action("read", path="src/calc.py")), stream(['{"tool": "edit", ', '"args": {'], cut_after=1))
        result, events = await agent(client, editor, "fix add")
        assert result["stopped"] == "model failed" and "step 2" in result["answer"]
        assert events[-1]["kind"] == "final"
        history = await request(client, "margin/history", {"threadId": result["threadId"]})
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool", "assistant"]
        # The thread goes on: the next turn's prompt holds the step kept.
        fake.script(reply(action("finish", answer="ok")))
        again, _ = await agent(client, editor, "go on", threadId=result["threadId"])
        assert again["stopped"] == "finished" and "[t1 read src/calc.py]" in json.dumps(fake.requests[-1]["messages"])


async def test_a_confirmation_never_answered_is_a_no_within_the_deadline(fake, tmp_path):
    root = workspace(tmp_path)
    uri = (root / "src" / "calc.py").as_uri()
    async with start(fake, tmp_path, root, MARGIN_AGENT_CONFIRM_TIMEOUT_S="1") as client:
        editor = attach(client)
        editor.answer = None
        editor.open(uri, CALC)
        fake.script(reply(action("read", path="src/calc.py")),
                    reply(action("edit", path="src/calc.py", old="a - b", new="a + b")),
                    reply(action("finish", answer="I could not change it.")))
        result, _ = await agent(client, editor, "fix add", textDocument={"uri": uri})
        editor.released.set()
        assert result["stopped"] == "finished" and result["edits"] == []
        assert result["steps"][1]["calls"][0]["status"] == "refused"
        assert "did not answer in time" in json.dumps(fake.requests[2]["messages"])
        assert editor.text(uri) == CALC and editor.edits == []


async def test_text_the_person_typed_after_the_read_is_never_overwritten(fake, tmp_path):
    root = workspace(tmp_path)
    uri = (root / "src" / "calc.py").as_uri()
    typed = CALC.replace("def mul", "# the person's note\ndef mul")
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        editor.open(uri, CALC)
        typed_in = threading.Event()
        edit = reply(action("edit", path="src/calc.py", old="a - b", new="a + b"))
        edit.gate = typed_in
        fake.script(reply(action("read", path="src/calc.py")), edit,
                    reply(action("read", path="src/calc.py")),
                    reply(action("edit", path="src/calc.py", old="a - b", new="a + b")),
                    reply(action("finish", answer="fixed")))

        async def type_after_the_first_read():
            while len(fake.requests) < 2:
                await asyncio.sleep(0.01)
            editor.type(uri, typed)
            await server_holds(client, uri, typed)
            typed_in.set()  # the model's edit answers only once the server has the person's text

        typing = asyncio.create_task(type_after_the_first_read())
        # The person types while the model thinks over its edit (its answer waits until they have).
        result, _ = await agent(client, editor, "fix add", textDocument={"uri": uri})
        await typing
        assert result["stopped"] == "finished"
        first_edit = result["steps"][1]["calls"][0]
        assert first_edit["status"] == "refused"
        assert "changed since you read it" in json.dumps(fake.requests[2]["messages"])
        assert editor.text(uri) == typed.replace("a - b", "a + b")  # the note kept, the fix on top
        assert len(editor.edits) == 1


@pytest.fixture
def fake():
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as backend:
        yield backend



async def test_native_tool_calls_always_in_this_thread_and_approvals_listed_and_revoked(tmp_path):
    """A server whose template takes tools: the tools offered natively, each call answered by its
    id; "Always in this thread" approves that exact edit again without asking, until revoked."""
    root = workspace(tmp_path)
    uri = (root / "src" / "calc.py").as_uri()
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 8192}, "chat_template_caps": {"supports_tools": True}},
                     models=[{"id": "fake-model", "owned_by": "llamacpp"}]) as native:
        async with start(native, tmp_path, root) as client:
            editor = attach(client)
            editor.answer = "Always in this thread"
            editor.open(uri, CALC)
            flip = {"path": "src/calc.py", "old": "a - b", "new": "a + b"}
            back = {"path": "src/calc.py", "old": "a + b", "new": "a - b"}
            native.script(tool_calls(("read", json.dumps({"path": "src/calc.py"})), content="Reading. "),
                          tool_calls(("edit", json.dumps(flip)), ("edit", json.dumps(back)), ids=["e1", "e2"]),
                          tool_calls(("finish", json.dumps({"answer": "flipped twice"}))))
            result, _ = await agent(client, editor, "flip add", textDocument={"uri": uri})
            assert result["protocol"] == "native" and result["stopped"] == "finished"
            assert native.requests[0]["tools"][0]["function"]["name"] == "read" and "response_format" not in native.requests[0]
            answered = [m for m in native.requests[2]["messages"] if m["role"] == "tool"]
            assert [m["tool_call_id"] for m in answered] == ["call_0", "e1", "e2"]
            assert [c["status"] for c in result["steps"][1]["calls"]] == ["done", "done"]
            assert len(editor.asked) == 2 and editor.text(uri) == CALC  # each edit asked once, both applied

            listed = await request(client, "margin/approvals", {"threadId": result["threadId"]})
            assert listed["approvals"] == [{"tool": "edit", "args": flip}, {"tool": "edit", "args": back}]
            native.script(tool_calls(("edit", json.dumps(flip))), tool_calls(("read", json.dumps({"path": "src/calc.py"}))),
                          tool_calls(("edit", json.dumps(flip))), tool_calls(("finish", json.dumps({"answer": "ok"}))))
            editor.answer = "Reject"
            again, _ = await agent(client, editor, "flip it once more", threadId=result["threadId"])
            assert [s["calls"][0]["status"] for s in again["steps"][:3]] == ["refused", "done", "done"]  # a new turn reads first
            assert "Read src/calc.py first" in json.dumps(native.requests[-3]["messages"])
            assert again["edits"] == [{"path": "src/calc.py", "startLine": 2, "endLine": 2}] and len(editor.asked) == 2
            assert editor.text(uri) == FIXED  # approved before: applied without asking

            for body in native.requests:  # every call the model made is answered by its id, in later turns too
                called = [c["id"] for m in body["messages"] for c in m.get("tool_calls", [])]
                answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
                assert called == answered and "was not run" not in json.dumps(body["messages"])
            revoked = await request(client, "margin/approvals", {"threadId": result["threadId"],
                                                                 "revoke": [{"tool": "edit", "args": back}]})
            assert revoked["approvals"] == [{"tool": "edit", "args": flip}]
            native.script(tool_calls(("read", json.dumps({"path": "src/calc.py"}))),
                          tool_calls(("edit", json.dumps(back))), tool_calls(("finish", json.dumps({"answer": "no"}))))
            third, _ = await agent(client, editor, "and back", threadId=result["threadId"])
            assert third["steps"][1]["calls"][0]["status"] == "refused" and len(editor.asked) == 3
            assert editor.text(uri) == FIXED


async def test_cancelling_a_turn_stops_the_model_call_and_keeps_the_steps_that_completed(fake, tmp_path):
    root = workspace(tmp_path)
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        fake.script(reply(action("read", path="src/calc.py")), hang(60))
        params = {"task": "fix add", "partialResultToken": "c", "workDoneToken": "w"}
        task = asyncio.ensure_future(request(client, "margin/agent", params))
        while len(fake.requests) < 2:
            await asyncio.sleep(0.01)
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token="w"))  # the stop button
        with pytest.raises(JsonRpcException, match="cancel"):
            await asyncio.wait_for(task, 30)
        threads = await request(client, "margin/threads", {})
        (thread,) = [t for t in threads["threads"] if t["title"] == "fix add"]
        for _ in range(500):  # the cancelled turn lets go of the thread
            history = await request(client, "margin/history", {"threadId": thread["id"]})
            if len(history["messages"]) == 3:
                break
            await asyncio.sleep(0.02)
        assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool"]
        fake.script(reply(action("finish", answer="went on")))
        again, _ = await agent(client, editor, "go on", threadId=thread["id"])
        assert again["stopped"] == "finished"  # the thread is free again
        assert fake.disconnects  # the model call was aborted, not left running


async def test_on_ollamas_2k_window_actions_in_text_are_read_and_no_request_passes_the_window(tmp_path):
    """Ollama's OpenAI endpoint ignores a larger window and cuts silently: the agent works in the
    2048 tokens Ollama serves (num_ctx) whatever contextWindow says, with actions written in text."""
    from tests.fakes.fake_ollama import FakeOllama

    root = workspace(tmp_path)
    (root / "long.py").write_text("".join(f"value_{i} = {i}  # a line of the long file\n" for i in range(3000)))
    with FakeOllama(["qwen2.5-coder:1.5b"]) as ollama:
        ollama.num_ctx["qwen2.5-coder:1.5b"] = 2048
        ollama.script(reply('I will read it.\n```json\n{"tool": "read", "args": {"path": "long.py"}}\n```'),
                      reply('<tool_call>{"name": "read", "arguments": {"path": "src/calc.py"}}</tool_call>'),
                      reply('```json\n{"tool": "finish", "args": {"answer": "read both"}}\n```'))
        async with start(ollama, tmp_path, root, MARGIN_DEFAULTS_MODEL="qwen2.5-coder:1.5b",
                         MARGIN_AGENT_CONTEXT_WINDOW="32000", MARGIN_AGENT_MAX_OUTPUT_TOKENS="256") as client:
            editor = attach(client)
            result, _ = await agent(client, editor, "read the code")
            tiny, _ = await agent(client, editor, "word " * 3000)
        assert result["protocol"] == "text" and result["window"] == 2048 and result["stopped"] == "finished"
        assert [s["calls"][0]["tool"] for s in result["steps"]] == ["read", "read", "finish"]  # 1.5B: the small cap
        assert "Tools:\n- read" in ollama.requests[0]["messages"][0]["content"] and "tools" not in ollama.requests[0]
        second = json.dumps(ollama.requests[1]["messages"])
        assert "value_0 = 0" in second and "value_2999" not in second
        assert tiny["stopped"] == "over budget" and "OLLAMA_CONTEXT_LENGTH" in tiny["answer"]
        assert len(ollama.requests) == 3  # the task too large for the window was never sent
        assert_within_window(ollama, 2048)


async def test_diagnostics_show_what_an_edit_changed_and_commands_run_asked_in_the_sandbox(fake, tmp_path):
    """The problems the editor reports, as a delta between looks; a command asked, then run in the
    sandbox in the workspace folder; the person's check command for a file with no reports."""
    root = workspace(tmp_path)
    uri = (root / "src" / "calc.py").as_uri()
    async with start(fake, tmp_path, root, MARGIN_AGENT_CHECK_COMMAND="grep -c calculator {path}") as client:
        editor = attach(client)
        editor.open(uri, CALC)

        def problems(*messages: str) -> None:
            client.protocol.notify("margin/diagnostics", {"uri": uri, "diagnostics": [
                {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 9}},
                 "severity": 1, "message": message, "source": "lint"} for message in messages]})

        problems("subtracts", "unused b")
        steps = [reply(action("diagnostics", path="src/calc.py")), reply(action("read", path="src/calc.py")),
                 reply(action("edit", path="src/calc.py", old="a - b", new="a + b")),
                 reply(action("diagnostics", path="src/calc.py")), reply(action("run", command="cat src/calc.py")),
                 reply(action("diagnostics", path="README.md")), reply(action("finish", answer="done"))]

        changed = threading.Event()

        async def after_the_edit():
            while len(fake.requests) < 4:
                await asyncio.sleep(0.01)
            problems("unused b", "missing docstring")
            await request(client, "margin/status", {})  # answered after the notification before it
            changed.set()

        changing = asyncio.create_task(after_the_edit())
        looked = reply(action("diagnostics", path="src/calc.py"))
        looked.gate = changed
        fake.script(*steps[:3], looked, *steps[4:])
        result, _ = await agent(client, editor, "fix add, then check", textDocument={"uri": uri})
        await changing
        assert result["stopped"] == "finished"
        first = json.dumps(fake.requests[1]["messages"])
        assert "2 problems in src/calc.py now" in first and "src/calc.py:2: error: subtracts (lint)" in first
        delta = fake.requests[4]["messages"][-1]["content"]
        assert "new: src/calc.py:2: error: missing docstring" in delta and "gone: src/calc.py:2: error: subtracts" in delta
        assert "\nsrc/calc.py:2: error: unused b" in delta  # still there, not new
        ran = fake.requests[5]["messages"][-1]["content"]
        assert "$ cat src/calc.py" in ran and "return a - b" in ran and "[exit status 0]" in ran  # the saved file
        assert "Unsaved in the editor" in ran and any("asks to run, in the sandbox: cat src/calc.py" in a for a in editor.asked)
        checked = fake.requests[6]["messages"][-1]["content"]
        assert "$ grep -c calculator README.md\n1\n" in checked


async def test_a_small_model_reads_numbered_lines_and_edits_whole_lines_by_number(fake, tmp_path):
    """At 3B or less, `edit` replaces lines by number (read shows them): no exact copy of the old
    text to get wrong; still only lines it read, of the version it read."""
    root = workspace(tmp_path)
    uri = (root / "src" / "calc.py").as_uri()
    async with start(fake, tmp_path, root, MARGIN_AGENT_MODEL="qwen2.5-coder-1.5b-instruct") as client:
        editor = attach(client)
        editor.open(uri, CALC)
        fake.script(reply(action("read", path="src/calc.py", start=1, end=2)),
                    reply(action("edit", path="src/calc.py", start=5, end=6, new="pass")),
                    reply(action("edit", path="src/calc.py", start=2, end=2, new="    return a + b")),
                    reply(action("finish", answer="fixed")))
        result, _ = await agent(client, editor, "fix add", textDocument={"uri": uri})
        assert result["stopped"] == "finished" and editor.text(uri) == FIXED
        schema = json.dumps(fake.requests[0]["response_format"])
        assert '"end"' in schema and '"old"' not in schema  # the small shape offered
        assert "   1| def add(a, b):\n   2|     return a - b\n" in fake.requests[1]["messages"][-1]["content"]
        assert [c["status"] for s in result["steps"][1:3] for c in s["calls"]] == ["refused", "done"]
        assert "Lines 5-6 of src/calc.py are not among those you read" in json.dumps(fake.requests[2]["messages"])


async def test_mcp_servers_through_the_editor_asked_once_remembered_and_their_state_in_status(fake, tmp_path):
    """#50 through margin-lsp: the server's first start asked in the editor ("Always (remembered)"),
    its tool's call asked, margin/status giving each server's state and the repository's own
    server files it ignored."""
    import sys
    from pathlib import Path

    root = workspace(tmp_path)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"repo-tool": {"command": "true"}}}))
    server = {"command": sys.executable, "args": [str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")]}
    fake.script(reply(action("fake__echo", text="from the editor")), reply(action("finish", answer="ok")))
    async with start(fake, tmp_path, root, MARGIN_MCP_SERVERS=json.dumps({"fake": server})) as client:
        editor = attach(client)
        before = await request(client, "margin/status", {})
        assert [(s["name"], s["state"]) for s in before["mcpServers"]] == [("fake", "needs approval")]
        assert before["mcpIgnored"] == [{"file": str(root / ".mcp.json"), "servers": ["repo-tool"]}]
        editor.answers = ["Always (remembered)", "Accept"]
        result, events = await agent(client, editor, "echo it")
        assert result["stopped"] == "finished"
        assert editor.asked[0].startswith("Start the MCP server 'fake' for the agent? It runs with your rights")
        assert editor.asked[1].startswith("Margin's agent asks to call the MCP tool 'echo' of the server 'fake'")
        assert [e["status"] for e in events if e["kind"] == "call"] == ["done"]
        (state,) = (await request(client, "margin/status", {}))["mcpServers"]
        assert state["state"] == "running" and state["tools"] == 6 and state["withheld"] == []
    assert "from the editor" in json.dumps(fake.requests[1]["messages"]).split("output of fake__echo")[1]
    assert json.loads((tmp_path / "mcp-approvals.json").read_text())["servers"]["fake"]["tools"]  # remembered


async def test_workspace_settings_naming_an_mcp_server_are_refused_told_and_never_run(fake, tmp_path):
    """The workspace route (workspace/didChangeConfiguration, as VS Code sends a folder's
    .vscode/settings.json): mcpServers is the user's alone — not taken, named, nothing runs."""
    from tests.conftest import until

    root = workspace(tmp_path)
    marker = tmp_path / "ran"
    fake.script(reply(action("finish", answer="ok")))
    async with start(fake, tmp_path, root) as client:
        editor = attach(client)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"margin": {
            "mcpServers": {"helper": {"command": "sh", "args": ["-c", f"touch {marker}"]}},
            "mcpAutoApproveReadOnly": True}}))
        await until(lambda: any("mcpServers" in m.message for m in client.messages))
        (told,) = [m.message for m in client.messages if "mcpServers" in m.message]
        assert "mcpAutoApproveReadOnly" in told and "workspace settings" in told
        assert (await request(client, "margin/status", {}))["mcpServers"] == []
        result, _ = await agent(client, editor, "anything")
        assert result["stopped"] == "finished" and editor.asked == []
    assert "helper" not in json.dumps(fake.requests[0]["messages"]) and not marker.exists()
