"""The tokenizer service: background builds, remote counters, and the heuristic fallback."""

from __future__ import annotations

import logging

from margin.core.llm import ChatMessage
from margin.core.tokens.choice import TokenizerChoice
from margin.services.tokenizers import Tokenizers
from margin.wiring import make_llama_counter

O200K = TokenizerChoice("tiktoken", "o200k_base")
MISSING = TokenizerChoice("tekken", "tekken_that_does_not_exist")


async def test_preload_builds_in_the_background_and_counter_waits_for_it():
    tokenizers = Tokenizers(make_llama_counter)
    tokenizers.preload([O200K])
    assert tokenizers.state(O200K).state == "loading"  # preload returned before building
    counter = await tokenizers.counter(O200K, "http://unused/v1", 5)
    assert counter.name == "tiktoken:o200k_base" and counter.exact
    assert tokenizers.state(O200K).state == "ready"
    assert await counter.count_texts(["hello world"]) == [2]
    await tokenizers.aclose()


async def test_missing_asset_falls_back_to_heuristic_with_one_warning(caplog):
    tokenizers = Tokenizers(make_llama_counter)
    with caplog.at_level(logging.WARNING, logger="margin.services.tokenizers"):
        first = await tokenizers.counter(MISSING, "http://unused/v1", 5)
        second = await tokenizers.counter(MISSING, "http://unused/v1", 5)
    assert first is second and first.name == "heuristic" and first.exact is False
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "tekken_that_does_not_exist" in warnings[0].getMessage()
    state = tokenizers.state(MISSING)
    assert (state.name, state.exact) == ("heuristic", False) and state.state.startswith("unavailable")
    assert await first.count_chat([ChatMessage("user", "hi")]) > 1
    await tokenizers.aclose()


async def test_llama_cpp_choice_is_one_remote_counter_per_server():
    tokenizers = Tokenizers(make_llama_counter)
    choice = TokenizerChoice("llama.cpp")
    a = await tokenizers.counter(choice, "http://127.0.0.1:9/v1", 5)
    b = await tokenizers.counter(choice, "http://127.0.0.1:9/v1", 5)
    assert a is b and tokenizers.state(choice).state == "remote"
    await tokenizers.aclose()
