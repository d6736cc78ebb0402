"""The window Ollama serves a model with, read from its own API (its OpenAI API neither says it
nor takes one): the Modelfile's num_ctx, else the loaded runner's, else the smallest default —
never the model's documented window, past which Ollama would cut the prompt silently."""

from __future__ import annotations

import pytest

from margin.adapters.ollama_window import SMALLEST_DEFAULT
from margin.adapters.openai_http import OpenAICompatibleProvider
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.fake_openai import FakeBackend


async def probe(base_url: str, model: str | None):
    provider = OpenAICompatibleProvider(base_url, timeout_s=30)
    try:
        return await provider.probe(model)
    finally:
        await provider.aclose()


async def test_not_loaded_and_not_pinned_is_the_smallest_default():
    with FakeOllama(["qwen2.5-coder:1.5b"]) as ollama:
        info = await probe(ollama.base_url, "qwen2.5-coder:1.5b")
    assert info.window_for("qwen2.5-coder:1.5b")[0] == SMALLEST_DEFAULT == 4096 and info.silent_cut
    assert "OLLAMA_CONTEXT_LENGTH" in (info.context_window_source or "")


@pytest.mark.parametrize(("pinned", "loaded", "window"), [(8192, None, 8192), (8192, 65536, 8192), (None, 32768, 32768)])
async def test_the_modelfiles_window_then_the_loaded_runners(pinned, loaded, window):
    with FakeOllama(["qwen2.5-coder:1.5b", "llama3.2:1b"]) as ollama:
        if pinned:
            ollama.num_ctx["qwen2.5-coder:1.5b"] = pinned
        if loaded:
            ollama.load({"qwen2.5-coder:1.5b": loaded, "llama3.2:1b": 131072})
        info = await probe(ollama.base_url, "qwen2.5-coder:1.5b")
        first = await probe(ollama.base_url, None)  # no model named: the first listed
    assert info.window_for("qwen2.5-coder:1.5b") == (window, info.context_window_source)
    assert first.window_for("qwen2.5-coder:1.5b")[0] == window


async def test_a_server_that_is_not_ollama_is_not_asked():
    with FakeBackend(models=[{"id": "gpt-x", "object": "model", "owned_by": "openai"}]) as other:
        info = await probe(other.base_url, "gpt-x")
    assert not info.silent_cut and not any(path.startswith("/api/") for _, path, _ in other.seen)
