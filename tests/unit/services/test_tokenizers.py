"""The tokenizer service: background builds, remote counters, and the heuristic fallback."""

from __future__ import annotations

import logging

from margin.core.llm import ChatMessage
from margin.core.tokens.choice import TokenizerChoice
from margin.services.tokenizers import Tokenizers
from margin.wiring import make_server_counter

O200K = TokenizerChoice("tiktoken", "o200k_base")
MISSING = TokenizerChoice("tekken", "tekken_that_does_not_exist")


async def test_preload_builds_in_the_background_and_counter_waits_for_it():
    tokenizers = Tokenizers(make_server_counter)
    tokenizers.preload([O200K])
    assert tokenizers.state(O200K).state == "loading"  # preload returned before building
    counter = await tokenizers.counter(O200K, "http://unused/v1", 5)
    assert counter.name == "tiktoken:o200k_base" and counter.exact
    assert tokenizers.state(O200K).state == "ready"
    assert await counter.count_texts(["hello world"]) == [2]
    await tokenizers.aclose()


async def test_missing_asset_falls_back_to_heuristic_with_one_warning(caplog):
    tokenizers = Tokenizers(make_server_counter)
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
    tokenizers = Tokenizers(make_server_counter)
    choice = TokenizerChoice("llama.cpp")
    a = await tokenizers.counter(choice, "http://127.0.0.1:9/v1", 5)
    b = await tokenizers.counter(choice, "http://127.0.0.1:9/v1", 5)
    assert a is b and tokenizers.state(choice).state == "remote"
    await tokenizers.aclose()


def vllm_tokenize(encoding):
    """vLLM's /tokenize for a model whose tokenizer is `encoding` and whose chat template wraps
    each message in ChatML markers: a text (`prompt`) or a templated chat (`messages`)."""
    def answer(body):
        if "messages" in body:
            text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in body["messages"])
            text += "<|im_start|>assistant\n" if body.get("add_generation_prompt") else ""
            tokens = encoding.encode(text, allowed_special="all")
        else:
            tokens = encoding.encode_ordinary(body["prompt"])
        return {"count": len(tokens), "max_model_len": 32768, "tokens": tokens}
    return answer


async def test_a_vllm_model_is_counted_by_the_server_exactly():
    import tiktoken

    from margin.core.tokens.assets import openai_encoding_args
    from margin.core.tokens.choice import choose_tokenizer
    from tests.fakes.fake_openai import FakeBackend

    encoding = tiktoken.Encoding(**{**openai_encoding_args("cl100k_base"),
                                    "special_tokens": {"<|im_start|>": 100264, "<|im_end|>": 100265}})
    choice = choose_tokenizer("auto", "Qwen/Qwen2.5-Coder-7B-Instruct", "vllm")
    assert choice == TokenizerChoice("vllm", "Qwen/Qwen2.5-Coder-7B-Instruct")
    with FakeBackend(models=[{"id": "Qwen/Qwen2.5-Coder-7B-Instruct", "max_model_len": 32768}]) as fake:
        fake.tokenize = vllm_tokenize(encoding)
        tokenizers = Tokenizers(make_server_counter)
        counter = await tokenizers.counter(choice, fake.base_url, 5, "key-of-the-profile")
        text = "def variance(values):\n    m = mean(values)\n    return " + "aGVsbG8=" * 50
        assert await counter.count_texts([text, ""]) == [len(encoding.encode_ordinary(text)), 0]
        messages = [ChatMessage("system", "Be brief."), ChatMessage("user", text)]
        chat = await counter.count_chat(messages)
        assert chat == fake_chat_count(encoding, messages) and counter.exact
        state = tokenizers.state(choice)
        assert (state.name, state.exact, state.state) == ("vllm:Qwen/Qwen2.5-Coder-7B-Instruct", True, "remote")
        bodies = [body for path, body in fake.posts if path == "/tokenize"]
        assert bodies[0] == {"model": "Qwen/Qwen2.5-Coder-7B-Instruct", "prompt": text, "add_special_tokens": False}
        assert bodies[-1]["add_generation_prompt"] is True and len(bodies[-1]["messages"]) == 2
        # The profile's key goes with them, as with every request it sends to that server.
        assert {headers.get("authorization") for _, path, headers in fake.seen if path == "/tokenize"} == {
            "Bearer key-of-the-profile"}
        await tokenizers.aclose()


def fake_chat_count(encoding, messages) -> int:
    text = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"
    return len(encoding.encode(text, allowed_special="all"))


async def test_a_vllm_without_tokenize_is_counted_with_the_bound_and_said_to_be(caplog):
    from margin.core.tokens.bound import token_bound
    from tests.fakes.fake_openai import FakeBackend

    choice = TokenizerChoice("vllm", "m")
    with FakeBackend(models=[{"id": "m", "max_model_len": 4096}]) as fake:  # /tokenize: 404
        tokenizers = Tokenizers(make_server_counter)
        counter = await tokenizers.counter(choice, fake.base_url, 5)
        with caplog.at_level(logging.WARNING):
            assert await counter.count_texts(["QwErTy" * 30]) == [token_bound("QwErTy" * 30)]
            assert await counter.count_texts(["again"]) == [token_bound("again")]
        assert [r.levelno for r in caplog.records].count(logging.WARNING) == 1
        assert counter.exact is False and await counter.count_chat([ChatMessage("user", "hi")]) > 1
        state = tokenizers.state(choice)
        assert (state.name, state.exact) == ("heuristic", False) and state.state.startswith("unavailable: ")
        assert "/tokenize answered HTTP 404" in state.state
        assert len([p for p, _ in fake.posts if p == "/tokenize"]) == 1  # asked once, then not again
        await tokenizers.aclose()
