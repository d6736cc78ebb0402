"""The token bound against Gemma 3's tokenizer, counted by the real llama.cpp server (`/tokenize`):
Gemma is a SentencePiece model with no pre-tokenizer, outside the bound's proof, so it is checked
here on the same generated text as the in-process tokenizers are (tests/unit/core/tokens/test_bound.py)."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from margin.core.tokens.bound import shared_tokens, token_bound
from tests.conftest import REPO
from tests.fixtures.corpus import corpus
from tests.fixtures.token_texts import review_texts, texts

pytestmark = pytest.mark.llama


@pytest.fixture(scope="module")
def gemma_count(llama_server):
    client = httpx.Client(timeout=120)

    def count(text: str) -> int:
        answer = client.post(f"{llama_server.root}/tokenize", json={"content": text, "add_special": False})
        answer.raise_for_status()
        return len(answer.json()["tokens"])

    yield count
    client.close()


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
def test_the_bound_never_under_counts_gemma(gemma_count, text):
    assert gemma_count(text) <= token_bound(text)


def test_the_review_texts_and_the_corpus_are_bounded_for_gemma(gemma_count):
    for label, text in {**review_texts(), **corpus()}.items():
        assert gemma_count(text) <= token_bound(text), label


def test_shared_strings_are_one_gemma_token_and_the_table_is_as_built(gemma_count):
    sample = sorted(shared_tokens())[::100]
    assert [s for s in sample if gemma_count(s.decode()) != 1] == []
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "build_shared_tokens.py"), "--check"],
                           cwd=REPO, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
