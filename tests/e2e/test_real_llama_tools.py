"""The recall tool against the real llama.cpp server. The test model's own chat template takes no
tools: the server says so, and Margin tells the model to ask the user instead. Run with a chat
template that takes tools (tests/fixtures/data/chatml_tools.jinja), the server says so, accepts
Margin's requests with the tool, a call and its answer, counts them exactly as Margin does, and
the model's answer — Gemma 3 270M answers in prose rather than calling tools — is handled."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from margin.adapters.llama_tokens import LlamaCppCounter
from margin.adapters.openai_http import OpenAICompatibleProvider
from margin.core.llm import ChatMessage, ChatRequest, ToolCall
from margin.core.recall_tool import TOOLS
from tests.conftest import REPO, running_llama_server
from tests.e2e.lsp_client import change_doc, margin_client, open_doc, request

pytestmark = pytest.mark.llama

TEMPLATE = REPO / "tests" / "fixtures" / "data" / "chatml_tools.jinja"
A = "file:///ws/parser.py"
NOTES = "".join(f"# parse, note {i}: the words of a line, in order, for the tokenizer\n" for i in range(20))
"""a file large enough that a pointer to its old snapshot pays for the legend and the tool"""
OLD = NOTES + "def parse(text):\n    return text.split()\n"
NEW = NOTES + "def parse(text, sep=None):\n    return text.split(sep)\n"


@pytest.fixture(scope="module")
def tools_server(tmp_path_factory):
    with running_llama_server(tmp_path_factory.mktemp("llama-tools") / "llama-server.log",
                              ["--jinja", "--chat-template-file", str(TEMPLATE)]) as server:
        yield server


def env(server, tmp_path):
    return {"MARGIN_DEFAULTS_BASE_URL": server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
            "MARGIN_CHAT_MAX_OUTPUT_TOKENS": "32", "MARGIN_CHAT_TEMPERATURE": "0"}


async def two_versions(client) -> dict:
    """Turn 1 sees parser.py; the file changes, so turn 1's snapshot becomes [t1 parser.py]."""
    open_doc(client, A, OLD)
    first = await request(client, "margin/chat", {"message": "In a few words: what does parse do?",
                                                  "textDocument": {"uri": A}})
    change_doc(client, A, 2, (None, NEW))
    return first


async def test_the_test_models_own_template_takes_no_tools_so_the_user_is_asked(llama_server, tmp_path):
    provider = OpenAICompatibleProvider(llama_server.base_url, timeout_s=60)
    try:
        assert (await provider.probe()).tools is False  # chat_template_caps.supports_tools
    finally:
        await provider.aclose()
    async with margin_client(env=env(llama_server, tmp_path), root=Path("/ws")) as client:
        await two_versions(client)
        explained = await request(client, "margin/explain", {"message": "what changed?", "textDocument": {"uri": A}})
        assert "tools" not in explained and "[t1 parser.py]" in json.dumps(explained["messages"])
        assert "Margin: Recall" in explained["messages"][0]["content"]
        recalled = await request(client, "margin/recall", {"pointer": "[t1 parser.py]"})
        assert OLD in recalled["content"] and recalled["changedSince"] is True


async def test_a_tool_call_and_its_answer_are_accepted_and_counted_exactly(tools_server):
    provider = OpenAICompatibleProvider(tools_server.base_url, timeout_s=120)
    counter = LlamaCppCounter(tools_server.base_url, timeout_s=120)
    try:
        assert (await provider.probe()).tools is True
        call = ToolCall("call_0", "recall", json.dumps({"pointer": "[t1 parser.py]"}))
        messages = [ChatMessage("system", "You are terse."), ChatMessage("user", "What did [t1 parser.py] say?"),
                    ChatMessage("assistant", "", (call,)),
                    ChatMessage("tool", f"[t1 parser.py]: exactly as shown in turn 1.\n\n{OLD}", tool_call_id="call_0")]
        for shown in (messages[:2], messages):
            reply = await provider.complete(ChatRequest(shown, 4, 0.0, tools=TOOLS, tool_choice="auto"))
            assert reply.usage.prompt_tokens == await counter.count_chat(shown, TOOLS)
        without = await counter.count_chat(messages[:2])
        assert await counter.count_chat(messages[:2], TOOLS) > without  # the tool's definition is in the prompt
    finally:
        await provider.aclose()
        await counter.aclose()


@pytest.mark.timeout(600)
async def test_chat_offers_the_tool_and_handles_the_models_answer(tools_server, tmp_path):
    async with margin_client(env=env(tools_server, tmp_path), root=Path("/ws")) as client:
        await two_versions(client)
        explained = await request(client, "margin/explain", {"message": "What changed in parse?",
                                                             "textDocument": {"uri": A}})
        assert explained["tools"] == ["recall"] and "`recall` tool" in explained["messages"][0]["content"]
        result = await request(client, "margin/chat", {"message": "What changed in parse? Recall [t1 parser.py].",
                                                       "textDocument": {"uri": A}})
        assert "message" not in result, result.get("message")
        budget = result["budget"]
        assert budget["counted"] == result["usage"]["promptTokens"] <= budget["limit"]  # the last request, exactly
        made = result.get("recalls", [])
        old_sha = "sha256:" + hashlib.sha256(OLD.encode()).hexdigest()
        assert all(r["status"] != "changed since" or r["fingerprint"] == old_sha for r in made)
        history = await request(client, "margin/history", {})
        assert history["messages"][-1] == {**history["messages"][-1], "role": "assistant", "content": result["reply"]}
        print(f"\nthe model answered with {len(made)} recall call(s): {[r['status'] for r in made]}")
