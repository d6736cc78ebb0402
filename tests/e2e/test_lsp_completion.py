"""Inline completion through the real margin-lsp process against the loopback fake backend:
the item and its range in both position encodings, cancellation and supersession aborting the
HTTP call, outdated versions and the cache answered without a model call, the completion-menu
fallback (advertised by a pre-read of the settings, caught up with them once validated), every
route's exact request shape, unsupported routes remembered, and failures that
give an empty answer and a log line, never an error."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.conftest import until
from tests.e2e.lsp_client import UTF8_CLIENT, UTF16_CLIENT, cancellable, change_doc, margin_client, open_doc, request
from tests.e2e.raw_lsp import raw_client
from tests.fakes.fake_openai import FakeBackend, hang, reply, status

WS = "file:///ws"
A = f"{WS}/calc.py"
TEXT = 'def add(a, b):\n    return a + b\n\n\nlabel = ("😀 total", )\n'
EMOJI_LINE, TYPED = 4, 'label = ("😀 total", '
INLINE = "textDocument/inlineCompletion"


def hole(text: str):
    return reply(f"```python\n{text}\n```")


def env_for(fake: FakeBackend, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"MARGIN_DEFAULTS_BASE_URL": fake.base_url, "MARGIN_DATABASE": str(tmp_path / "t.db"),
            "MARGIN_DEFAULTS_TOKENIZER": "tiktoken:o200k_base", **extra}


@contextlib.asynccontextmanager
async def start(fake, tmp_path, capabilities=UTF16_CLIENT, init_options=None, **extra):
    async with margin_client(env=env_for(fake, tmp_path, **extra), root=Path("/ws"), capabilities=capabilities,
                             init_options=init_options) as client:
        # Send these requests' params as the JSON written here (the client would drop `version`).
        for message in (types.InlineCompletionRequest, types.CompletionRequest):
            client.converter.register_unstructure_hook(message, lambda m: {
                "id": m.id, "method": m.method, "jsonrpc": m.jsonrpc, "params": m.params})
        yield client


def units(text: str, encoding: str) -> int:
    return len(text.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(text.encode())


def inline_params(line: int, character: int, uri: str = A, version: int | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"uri": uri}
    if version is not None:
        document["version"] = version
    return {"textDocument": document, "position": {"line": line, "character": character},
            "context": {"triggerKind": 2}}


async def ask(client, method: str, params: dict[str, Any]) -> Any:
    """The request's result as the JSON the server sent."""
    result = await request(client, method, params)
    return client.converter.unstructure(result) if result is not None else None


async def inline(client, params: dict[str, Any]) -> list[dict[str, Any]]:
    result = await ask(client, INLINE, params)
    return result["items"] if isinstance(result, dict) else result


@pytest.mark.parametrize("capabilities, encoding", [(UTF16_CLIENT, "utf-16"), (UTF8_CLIENT, "utf-8")])
async def test_the_item_replaces_the_auto_closed_bracket_in_either_encoding(fake, tmp_path, capabilities, encoding):
    fake.script(hole("42)"))
    async with start(fake, tmp_path, capabilities) as client:
        assert client.init_result.capabilities.inline_completion_provider is not None
        assert client.init_result.capabilities.completion_provider is None  # the menu is opt-in
        open_doc(client, A, TEXT)
        column = units(TYPED, encoding)
        (item,) = await inline(client, inline_params(EMOJI_LINE, column))
    assert item == {"insertText": "42)", "range": {"start": {"line": EMOJI_LINE, "character": column},
                                                    "end": {"line": EMOJI_LINE, "character": column + 1}}}
    assert column == (21 if encoding == "utf-16" else 23)
    assert [path for path, _ in fake.posts] == ["/infill"]  # llama.cpp asked once: no FIM tokens here


async def test_cancel_request_aborts_the_http_call(fake, tmp_path):
    fake.script(hang(60))
    async with start(fake, tmp_path) as client:
        open_doc(client, A, TEXT)
        future, cancel = cancellable(client, INLINE, inline_params(1, 11))
        await until(lambda: len(fake.requests) == 1)
        cancel()
        await until(lambda: fake.disconnects)  # the fake saw the connection closed
        with pytest.raises(Exception, match="cancel"):
            await future
        fake.script(hole("a - b"))  # the server goes on serving
        assert (await inline(client, inline_params(1, 11)))[0]["insertText"] == "a - b"
    assert [path for path, _ in fake.disconnects] == ["/v1/chat/completions"]


async def test_a_newer_request_aborts_the_older_which_answers_empty(fake, tmp_path):
    fake.script(hang(60), hole("a * b"))
    async with start(fake, tmp_path) as client:
        open_doc(client, A, "def add(a, b):\n    return \n")
        older = asyncio.ensure_future(inline(client, inline_params(1, 11)))
        await until(lambda: len(fake.requests) == 1)
        newer = await inline(client, inline_params(1, 11))
        assert await older == []  # an empty answer, not an error the editor would show
        assert newer[0]["insertText"] == "a * b"
        assert [path for path, _ in fake.disconnects] == ["/v1/chat/completions"]


async def test_a_request_for_an_outdated_version_gets_nothing_and_costs_no_model_call(fake, tmp_path):
    async with start(fake, tmp_path) as client:
        open_doc(client, A, "def add(a, b):\n    return \n", version=1)
        change_doc(client, A, 2, ((1, 11, 1, 11), "a"))
        assert await inline(client, inline_params(1, 11, version=1)) == []
        assert fake.requests == []
        assert [path for path, _ in fake.posts] in ([], ["/infill"])  # at most the start-up route probe


async def test_typing_along_a_suggestion_and_backspace_are_served_from_the_cache(fake, tmp_path):
    fake.script(hole("a + b  # the sum"))
    async with start(fake, tmp_path) as client:
        open_doc(client, A, "def add(a, b):\n    return \n")
        first = await inline(client, inline_params(1, 11))
        assert first[0]["insertText"] == "a + b  # the sum"
        typed = ""
        for version, char in enumerate("a + b", start=2):  # the user types what is shown
            change_doc(client, A, version, ((1, 11 + len(typed), 1, 11 + len(typed)), char))
            typed += char
            (item,) = await inline(client, inline_params(1, 11 + len(typed)))
            assert item["insertText"] == "a + b  # the sum"[len(typed):]
        change_doc(client, A, 9, ((1, 11, 1, 16), ""))  # and deletes it all again
        assert (await inline(client, inline_params(1, 11)))[0]["insertText"] == "a + b  # the sum"
    assert len(fake.requests) == 1


async def test_the_completion_menu_item_completes_the_word_up_to_the_auto_closed_bracket(fake, tmp_path):
    fake.script(hole("ax(values)"))
    async with start(fake, tmp_path, init_options={"completionMenu": True}) as client:
        assert client.init_result.capabilities.completion_provider is not None
        open_doc(client, A, "values = [3, 1]\nbiggest = m)\n")
        result = await ask(client, types.TEXT_DOCUMENT_COMPLETION,
                           {"textDocument": {"uri": A}, "position": {"line": 1, "character": 11}})
    assert result["isIncomplete"] is True
    (item,) = result["items"]
    # From the typed word to the cursor: the `)` after it, which the suggestion ends with, stays.
    assert item["textEdit"] == {"range": {"start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 11}},
                                "newText": "max(values"}
    assert item["label"] == "max(values" and item["filterText"] == "max(values" and item["insertTextFormat"] == 1
    assert "max(values)" in item["documentation"]["value"]


async def test_a_change_that_keeps_the_version_while_the_model_answers_drops_the_suggestion(fake, tmp_path):
    """Found by the full parameter fuzz: a change sent with the version the document already had
    (accepted: only a version going backwards is refused) shortened it while the model answered,
    the suggestion was kept as if nothing had changed, and the menu item looked up a line that no
    longer existed (InternalError). A suggestion is kept only for the very text it was made for."""
    fake.script(reply("```python\nax(values)\n```", delay_s=3.0))
    async with start(fake, tmp_path, init_options={"completionMenu": True}) as client:
        open_doc(client, A, "values = [3, 1]\nbiggest = m\n\n\n")
        asked = asyncio.ensure_future(ask(client, types.TEXT_DOCUMENT_COMPLETION,
                                          {"textDocument": {"uri": A}, "position": {"line": 4, "character": 0}}))
        await until(lambda: any("messages" in body for body in fake.requests))
        change_doc(client, A, 1, (None, "x\n"))
        result = await asked
        status = await request(client, "margin/status", {})
    assert result == {"isIncomplete": True, "items": []}
    assert [f["version"] for f in status["files"]] == [1]


SNIPPETS = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(configuration=True),
    text_document=types.TextDocumentClientCapabilities(completion=types.CompletionClientCapabilities(
        completion_item=types.ClientCompletionItemOptions(snippet_support=True))))


@pytest.mark.parametrize("capabilities", [UTF16_CLIENT, SNIPPETS])
async def test_a_menu_item_with_spaces_and_lines_is_a_snippet_where_the_client_takes_them(fake, tmp_path, capabilities):
    fake.script(hole("total = 0\n    for v in values:\n        total += v  # ${v}"))
    async with start(fake, tmp_path, capabilities, init_options={"completionMenu": True}) as client:
        open_doc(client, A, "def total(values):\n    \n")
        result = await ask(client, types.TEXT_DOCUMENT_COMPLETION,
                           {"textDocument": {"uri": A}, "position": {"line": 1, "character": 4}})
    (item,) = result["items"]
    edit_range = {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}}
    if capabilities is SNIPPETS:  # the cursor line's indentation comes from the editor
        assert item["insertTextFormat"] == 2 and item["insertTextMode"] == 2
        assert item["textEdit"] == {"range": edit_range,
                                    "newText": "total = 0\nfor v in values:\n    total += v  # \\${v\\}"}
    else:
        assert item["insertTextFormat"] == 1 and "insertTextMode" not in item
        assert item["textEdit"] == {"range": edit_range,
                                    "newText": "total = 0\n    for v in values:\n        total += v  # ${v}"}
    assert item["label"] == "total = 0…"


async def test_the_completion_menu_is_registered_when_turned_on_later(fake, tmp_path):
    """Turned on in Margin's settings file, which `initialize` does not pre-read: registered once
    the settings are read; a workspace's settings may turn it off (never on: the settings walk in
    tests/unit/core/test_settings.py)."""
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(configuration=True),
        text_document=types.TextDocumentClientCapabilities(
            completion=types.CompletionClientCapabilities(dynamic_registration=True)))
    settings_file = tmp_path / "settings.json"
    settings_file.write_text('{"completionMenu": true}')
    async with start(fake, tmp_path, capabilities, MARGIN_SETTINGS=str(settings_file)) as client:
        await until(lambda: client.registrations)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"margin": {"completionMenu": False}}))
        await until(lambda: client.unregistrations)
    menu = ("margin.completionMenu", "textDocument/completion")
    assert [(r.id, r.method) for r in client.registrations] == [menu]
    assert [(u.id, u.method) for u in client.unregistrations] == [menu]


async def test_an_invalid_completion_menu_is_not_advertised_and_is_told_at_initialized(fake, tmp_path):
    # `initialize` reads completionMenu before the settings are validated (right after the reply).
    async with start(fake, tmp_path, init_options={"margin": {"completionMenu": "maybe"}}) as client:
        assert client.init_result.capabilities.completion_provider is None
        await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
        message = client.messages[-1]
        assert message.type == types.MessageType.Error
        assert "completionMenu" in message.message and "'maybe'" in message.message
        assert "(from initializationOptions)" in message.message and "Keeping the last good settings" in message.message


DYNAMIC = {"workspace": {"configuration": False}, "textDocument": {"completion": {"dynamicRegistration": True}}}


async def test_where_the_validated_settings_turn_the_menu_on_after_all_it_is_registered_at_initialized(fake, tmp_path):
    """The pre-read at `initialize` takes MARGIN_COMPLETION_MENU=false; validated, the environment
    is rejected whole (another variable is invalid), and initializationOptions turn the menu on."""
    fake.script(hole("ax(values)"))
    environ = env_for(fake, tmp_path, MARGIN_COMPLETION_MENU="false", MARGIN_CHAT_TIMEOUT_S="-5")
    # The environment's other settings are rejected with it: these come in initializationOptions.
    init = {"completionMenu": True, "database": environ["MARGIN_DATABASE"],
            "defaults": {"baseUrl": fake.base_url, "tokenizer": environ["MARGIN_DEFAULTS_TOKENIZER"]}}
    async with raw_client(environ, capabilities=DYNAMIC, initialization_options=init) as client:
        assert "completionProvider" not in client.init_result["capabilities"]
        await until(lambda: any(m["method"] == "client/registerCapability" for m in client.server_requests)
                    and any(m["method"] == "window/showMessage" for m in client.notifications))
        (registration,) = [r for m in client.server_requests if m["method"] == "client/registerCapability"
                           for r in m["params"]["registrations"]]
        assert (registration["id"], registration["method"]) == ("margin.completionMenu", "textDocument/completion")
        (shown,) = [m for m in client.notifications if m["method"] == "window/showMessage"]
        assert "MARGIN_CHAT_TIMEOUT_S" in shown["params"]["message"]
        client.notify("textDocument/didOpen", {"textDocument": {"uri": A, "languageId": "python", "version": 1,
                                                                "text": "values = [3, 1]\nbiggest = m)\n"}})
        result = await client.request(types.TEXT_DOCUMENT_COMPLETION,
                                      {"textDocument": {"uri": A}, "position": {"line": 1, "character": 11}})
    assert [item["textEdit"]["newText"] for item in result["items"]] == ["max(values"]


async def test_where_the_validated_settings_turn_an_advertised_menu_off_it_answers_nothing(fake, tmp_path):
    """initializationOptions turn the menu on, read so at `initialize`; validated, they are
    rejected whole (another value is invalid): completion stays advertised, and answers nothing."""
    init = {"completionMenu": True, "chat": {"temperature": "hot"}}
    async with start(fake, tmp_path, init_options=init) as client:
        assert client.init_result.capabilities.completion_provider is not None
        await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
        assert "chat.temperature" in client.messages[-1].message
        open_doc(client, A, "values = [3, 1]\nbiggest = m)\n")
        result = await ask(client, types.TEXT_DOCUMENT_COMPLETION,
                           {"textDocument": {"uri": A}, "position": {"line": 1, "character": 11}})
    assert result == {"isIncomplete": True, "items": []}
    assert fake.requests == []


async def test_failures_answer_empty_with_a_log_line_never_an_error(fake, tmp_path):
    log_file = tmp_path / "margin.log"
    fake.script(status(500, {"error": {"message": "boom"}}))
    async with start(fake, tmp_path, MARGIN_LOG_FILE=str(log_file)) as client:
        open_doc(client, A, "def add(a, b):\n    return \n")
        assert await inline(client, inline_params(1, 11)) == []
        # a window too small for the prompt: over budget, nothing sent
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"margin": {"completion": {"contextWindow": 256, "maxOutputTokens": 250}}}))
        await until(lambda: "settings applied from workspace settings" in log_file.read_text())
        assert await inline(client, inline_params(1, 11)) == []
        assert await inline(client, inline_params(9, 0)) == []  # past the end
    assert len(fake.requests) == 1
    log = log_file.read_text()
    assert "completion failed" in log and "completion over budget" in log
    assert "def add" not in log  # metadata only


async def test_a_tokenizer_that_fails_answers_empty_with_a_log_line(fake, tmp_path):
    """The llama.cpp tokenizer failing (HTTP 500 from /tokenize): completion logged a crash with a
    traceback (found by the parameter fuzz); it is a failed completion like any other. (A server
    with no /tokenize at all is counted with the token bound: see below.)"""
    # failing every time: how many counts the server makes before the completion's is not fixed
    fake.routes["/tokenize"] = [status(500, {"error": {"message": "tokenizer crashed"}})] * 100
    log_file = tmp_path / "margin.log"
    async with start(fake, tmp_path, MARGIN_LOG_FILE=str(log_file), MARGIN_COMPLETION_TOKENIZER="llama.cpp") as client:
        open_doc(client, A, "def add(a, b):\n    return \n")
        assert await inline(client, inline_params(1, 11)) == []
    assert [path for path, _ in fake.posts][-1] == "/tokenize", fake.posts  # the model is not asked
    log = log_file.read_text()
    assert "completion failed" in log and "Traceback" not in log and "crashed" not in log


# --- every route's request, exactly ------------------------------------------------------------

SMALL = "def add(a, b):\n    return \n"


async def _one_completion(backend: FakeBackend, tmp_path: Path, **settings: str) -> list[dict[str, Any]]:
    async with start(backend, tmp_path, **settings) as client:
        open_doc(client, A, SMALL)
        return await inline(client, inline_params(1, 11))


async def test_llama_cpp_infill_when_the_model_has_fim_tokens(fake, tmp_path):
    fake.routes["/infill"] = [status(200, {"content": ""}), status(200, {"content": "a + b"})]
    got = await _one_completion(fake, tmp_path)
    assert got[0]["insertText"] == "a + b"
    probe, (path, body) = fake.posts
    assert probe == ("/infill", {"input_prefix": "", "input_suffix": "", "prompt": "", "n_predict": 1,
                                 "cache_prompt": False, "stream": True})
    assert path == "/infill" and body == {
        "input_prefix": "def add(a, b):\n", "input_suffix": "\n", "input_extra": [], "prompt": "    return ",
        "n_predict": 128, "n_indent": 4, "t_max_predict_ms": 1000, "temperature": 0.2, "top_k": 40, "top_p": 0.9,
        "samplers": ["top_k", "top_p", "infill", "temperature"], "cache_prompt": True, "stream": True}
    assert fake.requests == []


def _backend(model_id: str, owned_by: str, **extra: Any) -> FakeBackend:
    return FakeBackend(models=[{"id": model_id, "owned_by": owned_by, **extra}])


async def test_mistral_fim_for_codestral(tmp_path):
    with _backend("codestral-latest", "mistralai") as backend:
        backend.routes["/v1/fim/completions"] = [status(200, {"choices": [{"message": {"content": "a + b"}}]})]
        got = await _one_completion(backend, tmp_path, MARGIN_COMPLETION_MODEL="codestral-latest")
    assert got[0]["insertText"] == "a + b"
    assert backend.posts == [("/v1/fim/completions", {
        "model": "codestral-latest", "prompt": "def add(a, b):\n    return ", "suffix": "\n", "max_tokens": 128,
        "temperature": 0.2, "stream": True})]


def completions(backend) -> list[tuple[str, dict]]:
    """The completion requests a backend got: not the probe's question to Ollama's own API
    (`/api/show`, asked of a server whose models are owned by "library"; adapters/ollama_window.py)."""
    return [(path, body) for path, body in backend.posts if not path.startswith("/api/")]


async def test_completions_with_suffix_for_an_ollama_style_server(tmp_path):
    with _backend("qwen2.5-coder:1.5b", "library") as backend:
        backend.routes["/v1/completions"] = [status(200, {"choices": [{"text": "a + b"}]})]
        got = await _one_completion(backend, tmp_path, MARGIN_COMPLETION_MODEL="qwen2.5-coder:1.5b")
    assert got[0]["insertText"] == "a + b"
    assert completions(backend) == [("/v1/completions", {
        "model": "qwen2.5-coder:1.5b", "prompt": "def add(a, b):\n    return ", "suffix": "\n", "max_tokens": 128,
        "temperature": 0.2, "stream": True})]


async def test_raw_fim_on_vllm_which_rejects_suffix(tmp_path):
    with _backend("Qwen/Qwen2.5-Coder-1.5B", "vllm", max_model_len=8192) as backend:
        backend.routes["/v1/completions"] = [status(200, {"choices": [{"text": "a + b<|endoftext|>"}]})]
        got = await _one_completion(backend, tmp_path, MARGIN_COMPLETION_MODEL="Qwen/Qwen2.5-Coder-1.5B")
    assert got[0]["insertText"] == "a + b"
    (path, body), = [(path, body) for path, body in backend.posts if path != "/tokenize"]  # vLLM counts too
    assert path == "/v1/completions" and body == {
        "model": "Qwen/Qwen2.5-Coder-1.5B",
        "prompt": "<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n<|fim_middle|>",
        "max_tokens": 128, "temperature": 0.2, "stream": True,
        "stop": ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>",
                 "<|repo_name|>", "<|file_sep|>", "<|im_start|>", "<|im_end|>"]}


async def test_the_chat_route_fills_a_marked_hole(fake, tmp_path):
    fake.script(hole("a + b"))
    got = await _one_completion(fake, tmp_path)
    assert got[0]["insertText"] == "a + b"
    (body,) = fake.requests
    assert "response_format" not in body  # the code comes back in a fenced block
    assert "in one fenced code block" in body["messages"][0]["content"]
    assert body["max_tokens"] == 128 and body["temperature"] == 0.2 and body["stream"] is True
    assert body["messages"][1]["content"] == (
        "File calc.py (python)\n```python\ndef add(a, b):\n{{FILL_HERE}}\n```\n\n"
        "The cursor is in {{FILL_HERE}}, after this start of its line:\n```python\n    return \n```\n"
        "Write the code that goes at the cursor, after that text.")


async def test_an_unsupported_route_is_remembered_not_retried_per_keystroke(tmp_path):
    with _backend("qwen2.5-coder:1.5b", "library") as backend:  # /v1/completions answers 404
        backend.script(hole("a + b"), hole("a - b"))
        async with start(backend, tmp_path, MARGIN_COMPLETION_MODEL="qwen2.5-coder:1.5b") as client:
            open_doc(client, A, SMALL)
            first = await inline(client, inline_params(1, 11))
            change_doc(client, A, 2, ((1, 11, 1, 11), "("))
            second = await inline(client, inline_params(1, 12))
    assert first[0]["insertText"] == "a + b" and second[0]["insertText"] == "a - b"
    # /completions with suffix, then a raw FIM prompt, each found unsupported once; chat after that
    posts = completions(backend)
    assert [path for path, _ in posts] == ["/v1/completions", "/v1/completions"]
    assert "suffix" in posts[0][1] and "<|fim_prefix|>" in posts[1][1]["prompt"]
    assert len(backend.requests) == 2


async def test_completion_is_answered_while_a_chat_is_still_running(fake, tmp_path):
    fake.script(hang(60), hole("a + b"))
    async with start(fake, tmp_path) as client:
        open_doc(client, A, SMALL)
        chat, cancel = cancellable(client, "margin/chat", {"message": "take your time", "textDocument": {"uri": A}})
        await until(lambda: len(fake.requests) == 1)
        assert (await inline(client, inline_params(1, 11)))[0]["insertText"] == "a + b"
        assert not chat.done()  # the chat goes on; completion did not wait for it
        cancel()
        with pytest.raises(JsonRpcException, match="cancel"):
            await chat


async def test_a_llama_cpp_that_does_not_count_is_reported_and_counted_with_the_bound(fake, tmp_path):
    """A proxy in front of llama.cpp answers /props but not /tokenize: status says the tokenizer is
    the bound and why (not `llama.cpp, exact: true`), and chat and completion still work."""
    from tests.e2e.lsp_client import status

    fake.script(reply("Counted anyway."), hole("a + b"))
    env = env_for(fake, tmp_path, MARGIN_DEFAULTS_TOKENIZER="auto")
    async with margin_client(env=env, root=Path("/ws"), capabilities=UTF16_CLIENT) as client:
        for message in (types.InlineCompletionRequest,):
            client.converter.register_unstructure_hook(message, lambda m: {
                "id": m.id, "method": m.method, "jsonrpc": m.jsonrpc, "params": m.params})
        profiles = (await status(client))["profiles"]
        chat = await request(client, "margin/chat", {"message": "hi"})
        open_doc(client, A, SMALL)
        items = await inline(client, inline_params(1, 11))
    for name in ("chat", "completion"):
        p = profiles[name]
        assert (p["tokenizer"], p["exact"]) == ("heuristic", False), p
        assert p["tokenizerState"].startswith("unavailable: ") and "/tokenize answered HTTP 404" in p["tokenizerState"]
    assert chat["reply"] == "Counted anyway." and chat["budget"]["tokenizer"] == {"name": "heuristic", "exact": False}
    assert [i["insertText"] for i in items] == ["a + b"]


async def test_a_minified_bundles_one_line_never_freezes_the_server(fake, tmp_path):
    """Completion in the middle of a 20 MB line (a minified bundle), counted with the token
    bound: its end before the cursor is read, never the whole line, and the server keeps
    answering (margin/status asked meanwhile). The whole line counted took 4-11 s a megabyte."""
    import asyncio
    import json

    from tests.e2e.lsp_client import status

    bundle = "function(a,b){return a+b};" * 800_000
    fake.default = hole("x")
    uri = "file:///ws/app.min.js"
    async with start(fake, tmp_path, MARGIN_DEFAULTS_TOKENIZER="heuristic") as client:
        open_doc(client, uri, bundle, language="javascript")
        params = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": len(bundle) // 2},
                  "context": {"triggerKind": 2}}
        asked = asyncio.ensure_future(inline(client, params))
        checked = await asyncio.wait_for(status(client), 120)
        answered = await asyncio.wait_for(asked, 120)
    assert checked["files"][0]["uri"] == uri
    assert answered is not None
    sent = json.dumps(fake.requests[-1]) if fake.requests else ""
    assert len(sent) < 200_000  # the prompt: the line's end before the cursor, not the bundle
