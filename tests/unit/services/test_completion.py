"""Inline completion below the LSP, against the in-process fake backend: each route's request,
the cache (typing along a suggestion and going back ask nothing), one request per document,
answers for text the user no longer has dropped, and failures that give no suggestion, never
an error."""

from __future__ import annotations

import asyncio
import json

from margin.core.llm import BackendHTTPError, BackendInfo, NotSupported
from margin.core.vfs import Position, Range, TextChange
from margin.services.completion import CompletionRequest, CompletionService
from tests.fakes.fake_provider import WS, FakeProvider, Gate, answer, close, fake_app

A = f"{WS}/calc.py"
TEXT = "def add(a, b):\n    return \n\n\nprint(add(2, 3))\n"
CURSOR = Position(1, 11)  # after "return "
NO_FIM = NotSupported("Infill is not supported by this model", status=501)
VLLM_QWEN = BackendInfo("http://gpu/v1", True, kind="vllm", context_window=8192,
                        context_window_source="vLLM /models max_model_len")


def hole(text: str):
    return answer(f"```python\n{text}\n```")


async def make(tmp_path, provider, **env):
    app = fake_app(tmp_path, provider, **env)
    app.files.open(A, "python", 1, TEXT)
    return app, CompletionService(app)


async def test_llama_cpp_without_fim_tokens_is_asked_through_the_chat_route_and_cached(tmp_path):
    provider = FakeProvider(hole("a + b"))
    provider.fill_answers["infill"] = [NO_FIM]
    app, service = await make(tmp_path, provider)
    try:
        outcome = await service.complete(CompletionRequest(A, CURSOR))
        assert outcome.route == "chat" and outcome.suggestion.text == "a + b" and not outcome.cached
        (request,) = provider.requests
        assert request.response_format is None  # the code comes back in a fenced block
        assert "in one fenced code block" in request.messages[0].content
        assert "def add(a, b):" in request.messages[-1].content
        assert request.max_tokens == 128 == outcome.budget.reserved_output  # the completion profile

        again = await service.complete(CompletionRequest(A, CURSOR))  # the same place: the cache
        app.files.change(A, 2, [TextChange("a ", Range(CURSOR, CURSOR))])  # typing along it
        along = await service.complete(CompletionRequest(A, Position(1, 13)))
        assert again.cached and again.suggestion.text == "a + b"
        assert along.cached and along.suggestion.text == "+ b"
        assert len(provider.requests) == 1 and [r.route for r in provider.fills] == ["infill"]
    finally:
        await close(app)


async def test_llama_cpp_with_fim_tokens_uses_infill_with_the_cursor_line_as_prompt(tmp_path):
    provider = FakeProvider()
    provider.fill_answers["infill"] = ["", "a + b"]
    app, service = await make(tmp_path, provider)
    try:
        outcome = await service.complete(CompletionRequest(A, CURSOR))
        assert outcome.route == "infill" and outcome.suggestion.text == "a + b"
        probe, request = provider.fills
        assert probe.max_tokens == 1 and probe.cache_prompt is False  # the route probe: one token, not kept
        assert (request.line, request.prefix, request.min_indent) == ("    return ", "def add(a, b):\n", 4)
        assert request.suffix.startswith("\n\n\nprint(add(2, 3))") and request.max_tokens == 128
        assert request.cache_prompt and request.time_limit_ms == 1000 and request.temperature == 0.2
        assert provider.requests == []  # no chat model was asked
    finally:
        await close(app)


async def test_vllm_gets_the_familys_raw_fim_prompt_and_its_tokens_never_reach_the_user(tmp_path):
    provider = FakeProvider(info=VLLM_QWEN)
    provider.fill_answers["raw_fim"] = ["a + b<|endoftext|>"]
    app, service = await make(tmp_path, provider, MARGIN_COMPLETION_MODEL="Qwen/Qwen2.5-Coder-7B")
    try:
        outcome = await service.complete(CompletionRequest(A, CURSOR))
        assert outcome.route == "raw_fim" and outcome.suggestion.text == "a + b"
        (request,) = provider.fills
        assert request.route == "raw_fim" and request.model == "Qwen/Qwen2.5-Coder-7B"
        assert request.prefix.startswith("<|fim_prefix|>") and request.prefix.endswith("<|fim_middle|>")
        assert "<|endoftext|>" in request.stop
    finally:
        await close(app)


async def test_a_route_unsupported_on_first_use_gives_way_and_is_not_tried_again(tmp_path):
    provider = FakeProvider(hole("a + b"), hole("a - b"), info=VLLM_QWEN)
    provider.fill_answers["raw_fim"] = [NotSupported("no completions here", status=404)]
    app, service = await make(tmp_path, provider, MARGIN_COMPLETION_MODEL="Qwen/Qwen2.5-Coder-7B")
    try:
        first = await service.complete(CompletionRequest(A, CURSOR))
        app.files.change(A, 2, [TextChange("\n", Range(Position(2, 0), Position(2, 0)))])
        second = await service.complete(CompletionRequest(A, CURSOR))
        assert (first.route, first.suggestion.text) == ("chat", "a + b")
        assert (second.route, second.suggestion.text) == ("chat", "a - b")
        assert [r.route for r in provider.fills] == ["raw_fim"]  # tried once, remembered
    finally:
        await close(app)


async def test_an_answer_for_text_the_user_no_longer_has_is_dropped(tmp_path):
    provider = FakeProvider()
    app, service = await make(tmp_path, provider)

    def user_types_meanwhile(request):
        app.files.change(A, 2, [TextChange("x", Range(Position(4, 0), Position(4, 0)))])
        return "a + b"

    provider.fill_answers["infill"] = ["", user_types_meanwhile]
    try:
        outcome = await service.complete(CompletionRequest(A, CURSOR))
        assert outcome.suggestion is None and "changed" in outcome.reason
    finally:
        await close(app)


async def test_a_newer_request_for_the_document_cancels_the_older(tmp_path):
    gate = Gate()
    provider = FakeProvider([gate, json.dumps({"completion": "a + b"})], hole("a * b"))
    provider.fill_answers["infill"] = [NO_FIM]
    app, service = await make(tmp_path, provider)
    try:
        older = asyncio.create_task(service.complete(CompletionRequest(A, CURSOR)))
        await gate.reached.wait()
        app.files.change(A, 2, [TextChange("(", Range(Position(4, 0), Position(4, 0)))])
        newer = await service.complete(CompletionRequest(A, CURSOR))
        replaced = await older  # answered empty, not an error the editor would show
        assert replaced.suggestion is None and "newer request" in replaced.reason
        assert gate.cancelled.is_set()  # its model call was aborted, not left to finish
        assert newer.suggestion.text == "a * b"
    finally:
        await close(app)


async def test_over_budget_and_backend_failures_give_no_suggestion_and_no_error(tmp_path):
    provider = FakeProvider(BackendHTTPError("The backend at x answered HTTP 500.", status=500))
    provider.fill_answers["infill"] = [NO_FIM]
    app, service = await make(tmp_path, provider, MARGIN_COMPLETION_CONTEXT_WINDOW="256",
                              MARGIN_COMPLETION_MAX_OUTPUT_TOKENS="250")
    try:
        tight = await service.complete(CompletionRequest(A, CURSOR))
        assert tight.suggestion is None and tight.budget is not None and "Too large" in tight.reason
        assert provider.requests == []  # nothing was sent
    finally:
        await close(app)
    provider = FakeProvider(BackendHTTPError("The backend at x answered HTTP 500.", status=500))
    provider.fill_answers["infill"] = [NO_FIM]
    app, service = await make(tmp_path, provider)
    try:
        failed = await service.complete(CompletionRequest(A, CURSOR))
        assert failed.suggestion is None and "HTTP 500" in failed.reason
    finally:
        await close(app)


async def test_of_three_quick_requests_only_the_first_and_the_last_reach_the_backend(tmp_path):
    """The second is still waiting for the first's call to stop when the third arrives: it gives
    way without asking the backend, so one request per document is ever in flight."""
    gate = Gate()
    provider = FakeProvider([gate, json.dumps({"completion": "a + b"})], hole("a * b"))
    provider.fill_answers["infill"] = [NO_FIM]
    app, service = await make(tmp_path, provider)
    try:
        first = asyncio.create_task(service.complete(CompletionRequest(A, CURSOR)))
        await gate.reached.wait()
        second = asyncio.create_task(service.complete(CompletionRequest(A, CURSOR)))
        third = asyncio.create_task(service.complete(CompletionRequest(A, CURSOR)))
        outcomes = await asyncio.gather(first, second, third)
        assert [o.suggestion.text if o.suggestion else None for o in outcomes] == [None, None, "a * b"]
        assert "newer request" in outcomes[0].reason and "newer request" in outcomes[1].reason
        assert gate.cancelled.is_set() and len(provider.requests) == 2
    finally:
        await close(app)


async def test_other_open_files_give_windows_around_their_last_edit(tmp_path):
    app, service = await make(tmp_path, FakeProvider())
    try:
        lines = [f"line_{n} = {n}\n" for n in range(100)]
        app.files.open(f"{WS}/edited.py", "python", 1, "".join(lines))
        app.files.change(f"{WS}/edited.py", 2, [TextChange("# here\n", Range(Position(60, 0), Position(60, 0)))])
        app.files.open(f"{WS}/short.py", "python", 1, "x = 1\r\ny = 2")
        app.files.open(f"{WS}/blank.py", "python", 1, "\n\n")
        edited, short = service.snippets(app.files.get(A))
        assert (edited.file_id, edited.reason) == ("edited.py", "recently edited")
        assert edited.text == "".join((lines[:60] + ["# here\n"] + lines[60:])[40:80])
        assert (short.file_id, short.reason, short.text) == ("short.py", "open file", "x = 1\r\ny = 2")
    finally:
        await close(app)
