from __future__ import annotations

import pytest

from margin.core.models import FALLBACK_CONTEXT_WINDOW, is_reasoning_model, model_family, resolve_context_window
from margin.core.tokens.choice import choose_tokenizer


@pytest.mark.parametrize("setting,model,backend,name,exact", [
    ("auto", "gpt-5", None, "tiktoken:o200k_base", True),
    ("auto", "openai/gpt-4o-mini", "openai-compatible", "tiktoken:o200k_base", True),
    ("auto", "gpt-4-0613", None, "tiktoken:cl100k_base", True),
    ("auto", "devstral-small-2507", "llama.cpp", "tekken:tekken_240911@v7", True),
    ("auto", "Codestral-latest", None, "tekken:tekken_240911@v7", True),
    ("auto", "open-mistral-nemo", None, "tekken:tekken_240911@v3", True),
    ("auto", "gemma-3-270m", "llama.cpp", "llama.cpp", True),
    ("auto", None, "llama.cpp", "llama.cpp", True),
    ("auto", "qwen2.5-coder", "vllm", "vllm:qwen2.5-coder", True),
    ("auto", "qwen2.5-coder", "openai-compatible", "heuristic", False),
    ("vllm", "qwen2.5-coder", None, "vllm:qwen2.5-coder", True),
    ("auto", None, None, "heuristic", False),
    ("heuristic", "gpt-5", None, "heuristic", False),
    ("tiktoken:cl100k_base", "anything", None, "tiktoken:cl100k_base", True),
    ("tekken:tekken_240718", None, "llama.cpp", "tekken:tekken_240718@v7", True),
    ("llama.cpp", "gpt-5", "llama.cpp", "llama.cpp", True),
])
def test_tokenizer_choice(setting, model, backend, name, exact):
    choice = choose_tokenizer(setting, model, backend)
    assert (choice.name, choice.exact) == (name, exact)


def test_context_window_sources_in_order():
    assert resolve_context_window(16384, 4096, "props", "gpt-5") == (16384, "setting contextWindow")
    assert resolve_context_window("auto", 4096, "llama.cpp /props n_ctx", "gpt-5") == (4096, "llama.cpp /props n_ctx")
    assert resolve_context_window("auto", None, None, "gpt-5.1") == (400_000, "documented window of gpt-5.1")
    window, source = resolve_context_window("auto", None, None, "mystery-model")
    assert window == FALLBACK_CONTEXT_WINDOW and "set contextWindow" in source


def test_families_and_reasoning_models():
    assert model_family("mistralai/Devstral-Small-2505") == "mistral"
    assert model_family("llama-3") is None
    assert is_reasoning_model("gpt-5") and is_reasoning_model("o3-mini")
    assert not is_reasoning_model("gpt-5-chat-latest") and not is_reasoning_model("gpt-4o")
