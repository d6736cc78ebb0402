"""Chat through the real margin-lsp process: streaming, progress, cancellation, the busy guard,
threads and history, explain, and a corrupt database."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from tests.conftest import until
from tests.e2e.lsp_client import cancellable, margin_client, open_doc, progress_token, request
from tests.fakes.fake_openai import reply, stream

WS = "file:///ws"



def env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
            "MARGIN_CHAT_TOKENIZER": "tiktoken:o200k_base", **extra}


def start(fake, tmp_path, **extra):
    return margin_client(env=env(fake, tmp_path, **extra), root=Path("/ws"),
                         capabilities=types.ClientCapabilities(
                             window=types.WindowClientCapabilities(work_done_progress=True)))


async def test_chat_streams_partial_results_with_cancellable_progress(fake, tmp_path):
    fake.script(reply("Streaming works fine.", chunk_size=4))
    async with start(fake, tmp_path) as client:
        result = await request(client, "margin/chat", {
            "message": "hi", "partialResultToken": "p1", "workDoneToken": progress_token(client, "w1")})
        await until(lambda: len(client.partials.get("p1", [])) == 6)
        assert client.partials["p1"] == ["Stre", "amin", "g wo", "rks ", "fine", "."]
        assert result["reply"] == "Streaming works fine." == "".join(client.partials["p1"])
        assert result["budget"]["tokenizer"] == {"name": "tiktoken:o200k_base", "exact": True}
        assert {s["name"] for s in result["budget"]["sections"]} >= {"system", "history", "message"}
        begin, *_, end = client.progress_reports["w1"]
        assert begin.kind == "begin" and begin.cancellable is True and end.kind == "end"


async def test_cancel_request_stops_the_model_call_and_leaves_the_thread(fake, tmp_path):
    fake.script(stream(["one ", "two ", "three ", "four"], chunk_delay_s=0.4))
    async with start(fake, tmp_path) as client:
        pending, cancel = cancellable(client, "margin/chat", {"message": "slow please"})
        await until(lambda: len(fake.requests) == 1)
        await asyncio.sleep(0.5)  # mid-stream
        cancel()
        with pytest.raises(JsonRpcException) as caught:
            await pending
        assert caught.value.code == -32800  # RequestCancelled
        history = await request(client, "margin/history", {})
        assert history["messages"] == []
        after = await request(client, "margin/chat", {"message": "next"})
        assert after["reply"] == "ok"


async def test_work_done_cancel_cancels_the_request(fake, tmp_path):
    fake.script(stream(["a ", "b ", "c ", "d"], chunk_delay_s=0.4))
    async with start(fake, tmp_path) as client:
        pending = asyncio.ensure_future(request(client, "margin/chat", {
            "message": "x", "workDoneToken": progress_token(client, "w9")}))
        await until(lambda: len(fake.requests) == 1)
        await asyncio.sleep(0.5)  # mid-stream
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token="w9"))
        with pytest.raises(JsonRpcException) as caught:
            await pending
        assert caught.value.code == -32800  # RequestCancelled
        assert (await request(client, "margin/history", {}))["messages"] == []


async def test_second_chat_on_a_busy_thread_fails_at_once(fake, tmp_path):
    fake.script(stream(["slow ", "answer"], chunk_delay_s=0.5))
    async with start(fake, tmp_path) as client:
        first = asyncio.ensure_future(request(client, "margin/chat", {"message": "one"}))
        await until(lambda: len(fake.requests) == 1)
        started = time.monotonic()
        with pytest.raises(JsonRpcException) as caught:
            await request(client, "margin/chat", {"message": "two"})
        assert time.monotonic() - started < 0.5  # at once, not after the first finishes
        assert caught.value.code == -32803 and "still answering" in caught.value.message
        assert (await first)["reply"] == "slow answer"


async def test_history_hides_file_contexts_and_threads_can_be_managed(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        open_doc(client, f"{WS}/a.py", "x = 1\n")
        first = await request(client, "margin/chat", {"message": "what is x?", "textDocument": {"uri": f"{WS}/a.py"}})
        history = await request(client, "margin/history", {"threadId": first["threadId"]})
        assert [(m["role"], m["content"]) for m in history["messages"]] == [("user", "what is x?"), ("assistant", "ok")]
        assert fake.requests[0]["messages"][-1]["content"].count("File a.py (python, sha256:") == 1

        fresh = await request(client, "margin/newThread", {"title": "second"})
        assert fresh["threadId"] != first["threadId"]
        assert (await request(client, "margin/history", {}))["threadId"] == fresh["threadId"]  # now canonical
        threads = await request(client, "margin/threads", {})
        assert {t["id"] for t in threads["threads"]} == {first["threadId"], fresh["threadId"]}
        assert threads["persistent"] is True
        assert (await request(client, "margin/deleteThread", {"threadId": first["threadId"]}))["deleted"] is True
        with pytest.raises(JsonRpcException, match="There is no thread"):
            await request(client, "margin/history", {"threadId": first["threadId"]})


async def test_explain_assembles_without_calling_the_model(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        open_doc(client, f"{WS}/a.py", "def f():\n    return 1\n")
        result = await request(client, "margin/explain", {"message": "explain f", "textDocument": {"uri": f"{WS}/a.py"}})
    assert fake.requests == []
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["system", "user"]  # the file context and the question, merged into one turn
    assert "File a.py (python, sha256:" in result["messages"][-1]["content"]
    assert result["budget"]["total"] <= result["budget"]["limit"]


async def test_bad_chat_params_name_the_field(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        with pytest.raises(JsonRpcInvalidParams, match="message"):
            await request(client, "margin/chat", {"text": "hi"})
        with pytest.raises(JsonRpcInvalidParams, match="selection.start.line"):
            await request(client, "margin/chat", {"message": "x", "selection": {"start": {"line": -1, "character": 0},
                                                                                 "end": {"line": 0, "character": 0}}})


async def test_corrupt_database_is_reported_and_chat_still_works(fake, tmp_path):
    (tmp_path / "threads.db").write_bytes(b"definitely not sqlite" * 100)
    async with start(fake, tmp_path) as client:
        result = await request(client, "margin/chat", {"message": "still there?"})
        assert result["reply"] == "ok"
        await until(lambda: any(m.type == types.MessageType.Warning for m in client.messages))
        warnings = [m for m in client.messages if m.type == types.MessageType.Warning]
        assert warnings and "not a valid SQLite database" in warnings[0].message
        assert (await request(client, "margin/threads", {}))["persistent"] is False


async def test_inactive_threads_expire(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        old = (await request(client, "margin/chat", {"message": "old"}))["threadId"]
        fresh = (await request(client, "margin/newThread", {}))["threadId"]
        await request(client, "margin/chat", {"message": "fresh", "threadId": fresh})
    with sqlite3.connect(tmp_path / "threads.db") as db:
        db.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (time.time() - 8 * 86400, old))
        db.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (time.time() - 6 * 86400, fresh))
    async with start(fake, tmp_path, MARGIN_THREAD_TTL_DAYS="7") as client:
        threads = await request(client, "margin/threads", {})
        assert [t["id"] for t in threads["threads"]] == [fresh]  # the older than 7 days gone, the other kept


async def test_show_requests_puts_the_exact_request_in_the_editors_log_only(fake, tmp_path):
    fake.script(reply("Shown."), reply("Not shown."))
    log_file = tmp_path / "margin.log"
    async with margin_client(env=env(fake, tmp_path, MARGIN_LOG_FILE=str(log_file)), root=Path("/ws"),
                             init_options={"showRequests": True}) as client:
        await request(client, "margin/chat", {"message": "the secret question"})
        shown = [m.message for m in client.log_messages if m.message.startswith("Margin request (chat")]
        client.protocol.notify(types.WORKSPACE_DID_CHANGE_CONFIGURATION, types.DidChangeConfigurationParams(
            settings={"margin": {"showRequests": False}}))
        await request(client, "margin/chat", {"message": "another question"})
        after = [m.message for m in client.log_messages if m.message.startswith("Margin request (chat")]
    (one,) = shown
    header, body = one.split("\n", 1)
    assert header == f"Margin request (chat profile): POST {fake.base_url}/chat/completions"
    assert json.loads(body) == fake.requests[0]
    assert after == shown  # turned off: the second request is not shown
    assert "the secret question" not in log_file.read_text()  # Margin's own log stays metadata only


async def test_a_file_or_selection_that_can_never_fit_is_never_counted(fake, tmp_path):
    """A 20 MB minified bundle open beside the chat, counted by llama.cpp's /tokenize: what cannot
    fit the window even at the longest token (core/tokens/counter.py, `fewest_tokens`) is never
    sent to be counted. The bundle as the open file is dropped and the chat answered; selected,
    it makes the turn over budget at once, with a message that says how large, and no model call."""
    bundle = "function(a,b){return a+b};" * 800_000
    uri = f"{WS}/app.min.js"
    counted: list[int] = []

    def tokenize(body: dict) -> dict:
        counted.append(len(body.get("content", "")))
        return {"tokens": list(range(len(body.get("content", "")) // 3 + 1))}
    fake.tokenize = tokenize
    fake.script(reply("It adds."))
    async with start(fake, tmp_path, MARGIN_CHAT_TOKENIZER="auto") as client:
        open_doc(client, uri, bundle, language="javascript")
        answered = await request(client, "margin/chat", {"message": "what is this", "textDocument": {"uri": uri},
                                                         "position": {"line": 0, "character": 10}})
        selected = await request(client, "margin/chat", {
            "message": "explain", "textDocument": {"uri": uri},
            "selection": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": len(bundle)}}})
    assert answered["reply"] == "It adds." and answered["budget"]["tokenizer"]["name"] == "llama.cpp"
    files = next(s for s in answered["budget"]["sections"] if s["name"] == "files")
    assert files["kept"] == 0 and files["dropped"], files
    assert counted and max(counted) < 100_000, counted  # the bundle never went to /tokenize
    assert selected["reply"] == "" and len(fake.requests) == 1  # no second model call
    assert selected["message"].startswith("Too large to send: your message and selection are 20,800,0")
    assert "at least 81,25" in selected["message"] and "context window is 8,192 tokens" in selected["message"]


async def test_ollama_is_budgeted_at_the_window_it_serves_not_the_models_documented_one(tmp_path):
    """Ollama's OpenAI API cuts a longer prompt silently: the chat is budgeted at the window
    Ollama runs the model with (here its smallest default, 4096, the model not loaded), even over
    a larger contextWindow the user set, and a file larger than that is dropped, not cut."""
    from tests.fakes.fake_ollama import FakeOllama

    big = "".join(f"def helper_{i}(value):\n    return value + {i}\n\n" for i in range(600))  # ~12k tokens
    with FakeOllama(["qwen2.5-coder:1.5b"]) as ollama:
        ollama.script(reply("Small enough."))
        env = {"MARGIN_DEFAULTS_BASE_URL": ollama.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
               "MARGIN_DEFAULTS_MODEL": "qwen2.5-coder:1.5b", "MARGIN_CHAT_CONTEXT_WINDOW": "32000",
               "MARGIN_CHAT_TOKENIZER": "heuristic"}
        async with margin_client(env=env, root=Path("/ws")) as client:
            open_doc(client, f"{WS}/helpers.py", big)
            answered = await request(client, "margin/chat", {"message": "what is here?",
                                                             "textDocument": {"uri": f"{WS}/helpers.py"}})
            chat = (await request(client, "margin/status", {}))["profiles"]["chat"]
    assert answered["reply"] == "Small enough." and answered["budget"]["contextWindow"] == 4096
    assert chat["contextWindow"] == 4096 and "it cuts a longer prompt silently" in chat["contextWindowSource"], chat
    files = next(s for s in answered["budget"]["sections"] if s["name"] == "files")
    assert files["kept"] == 0 and files["dropped"]
    sent = json.dumps(ollama.requests[-1]["messages"])
    assert "helper_599" not in sent and len(sent) < 4096 * 4
