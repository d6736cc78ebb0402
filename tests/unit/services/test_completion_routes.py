"""Completion routes: chosen per backend by what it is and what it answers (llama.cpp's /infill
is asked once whether the model has FIM tokens), shared by concurrent requests, and a route
that fails as unsupported is remembered, never retried per keystroke."""

from __future__ import annotations

import asyncio
import json

import pytest

from margin.adapters.openai_http import OpenAICompatibleProvider
from margin.core.llm import BackendInfo, BackendUnreachable
from margin.services.completion_routes import RouteMemory, candidate_routes
from tests.fakes.fake_openai import raw, status

LLAMA = BackendInfo("http://127.0.0.1:1/v1", True, kind="llama.cpp", context_window=4096)
NO_FIM = status(501, {"error": {"code": 501, "type": "not_supported_error",
                                "message": "Infill is not supported by this model: prefix token is missing."}})


@pytest.fixture
async def provider(fake):
    provider = OpenAICompatibleProvider(fake.base_url, timeout_s=10)
    yield provider
    await provider.aclose()


async def test_llama_cpp_without_fim_tokens_falls_back_to_chat_and_is_asked_once(fake, provider):
    fake.routes["/infill"] = [NO_FIM]
    memory = RouteMemory()
    routes = await asyncio.gather(*(memory.route(provider, LLAMA, fake.base_url, None, False) for _ in range(5)))
    again = await memory.route(provider, LLAMA, fake.base_url, None, False)
    assert set(routes) == {"chat"} and again == "chat"
    assert [path for path, _ in fake.posts] == ["/infill"]  # one probe, shared, then remembered


async def test_llama_cpp_with_fim_tokens_uses_infill(fake, provider):
    fake.routes["/infill"] = [raw(json.dumps({"content": "", "timings": {"prompt_n": 1}}))]
    memory = RouteMemory()
    assert await memory.route(provider, LLAMA, fake.base_url, None, False) == "infill"
    memory.unsupported(fake.base_url, None, "infill")  # it failed as unsupported later
    assert await memory.route(provider, LLAMA, fake.base_url, None, False) == "chat"
    assert len(fake.posts) == 1  # not probed again


async def test_a_failed_probe_is_no_verdict_and_is_tried_again():
    provider = OpenAICompatibleProvider("http://127.0.0.1:9/v1", timeout_s=5)
    memory = RouteMemory()
    try:
        with pytest.raises(BackendUnreachable):
            await memory.route(provider, LLAMA, "http://127.0.0.1:9/v1", None, False)
        with pytest.raises(BackendUnreachable):
            await memory.route(provider, LLAMA, "http://127.0.0.1:9/v1", None, False)
        assert memory.usable("http://127.0.0.1:9/v1", None, ["infill", "chat"]) == ["infill", "chat"]
    finally:
        await provider.aclose()


@pytest.mark.parametrize("kind, base_url, model, family, expected", [
    ("llama.cpp", "http://127.0.0.1:8080/v1", None, False, ["infill", "chat"]),
    ("openai-compatible", "https://api.mistral.ai/v1", "codestral-latest", True, ["mistral_fim", "chat"]),
    ("openai-compatible", "https://api.openai.com/v1", "gpt-5", False, ["chat"]),
    ("vllm", "http://gpu:8000/v1", "Qwen/Qwen2.5-Coder-7B", True, ["raw_fim", "chat"]),
    ("vllm", "http://gpu:8000/v1", "meta-llama/Llama-3.1-8B-Instruct", False, ["chat"]),
    ("openai-compatible", "http://127.0.0.1:11434/v1", "qwen2.5-coder:7b", True,
     ["completions_suffix", "raw_fim", "chat"]),
    ("openai-compatible", "http://127.0.0.1:11434/v1", "llama3.2", False, ["chat"]),
])
def test_the_routes_worth_trying_per_backend(kind, base_url, model, family, expected):
    info = BackendInfo(base_url, True, kind=kind)
    assert candidate_routes(info, base_url, model, family) == expected
