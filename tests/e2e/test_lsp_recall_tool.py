"""The recall tool through the real margin-lsp process, against the scripted backend: offered
exactly when a pointer is shown and the backend takes tools, every call answered with the exact
stored content and its fingerprint (or why not), budgeted, bounded per turn, refused tools
remembered, and the turn stored as a plain exchange."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request
from tests.fakes.fake_openai import FakeBackend, reply, status, tool_calls

WS = "file:///ws"
A = f"{WS}/pkg/parser.py"
NOTES = "".join(f"# parse, note {i}: the words of a line, in order, for the tokenizer\n" for i in range(20))
"""a file large enough that a pointer to its old snapshot pays for the legend and the tool"""
OLD = NOTES + "def parse(text):\n    return text.split()\n"
NEW = NOTES + "def parse(text, sep=None):\n    return text.split(sep)\n"


def start(fake, tmp_path, **extra):
    env = {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "threads.db"),
           "MARGIN_CHAT_TOKENIZER": "tiktoken:o200k_base", **extra}
    return margin_client(env=env, root=Path("/ws"))


def recall(pointer: str) -> tuple[str, str]:
    return "recall", json.dumps({"pointer": pointer})


async def two_versions(client, fake) -> None:
    """Turn 1 sees parser.py; the file changes; from turn 2 on, turn 1's snapshot is [t1 parser.py]."""
    open_doc(client, A, OLD)
    fake.script(reply("It splits."))
    await request(client, "margin/chat", {"message": "what does parse do?", "textDocument": {"uri": A}})
    change_doc(client, A, 2, (None, NEW))


def tool_message(body: dict) -> dict:
    return next(m for m in body["messages"] if m["role"] == "tool")


async def test_a_recall_call_gets_the_exact_old_snapshot_with_its_fingerprint(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        await two_versions(client, fake)
        explained = await request(client, "margin/explain", {"message": "what changed?", "textDocument": {"uri": A}})
        assert explained["tools"] == ["recall"]
        pointers = next(s for s in explained["budget"]["sections"] if s["name"] == "pointers")
        assert pointers["kept"] == 3 and pointers["tokens"] > 0  # the legend, the recall tool, [t1 parser.py]
        assert "call the `recall` tool" in explained["messages"][0]["content"]

        fake.script(tool_calls(recall("[t1 parser.py]"), content="Let me look. "), reply("It gained `sep`."))
        result = await request(client, "margin/chat", {"message": "what changed?", "textDocument": {"uri": A}})

        first, second = fake.requests[-2:]
        assert first["tools"][0]["function"]["name"] == "recall" and first["tool_choice"] == "auto"
        assert "[t1 parser.py]" in json.dumps(first["messages"]) and OLD not in json.dumps(first["messages"])
        answer = tool_message(second)
        assert answer["tool_call_id"] == "call_0"
        head, content = answer["content"].split("\n\n", 1)
        old_sha = "sha256:" + hashlib.sha256(OLD.encode()).hexdigest()
        assert old_sha in head and "changed since" in head
        # The snapshot exactly as turn 1 showed it: its file block, with the question after it.
        (shown_then,) = [m["content"] for m in fake.requests[0]["messages"] if OLD in m["content"]]
        assert shown_then == content + "\n\nwhat does parse do?" and content.endswith(OLD + "```")
        called = second["messages"][-2]
        assert called["role"] == "assistant" and called["tool_calls"][0]["function"]["name"] == "recall"
        assert second["messages"][:len(first["messages"])] == first["messages"]  # the prompt's start is kept

        assert result["reply"] == "Let me look. It gained `sep`."
        assert result["recalls"] == [{"pointer": "[t1 parser.py]", "status": "changed since",
                                      "tokens": result["recalls"][0]["tokens"], "fingerprint": old_sha}]
        section = next(s for s in result["budget"]["sections"] if s["name"] == "recalls")
        assert section["kept"] == 1 and section["tokens"] == result["recalls"][0]["tokens"] > 0
        assert result["budget"]["counted"] <= result["budget"]["limit"]

        history = await request(client, "margin/history", {})
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"] * 2  # stored as plain turns
        assert history["messages"][-1]["content"] == "Let me look. It gained `sep`."


async def test_calls_are_bounded_per_turn_and_the_last_request_must_answer(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        await two_versions(client, fake)
        fake.script(tool_calls(recall("[t1 parser.py]"), recall("[t9 parser.py]")),
                    tool_calls(recall("t1 parser.py"), recall("[t1 parser.py]")),
                    reply("Done."))
        result = await request(client, "margin/chat", {"message": "look back", "textDocument": {"uri": A}})
        assert [r["status"] for r in result["recalls"]] == ["changed since", "not found", "changed since",
                                                            "over the limit"]
        last = fake.requests[-1]
        assert last["tool_choice"] == "none" and len(fake.requests) == 1 + 3  # turn 1, then three requests
        assert result["reply"] == "Done."


async def test_an_answer_that_does_not_fit_says_so_instead_of_overflowing(tmp_path):
    big = "".join(f"value_{i} = compute({i})  # a long line of code to fill the window\n" for i in range(200))
    with FakeBackend(props={"default_generation_settings": {"n_ctx": 6000}}) as fake:
        async with start(fake, tmp_path, MARGIN_CHAT_MAX_OUTPUT_TOKENS="512") as client:
            open_doc(client, A, big)
            fake.script(reply("Big."))
            await request(client, "margin/chat", {"message": "read it", "textDocument": {"uri": A}})
            change_doc(client, A, 2, (None, big.replace("value_1 ", "renamed ")))
            fake.script(tool_calls(recall("[t1 parser.py]")), reply("Without it, then."))
            result = await request(client, "margin/chat", {"message": "compare", "textDocument": {"uri": A}})
            assert result["recalls"][0]["status"] == "over budget"
            text = tool_message(fake.requests[-1])["content"]
            assert "only" in text and "tokens" in text and "value_199" not in text
            assert result["budget"]["counted"] <= result["budget"]["limit"]
            assert result["reply"] == "Without it, then."


async def test_without_a_pointer_no_tool_is_offered(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        open_doc(client, A, OLD)
        fake.script(reply("One."), reply("Two."))
        await request(client, "margin/chat", {"message": "a", "textDocument": {"uri": A}})
        await request(client, "margin/chat", {"message": "b", "textDocument": {"uri": A}})
        assert all("tools" not in body for body in fake.requests)


async def test_a_backend_that_says_it_takes_no_tools_is_not_offered_them(tmp_path):
    props = {"default_generation_settings": {"n_ctx": 8192}, "chat_template_caps": {"supports_tools": False}}
    with FakeBackend(props=props) as fake:
        async with start(fake, tmp_path) as client:
            await two_versions(client, fake)
            explained = await request(client, "margin/explain", {"message": "x", "textDocument": {"uri": A}})
            assert "tools" not in explained
            assert "Margin: Recall" in explained["messages"][0]["content"]  # ask the user instead
            await request(client, "margin/chat", {"message": "what changed?", "textDocument": {"uri": A}})
            assert "tools" not in fake.requests[-1]


async def test_a_refusal_of_tools_is_remembered_and_the_turn_sent_without_them(fake, tmp_path):
    refusal = {"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice and '
                                    "--tool-call-parser to be set", "type": "BadRequestError", "code": 400}}
    async with start(fake, tmp_path) as client:
        await two_versions(client, fake)
        fake.script(status(400, refusal), reply("Plain answer."), reply("Again."))
        result = await request(client, "margin/chat", {"message": "what changed?", "textDocument": {"uri": A}})
        assert result["reply"] == "Plain answer."
        refused, resent = fake.requests[-2:]
        assert "tools" in refused and "tools" not in resent
        assert "Margin: Recall" in resent["messages"][0]["content"]
        await request(client, "margin/chat", {"message": "and now?", "textDocument": {"uri": A}})
        assert "tools" not in fake.requests[-1]  # not offered again


async def test_edit_ops_in_the_thread_offer_the_same_tools_not_to_be_called_so_prompts_start_the_same(fake, tmp_path):
    """Chat and edit-ops share the thread's system prompt, legend and tools (edit-ops with
    `tool_choice: none`), so an edit-ops prompt starts with the chat prompt before it and the
    backend's prompt cache holds across them; what edit-ops need goes after the request."""
    async with start(fake, tmp_path) as client:
        await two_versions(client, fake)
        fake.script(reply("It gained `sep`."))
        await request(client, "margin/chat", {"message": "what changed?", "textDocument": {"uri": A}})
        chat = fake.requests[-1]
        fake.script(reply(json.dumps({"assistant_message": "Done.", "ops": [
            {"op": "replace", "target_file": "pkg/parser.py", "target": "match", "match": "    return text.split(sep)\n",
             "content": "    return text.split(sep or None)\n"}]})))
        result = await request(client, "margin/editOps", {"message": "default sep", "textDocument": {"uri": A}})
        assert result["ops"], result
        ops = fake.requests[-1]
        assert chat["tools"] == ops["tools"] and chat["tool_choice"] == "auto" and ops["tool_choice"] == "none"
        assert ops["response_format"]["type"] == "json_schema"
        assert ops["messages"][:len(chat["messages"])] == chat["messages"]
        assert ops["messages"][-1]["content"].startswith("default sep\n\n")
        assert "assistant_message" in ops["messages"][-1]["content"]


async def test_edit_ops_that_a_backend_refuses_for_their_tools_are_sent_again_without_them(fake, tmp_path):
    refusal = {"error": {"message": "tools are not supported with response_format", "type": "BadRequestError",
                         "code": 400}}
    answer = json.dumps({"assistant_message": "Nothing to do.", "ops": []})
    async with start(fake, tmp_path) as client:
        await two_versions(client, fake)
        fake.script(status(400, refusal), reply(answer), reply(answer))
        result = await request(client, "margin/editOps", {"message": "tidy", "textDocument": {"uri": A}})
        assert result["assistantMessage"] == "Nothing to do.", result
        refused, resent = fake.requests[-2:]
        assert "tools" in refused and "tools" not in resent
        assert "Margin: Recall" in resent["messages"][0]["content"]
        await request(client, "margin/editOps", {"message": "tidy again", "textDocument": {"uri": A}})
        assert "tools" not in fake.requests[-1]  # not offered again
