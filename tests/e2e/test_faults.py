"""Faults, through the real margin-lsp process: a backend that refuses, stalls, answers 4xx/5xx,
cuts its stream, sends garbage or more than maxOutputTokens; a thread database that is locked,
read-only, full, or whose writer is killed mid-write; 50 requests at once on one connection.
For each: a message a person can act on, nothing lost, nothing half-applied, and the next
request works. (docs/reliability.md's faults table points here and at the other tests it names.)"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sqlite3
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from margin.core.threads import FILE_CONTEXT
from margin.core.tokens.local import tiktoken_counter
from tests import log_secrets
from tests.conftest import clean_env, free_port, until
from tests.e2e.lsp_client import margin_client, open_doc, request, status
from tests.e2e.raw_lsp import RawClient
from tests.fakes.fake_openai import FakeBackend, hang, raw, reply, sse_lines, stream
from tests.fakes.fake_openai import status as http_status

WS = Path("/ws")
URI = "file:///ws/app.py"
FAULTY_SQLITE = (str(Path(__file__).with_name("sqlite_faults.py")),)
REQUEST_FAILED = -32803


def env(fake, tmp_path, **extra):
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **extra}


async def history(client) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in (await request(client, "margin/history", {}))["messages"]]


def stored_turns(path: Path) -> list[tuple[str, str]]:
    """(role, content) of every visible message in the database file, in order."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT role, content FROM messages WHERE hidden = 0 ORDER BY id").fetchall()


# --- the backend -----------------------------------------------------------------------------

BACKEND_FAULTS = [
    pytest.param(http_status(401, {"error": {"message": "invalid api key"}}), "HTTP 401: invalid api key. Check the API key",
                 id="401"),
    pytest.param(http_status(429, {"error": {"message": "slow down"}}), "HTTP 429", id="429"),
    pytest.param(http_status(500, {"error": {"message": "out of memory"}}), "HTTP 500: out of memory", id="500"),
    pytest.param(http_status(503, "overloaded"), "HTTP 503: overloaded. The backend failed", id="503"),
    pytest.param(stream(["Half of ", "the answer ", "never comes"], cut_after=2),
                 "cut the connection in the middle of the reply", id="stream-cut"),
    pytest.param(sse_lines(['{"choices": [{"delta": {"content": "fine']), "not JSON", id="garbage-event"),
    pytest.param(raw("<html><body>Sign in to continue</body></html>", content_type="text/html"),
                 "sent a reply with no event stream in it (text/html), not an OpenAI-compatible", id="html-page"),
    pytest.param(hang(60), "did not answer within 1 s (timeoutS)", id="slow-past-timeoutS"),
    pytest.param(stream(["The start, ", "then nothing"], chunk_delay_s=60), "stopped sending for 1 s (timeoutS)",
                 id="stalled-past-timeoutS"),
]


@pytest.mark.parametrize("step, says", BACKEND_FAULTS)
async def test_a_backend_fault_is_a_message_and_the_thread_stays_as_it_was(fake, tmp_path, step, says):
    fake.script(reply("The first answer, stored."), step)
    async with margin_client(env=env(fake, tmp_path, MARGIN_CHAT_TIMEOUT_S="1"), root=WS) as client:
        open_doc(client, URI, "def total(lines):\n    return sum(lines)  # 🧾\n")
        await request(client, "margin/chat", {"message": "What does total do here?", "textDocument": {"uri": URI}})
        before = await history(client)
        with pytest.raises(JsonRpcException) as failed:
            await request(client, "margin/chat", {"message": "And this question meets the fault?",
                                                  "textDocument": {"uri": URI}})
        assert failed.value.code == REQUEST_FAILED and says in failed.value.message
        assert fake.base_url in failed.value.message  # which backend
        assert await history(client) == before
        after = await request(client, "margin/chat", {"message": "The next question works", "textDocument": {"uri": URI}})
        assert after["reply"] == "ok"
    assert [c for r, c in stored_turns(tmp_path / "threads.db") if r == "user"] == [
        "What does total do here?", "The next question works"]


@pytest.mark.parametrize("step, says", [
    pytest.param(http_status(503, "overloaded"), "HTTP 503: overloaded. The backend failed", id="503"),
    pytest.param(raw("<html>502 Bad Gateway</html>", content_type="text/html"), "not an OpenAI-compatible",
                 id="garbage-body"),
    pytest.param(hang(60), "did not answer within 1 s (timeoutS)", id="slow-past-timeoutS"),
])
async def test_a_backend_fault_in_edit_ops_is_a_message_and_applies_nothing(fake, tmp_path, step, says):
    fake.script(step)
    async with margin_client(env=env(fake, tmp_path, MARGIN_CHAT_OPS_TIMEOUT_S="1"), root=WS) as client:
        open_doc(client, URI, "def total(lines):\n    return sum(lines)\n")
        ask = {"message": "Rename total to grand_total please", "textDocument": {"uri": URI}}
        failed = await request(client, "margin/editOps", ask)
        assert failed["ops"] == [] and "edit" not in failed, failed
        assert says in failed["assistantMessage"], failed["assistantMessage"]
        assert client.applied_edits == [] and await history(client) == []
        after = await request(client, "margin/editOps", ask)
        assert after["enabled"] is True and "did not answer with valid JSON" in after["assistantMessage"]


async def test_a_backend_that_refuses_connections_is_named_and_the_next_request_works(tmp_path):
    port = free_port()
    dead = f"http://127.0.0.1:{port}/v1"  # nothing listens there, yet
    settings = {"defaults": {"baseUrl": dead, "tokenizer": "tiktoken:o200k_base"}}
    async with margin_client(env={"MARGIN_DATABASE": str(tmp_path / "threads.db")}, root=WS,
                             init_options=settings) as client:
        with pytest.raises(JsonRpcException) as failed:
            await request(client, "margin/chat", {"message": "Is anybody out there?"})
        assert failed.value.code == REQUEST_FAILED
        assert f"Nothing answers at {dead}" in failed.value.message, failed.value.message
        assert await history(client) == []
        with FakeBackend(port=port):  # the model server is started
            after = await request(client, "margin/chat", {"message": "Is anybody out there now?"})
        assert after["reply"] == "ok"


async def test_a_reply_longer_than_max_output_tokens_is_counted_and_kept_within_the_budget(fake, tmp_path):
    """A backend that ignores max_tokens: the reply is kept whole and counted exactly, and the
    next prompts still fit the window (the long turn is dropped or shown as a pointer)."""
    encoding = tiktoken_counter("o200k_base")
    long_reply = "".join(f"Paragraph {i}: the backend ignored max_tokens and kept going.\n" for i in range(600))
    assert encoding.count(long_reply) > 6000  # 60 times maxOutputTokens, most of the window
    fake.script(reply("A short first answer."), reply(long_reply, chunk_size=500))
    small = env(fake, tmp_path, MARGIN_CHAT_CONTEXT_WINDOW="4096", MARGIN_CHAT_MAX_OUTPUT_TOKENS="100")
    async with margin_client(env=small, root=WS) as client:
        await request(client, "margin/chat", {"message": "Say something short first."})
        answer = await request(client, "margin/chat", {"message": "Now answer at length, please."})
        assert answer["reply"] == long_reply
        for question in ("What came before this question?", "And now what is in the window?"):
            after = await request(client, "margin/chat", {"message": question})
            budget = after["budget"]
            assert after["reply"] == "ok" and budget["counted"] <= budget["limit"] < 4096 - 100
        assert [c for r, c in await history(client) if r == "assistant"][1] == long_reply
    with sqlite3.connect(tmp_path / "threads.db") as db:
        (stored,) = db.execute("SELECT tokens FROM messages WHERE content = ?", (long_reply,)).fetchall()
    assert list(json.loads(stored[0]).values()) == [encoding.count(long_reply)]


# --- the thread database ---------------------------------------------------------------------

async def seed_database(fake, tmp_path) -> None:
    """A database with one stored turn, written by a normal server."""
    fake.script(reply("An answer from before the fault."))
    async with margin_client(env=env(fake, tmp_path), root=WS) as client:
        await request(client, "margin/chat", {"message": "A question from before the fault"})


async def chat_through_a_database_fault(client, db: Path, says: str) -> None:
    """The turn during the fault is answered and kept for the session with the history before
    it; the user is told once, naming the file and the fix; the file is left as it was."""
    before = stored_turns(db)
    answer = await request(client, "margin/chat", {"message": "A question while the database fails"})
    assert answer["reply"] == "ok"
    await until(lambda: any(m.type == types.MessageType.Warning for m in client.messages))
    (warning,) = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert str(db) in warning and says in warning and "To fix:" in warning
    assert "kept only until Margin stops" in warning
    again = await request(client, "margin/chat", {"message": "And one more question after it"})
    assert again["reply"] == "ok"
    assert [c for r, c in await history(client) if r == "user"] == [
        "A question from before the fault", "A question while the database fails", "And one more question after it"]
    assert (await request(client, "margin/threads", {}))["persistent"] is False
    assert stored_turns(db) == before
    with sqlite3.connect(db) as check:
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_a_locked_database_keeps_the_session_going_in_memory(fake, tmp_path):
    await seed_database(fake, tmp_path)
    db = tmp_path / "threads.db"
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock past busy_timeout
    try:
        async with margin_client(env=env(fake, tmp_path), root=WS) as client:
            await chat_through_a_database_fault(client, db, "it is locked by another process")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_a_read_only_database_keeps_the_session_going_in_memory(fake, tmp_path):
    await seed_database(fake, tmp_path)
    async with margin_client(env=env(fake, tmp_path, TEST_SQLITE_PRAGMAS="query_only = 1"), root=WS,
                             command=FAULTY_SQLITE) as client:
        await chat_through_a_database_fault(client, tmp_path / "threads.db", "it cannot be written")


async def test_a_full_database_keeps_the_session_going_in_memory(fake, tmp_path):
    """Full mid-session: the failed write is rolled back by SQLite itself, and the message says
    the disk is full (it once said `cannot rollback - no transaction is active`, and the turn was
    lost with an internal error)."""
    await seed_database(fake, tmp_path)
    db = tmp_path / "threads.db"
    with sqlite3.connect(db) as check:
        check.execute("VACUUM")  # no free pages (a table the migrations dropped left some): two are left
        pages = check.execute("PRAGMA page_count").fetchone()[0]
    async with margin_client(env=env(fake, tmp_path, TEST_SQLITE_PRAGMAS=f"max_page_count = {pages + 2}"),
                             root=WS, command=FAULTY_SQLITE) as client:
        open_doc(client, URI, "".join(f"# note {i}: the quick brown fox jumps over the lazy dog\n"
                                      for i in range(350)))  # 19 KB: more pages than are left
        with_file = await request(client, "margin/explain", {"message": "x", "textDocument": {"uri": URI}})
        assert any("note 349:" in m["content"] for m in with_file["messages"])
        before = stored_turns(db)
        answer = await request(client, "margin/chat", {"message": "A question while the database fails",
                                                       "textDocument": {"uri": URI}})
        assert answer["reply"] == "ok"
        await until(lambda: any(m.type == types.MessageType.Warning for m in client.messages))
        (warning,) = [m.message for m in client.messages if m.type == types.MessageType.Warning]
        assert str(db) in warning and "the disk it is on is full" in warning and "free some space" in warning
        again = await request(client, "margin/chat", {"message": "And one more question after it"})
        assert again["reply"] == "ok"
        assert [c for r, c in await history(client) if r == "user"] == [
            "A question from before the fault", "A question while the database fails", "And one more question after it"]
    assert stored_turns(db) == before
    with sqlite3.connect(db) as check:
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def check_whole_turns(db: Path) -> int:
    """Every stored turn is whole: file contexts, then the user's message, then the reply, each
    with its token count; no user message without its reply. Returns how many turns."""
    with sqlite3.connect(db) as check:
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert check.execute("PRAGMA foreign_key_check").fetchall() == []
        turns = 0
        for (thread,) in check.execute("SELECT id FROM threads"):
            rows = check.execute(
                "SELECT role, hidden, kind, (SELECT count(*) FROM json_each(tokens)) "
                "FROM messages WHERE thread_id = ? ORDER BY id", (thread,)).fetchall()
            shape = "".join(("c" if kind == FILE_CONTEXT else "s") if hidden else role[0]
                            for role, hidden, kind, _ in rows).replace("s", "")  # summaries go anywhere
            assert re.fullmatch("(c*ua)*", shape), shape  # contexts, question, reply: whole turns
            assert all(counted == 1 for role, hidden, _, counted in rows if not hidden), rows
            turns += shape.count("ua")
    return turns


async def test_a_server_killed_mid_write_leaves_whole_turns_only(fake, tmp_path):
    """A real margin-lsp chatting as fast as it can (each turn stores a changed 7 KB file, the
    message and the reply in one transaction), killed with SIGKILL at random moments, six times
    over one database; then opened again."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    db = tmp_path / "threads.db"
    fake.default = reply("Noted; a reply that is stored with its turn.")
    answered: list[str] = []
    for round_ in range(6):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "margin.lsp.main", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=clean_env(**env(fake, tmp_path)))
        stderr = log_secrets.collect(process.stderr, f"the stderr of margin-lsp {process.pid}")
        client = RawClient(process)
        await client.request("initialize", {"processId": None, "rootUri": WS.as_uri(), "capabilities": {}})
        client.notify("initialized", {})
        text = "".join(f"value_{i} = {i}  # round {round_}\n" for i in range(300))
        client.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1,
                                                                "text": text}})

        async def chat_forever() -> None:
            for turn in range(1, 10_000):
                client.notify("textDocument/didChange", {
                    "textDocument": {"uri": URI, "version": turn + 1},
                    "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                                  "end": {"line": 0, "character": 0}}, "text": f"# turn {turn}\n"}]})
                message = f"Question {turn} of round {round_}, about the file"
                await client.request("margin/chat", {"message": message, "textDocument": {"uri": URI}})
                answered.append(message)

        chatting = asyncio.ensure_future(chat_forever())
        done = len(answered)
        await until(lambda: len(answered) > done or chatting.done(), timeout=60)  # turns are being stored
        await asyncio.sleep(rng.uniform(0, 0.5))
        process.kill()
        await process.wait()
        chatting.cancel()
        client._reader.cancel()
        await log_secrets.drain(stderr)
        assert process.returncode == -9
    turns = check_whole_turns(db)
    users = [c for r, c in stored_turns(db) if r == "user"]
    assert set(answered) <= set(users), f"seed {seed}"  # every answered turn was stored
    assert turns == len(users) >= len(answered) > 0
    async with margin_client(env=env(fake, tmp_path), root=WS) as client:
        seen = await history(client)
        assert [c for r, c in seen if r == "user"] == users
        assert (await request(client, "margin/chat", {"message": "Still here after all that?"}))["reply"] != ""
    assert check_whole_turns(db) == turns + 1


# --- the editor ------------------------------------------------------------------------------

async def test_fifty_requests_at_once_are_all_answered(fake, tmp_path):
    """50 requests sent together on one connection: chats on one thread (one answers, the rest
    are told at once it is busy), chats and edit-ops on their own threads (all answered),
    explain, history and status; then margin/status still answers and nothing runs on."""
    fake.default = reply("A slow and steady answer.", chunk_size=3, chunk_delay_s=0.1)
    async with margin_client(env=env(fake, tmp_path), root=WS) as client:
        open_doc(client, URI, "def total(lines):\n    return sum(lines)\n")
        threads = [(await request(client, "margin/newThread", {"title": f"t{i}"}))["threadId"] for i in range(25)]
        await request(client, "margin/newThread", {})  # the canonical thread: the busy one
        where = {"textDocument": {"uri": URI}}
        calls = (
            [("margin/chat", {"message": f"Same thread question {i}", **where}) for i in range(10)]
            + [("margin/chat", {"message": f"Own thread question {i}", "threadId": t, **where})
               for i, t in enumerate(threads[:20])]
            + [("margin/editOps", {"message": f"Own thread edit {i}", "threadId": t, **where})
               for i, t in enumerate(threads[20:])]
            + [("margin/explain", {"message": f"Explain question {i}", **where}) for i in range(5)]
            + [("margin/history", {"threadId": threads[i]}) for i in range(5)]
            + [("margin/status", {}) for _ in range(5)]
        )
        assert len(calls) == 50
        results = await asyncio.gather(*(request(client, m, p) for m, p in calls), return_exceptions=True)
        same, own, edits = results[:10], results[10:30], results[30:35]
        busy = [r for r in same if isinstance(r, JsonRpcException)]
        assert len(busy) == 9 and all(e.code == REQUEST_FAILED and "still answering" in e.message for e in busy)
        assert [r["reply"] for r in same if not isinstance(r, Exception)] == ["A slow and steady answer."]
        assert all(not isinstance(r, Exception) and r["reply"] == "A slow and steady answer." for r in own), own
        assert all(not isinstance(r, Exception) and r["enabled"] and r["ops"] == [] for r in edits), edits
        assert not any(isinstance(r, Exception) for r in results[35:]), results[35:]
        await until_idle(client)
        for i, thread in enumerate(threads[:20]):
            got = await request(client, "margin/history", {"threadId": thread})
            assert [m["content"] for m in got["messages"]] == [f"Own thread question {i}", "A slow and steady answer."]


async def until_idle(client) -> None:
    while (await status(client))["background"]:
        await asyncio.sleep(0.05)
