"""Counting with llama.cpp's /tokenize against the fake backend over real loopback HTTP: the
connection faults a model server shows (tests/e2e/test_real_llama_tokens.py checks the counts
themselves against the real server)."""

from __future__ import annotations

import pytest

from margin.adapters.llama_tokens import LlamaCppCounter
from margin.core.llm import MalformedResponse
from tests.fakes.fake_openai import FakeBackend, hang_up


@pytest.fixture
def fake():
    with FakeBackend() as backend:
        backend.tokenize = lambda body: {"tokens": list(range(len(body["content"].split())))}
        yield backend


async def test_a_count_whose_connection_was_dropped_before_any_answer_is_asked_again(fake):
    counter = LlamaCppCounter(fake.base_url, timeout_s=5)
    fake.routes["/tokenize"] = [hang_up()]
    try:
        assert await counter.count_texts(["one two three"]) == [3]
    finally:
        await counter.aclose()
    assert [path for path, _ in fake.posts] == ["/tokenize"] * 2
    assert counter.exact and counter.fallback is None  # a dropped connection is not "no tokenizer"


async def test_a_tokenizer_that_keeps_hanging_up_is_an_error_after_one_more_try(fake):
    counter = LlamaCppCounter(fake.base_url, timeout_s=5)
    fake.routes["/tokenize"] = [hang_up(), hang_up()]
    try:
        with pytest.raises(MalformedResponse, match="closed the connection before replying"):
            await counter.count_texts(["one two three"])
    finally:
        await counter.aclose()
    assert len(fake.posts) == 2
