"""Against the real llama.cpp server (Gemma 3 270M, 4096-token context) on loopback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from margin.adapters.openai_http import OpenAICompatibleProvider
from margin.core.llm import ChatMessage, ChatRequest, ContextTooLarge
from tests.conftest import LLAMA_CONTEXT, clean_env
from tests.e2e.lsp_client import margin_client, status

pytestmark = pytest.mark.llama

HELLO = ChatRequest(
    messages=[ChatMessage("system", "You are terse."), ChatMessage("user", "Name one colour.")],
    max_tokens=12,
    temperature=0.0,
)


@pytest.fixture
async def provider(llama_server):
    p = OpenAICompatibleProvider(llama_server.base_url, timeout_s=60)
    yield p
    await p.aclose()


async def test_streamed_chat_completion(provider):
    deltas = [d async for d in provider.stream(HELLO)]
    text = "".join(d.text for d in deltas)
    assert text.strip(), "the model streamed no text"
    assert len([d for d in deltas if d.text]) >= 2, "the reply did not arrive in pieces"
    finishes = [d.finish_reason for d in deltas if d.finish_reason]
    assert finishes and finishes[-1] in ("stop", "length")
    usage = next(d.usage for d in reversed(deltas) if d.usage)
    assert usage.prompt_tokens and usage.prompt_tokens > 5
    assert 0 < usage.completion_tokens <= HELLO.max_tokens


async def test_non_streamed_chat_completion(provider):
    reply = await provider.complete(HELLO)
    assert reply.content.strip() and reply.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens and reply.usage.prompt_tokens > 5


async def test_probe_detects_llama_cpp_and_its_context_window(provider):
    info = await provider.probe()
    assert info.reachable and info.kind == "llama.cpp"
    assert info.context_window == LLAMA_CONTEXT


async def test_real_context_overflow_is_a_typed_error_with_sizes(provider):
    huge = ChatRequest([ChatMessage("user", "word " * 6000)], max_tokens=8, temperature=0)
    with pytest.raises(ContextTooLarge) as caught:
        await provider.complete(huge)
    assert caught.value.context_window == LLAMA_CONTEXT
    assert caught.value.prompt_tokens > LLAMA_CONTEXT
    with pytest.raises(ContextTooLarge):
        [d async for d in provider.stream(huge)]


async def test_structured_output_follows_the_json_schema(provider):
    schema = {"type": "object", "properties": {"colour": {"type": "string", "maxLength": 24}},
              "required": ["colour"], "additionalProperties": False}
    request = ChatRequest(
        [ChatMessage("user", "Give a colour as JSON.")], max_tokens=64, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )
    reply = await provider.complete(request)
    assert reply.finish_reason == "stop"
    data = json.loads(reply.content)
    assert set(data) == {"colour"} and isinstance(data["colour"], str)


async def test_margin_status_over_lsp_reads_the_real_window(llama_server):
    async with margin_client(env={"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url}) as client:
        profiles = (await status(client, refresh=True))["profiles"]
    for profile in profiles.values():
        assert profile["reachable"] is True
        assert profile["contextWindow"] == LLAMA_CONTEXT
        assert profile["tokenizer"] == "llama.cpp"


def test_margin_doctor_against_the_real_server(llama_server):
    result = subprocess.run(
        [sys.executable, "-m", "margin.cli", "doctor"], capture_output=True, text=True, timeout=60,
        env=clean_env(MARGIN_DEFAULTS_BASE_URL=llama_server.base_url, XDG_CONFIG_HOME="/nonexistent"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{LLAMA_CONTEXT} tokens (llama.cpp /props n_ctx)" in result.stdout
    assert "[llama.cpp]" in result.stdout and "All 4 enabled profiles are ready." in result.stdout


@pytest.fixture
async def llama_counter(llama_server):
    from margin.adapters.llama_tokens import LlamaCppCounter

    counter = LlamaCppCounter(llama_server.base_url, timeout_s=60)
    yield counter
    await counter.aclose()


async def test_llama_cpp_chat_count_equals_the_servers_prompt_tokens(llama_counter, provider):
    from tests.fixtures.corpus import SNIPPETS

    conversations = [
        [ChatMessage("user", "x")],
        [ChatMessage("system", "You are terse.\n"), ChatMessage("user", SNIPPETS["mixed"])],
        [ChatMessage("system", "S"), ChatMessage("user", SNIPPETS["rust"]), ChatMessage("assistant", SNIPPETS["english"]),
         ChatMessage("user", SNIPPETS["chinese"] + SNIPPETS["emoji"])],
        [ChatMessage("user", SNIPPETS["specials"] + SNIPPETS["whitespace"] + SNIPPETS["crlf"])],
    ]
    for messages in conversations:
        counted = await llama_counter.count_chat(messages)
        reply = await provider.complete(ChatRequest(messages, max_tokens=1, temperature=0))
        assert counted == reply.usage.prompt_tokens, [m.content[:20] for m in messages]


async def test_llama_cpp_text_counts_are_cached(llama_counter):
    texts = ["def f():\n    return 1\n", "😀 中文", "", "def f():\n    return 1\n"]
    first = await llama_counter.count_texts(texts)
    assert first[0] == first[3] > 3 and first[2] == 0
    misses = llama_counter.cache.misses
    assert await llama_counter.count_texts(texts) == first
    assert llama_counter.cache.misses == misses  # nothing re-tokenized


@pytest.mark.timeout(900)  # ~3.5 minutes of CPU generation on a quiet machine; far more under load
async def test_thirty_turns_past_the_window_without_a_single_overflow(llama_server, tmp_path):
    """Files plus a growing history far larger than 4096 tokens: every turn fits, and the
    prompt Margin counted is the prompt the server counted."""
    from pathlib import Path

    from tests.e2e.lsp_client import open_doc, request
    from tests.fixtures.corpus import python_chunks

    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_CHAT_MAX_OUTPUT_TOKENS": "24", "MARGIN_CHAT_TEMPERATURE": "0"}
    chunks = list(python_chunks(size=1200).values())
    async with margin_client(env=env, root=Path("/ws")) as client:
        for i in range(3):
            open_doc(client, f"file:///ws/m{i}.py", chunks[i])
        counted = []
        for turn in range(30):
            result = await request(client, "margin/chat", {
                "message": f"Turn {turn}. In one short sentence, what does m{turn % 3}.py define? " + chunks[(10 + turn) % len(chunks)][:300],
                "textDocument": {"uri": f"file:///ws/m{turn % 3}.py"}})
            assert "message" not in result, result.get("message")  # never over budget, never refused upstream
            budget = result["budget"]
            assert budget["tokenizer"] == {"name": "llama.cpp", "exact": True}
            assert budget["counted"] == result["usage"]["promptTokens"], f"turn {turn}"
            assert budget["counted"] <= budget["limit"] <= 4096 - 24
            counted.append(budget["counted"])
        history = next(s for s in budget["sections"] if s["name"] == "history")
        assert history["dropped"], "the conversation never outgrew the window"
    print(f"\n30 turns at 4096: prompts of {min(counted)}-{max(counted)} tokens, each equal to the server's count")


@pytest.mark.parametrize("instruction", [
    "Rename the function add to plus.",
    "Add a docstring to add.",
    "Delete the function unused.",
])
async def test_edit_ops_on_the_real_model_apply_or_are_refused_safely(llama_server, tmp_path, instruction):
    """A 270M model does not always produce good ops; what matters is that every answer either
    validates and applies, or is refused with a message — never a crash or a partial edit."""
    from pathlib import Path

    from lsprotocol import types

    from tests.e2e.lsp_client import open_doc, request

    text = "def add(a, b):\n    return a + b\n\n\ndef unused():\n    pass\n"
    uri = "file:///ws/calc.py"
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_CHAT_OPS_MAX_OUTPUT_TOKENS": "200", "MARGIN_CHAT_OPS_TEMPERATURE": "0"}
    caps = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(apply_edit=True))
    async with margin_client(env=env, root=Path("/ws"), capabilities=caps) as client:
        open_doc(client, uri, text)
        result = await request(client, "margin/editOps", {"message": instruction, "textDocument": {"uri": uri}})
        print(f"\n{instruction!r}: {len(result['ops'])} ops; {result['assistantMessage'][:160]!r}")
        assert result["enabled"] is True and isinstance(result["assistantMessage"], str)
        history = await request(client, "margin/history", {})
        if not result["ops"]:
            assert result["assistantMessage"], "a refusal must say why"
            assert "edit" not in result
            if result["budget"].get("counted"):  # the model answered: unusable answers store nothing
                assert history["messages"] == [] or history["messages"][-1]["role"] == "assistant"
            return
        applied = await request(client, "margin/applyOps", {"ops": result["ops"],
                                                             "baseFingerprints": result["baseFingerprints"]})
        assert applied == {"applied": True, "rebased": False, "staleFiles": []}
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]


async def test_a_code_action_on_a_large_file_fits_the_window_and_edits_only_the_selection(llama_server, tmp_path):
    """The edit profile counts with the server's own tokenizer (/tokenize), trims a 600-line file
    around the selection to fit 4096 tokens, and the answer either becomes an edit of the
    selection alone or is refused with a message — never a context overflow."""
    from pathlib import Path

    from lsprotocol import types
    from pygls.exceptions import JsonRpcException

    from tests.e2e.lsp_client import open_doc, request
    from tests.e2e.test_lsp_code_actions import RESOLVING
    from tests.e2e.test_lsp_editops import apply_text_edits

    functions = [f"def step_{i}(value):\n    return value * {i} + {i % 7}\n\n\n" for i in range(150)]
    text = "".join(functions)
    line = text[: text.index("def step_75")].count("\n")
    uri = "file:///ws/steps.py"
    env = {"MARGIN_DEFAULTS_BASE_URL": llama_server.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
           "MARGIN_EDIT_MAX_OUTPUT_TOKENS": "200", "MARGIN_EDIT_TEMPERATURE": "0"}
    async with margin_client(env=env, root=Path("/ws"), capabilities=RESOLVING) as client:
        open_doc(client, uri, text)
        converter = client.protocol._converter
        selection = {"start": {"line": line, "character": 0}, "end": {"line": line + 2, "character": 0}}
        offered = await request(client, "textDocument/codeAction", converter.structure(
            {"textDocument": {"uri": uri}, "range": selection, "context": {"diagnostics": []}}, types.CodeActionParams))
        docstring = next(a for a in offered if a.title == "Margin: Add docstring")
        try:
            resolved = await request(client, "codeAction/resolve", docstring)
        except JsonRpcException as error:
            print(f"\nrefused: {error}")
            assert "too large" not in str(error).lower() and "context" not in str(error).lower()
            return
    (change,) = converter.unstructure(resolved.edit)["documentChanges"]
    edited = apply_text_edits(text, change["edits"])
    start = text.index("def step_75")
    end = text.index("def step_76") - 2  # the selection ends after `return`'s line
    tail = len(text) - end
    print(f"\nedit: {edited[start:len(edited) - tail]!r}")
    assert edited[:start] == text[:start] and edited[len(edited) - tail:] == text[end:]
