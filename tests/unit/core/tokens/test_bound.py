"""The token bound never under-counts an exact tokenizer, on text of any class; its parts are what
its proof says they are; and on ordinary code it stays close."""

from __future__ import annotations

import itertools

import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st

from margin.core.tokens import bound
from margin.core.tokens.assets import openai_encoding_args, tekken_encoding_args
from margin.core.tokens.counter import heuristic_count
from tests.fixtures.corpus import corpus, python_chunks
from tests.fixtures.token_texts import review_texts, texts

EXACT_NAMES = ["o200k_base", "cl100k_base", "tekken_240911", "tekken_240718"]


@pytest.fixture(scope="module")
def exact() -> dict[str, tiktoken.Encoding]:
    """Every exact tokenizer that runs in-process here (Gemma's is checked through llama.cpp in
    tests/e2e/test_real_llama_tokens.py)."""
    args = {name: openai_encoding_args(name) for name in EXACT_NAMES[:2]}
    args.update({name: tekken_encoding_args(name) for name in EXACT_NAMES[2:]})
    return {name: tiktoken.Encoding(**a) for name, a in args.items()}


def under_counts(text: str, exact: dict[str, tiktoken.Encoding]) -> dict[str, tuple[int, int]]:
    ours = bound.token_bound(text)
    counts = {name: len(enc.encode_ordinary(text)) for name, enc in exact.items()}
    return {name: (ours, count) for name, count in counts.items() if count > ours}


@settings(max_examples=3000, deadline=None)
@given(texts)
@example("aGVsbG8gd29ybGQ=" * 40)
@example(" " * 300 + "\n" * 40 + "\t" * 90)
@example("QwErTyUiOp" * 50)
def test_the_bound_never_under_counts_any_exact_tokenizer(exact, text):
    assert under_counts(text, exact) == {}


@pytest.mark.parametrize("label", list(review_texts()))
def test_the_texts_the_review_found_under_counted_are_bounded(exact, label):
    text = review_texts()[label]
    assert under_counts(text, exact) == {}
    assert heuristic_count(text) == bound.token_bound(text)  # the heuristic counter is the bound


def test_the_table_holds_only_strings_that_are_one_token_in_every_vocabulary():
    table = bound.shared_tokens()
    assert len(table) > 40_000
    for name in EXACT_NAMES:
        args = openai_encoding_args(name) if name.endswith("_base") else tekken_encoding_args(name)
        missing = [t for t in table if t not in args["mergeable_ranks"]]
        assert missing == [], (name, missing[:5])


def test_the_patterns_are_the_tokenizers_own():
    """PATTERNS restates the pre-tokenizers; the ones the machine has are compared verbatim."""
    assert bound.PATTERNS["o200k"] == openai_encoding_args("o200k_base")["pat_str"]
    assert bound.PATTERNS["cl100k"] == openai_encoding_args("cl100k_base")["pat_str"]
    for name in EXACT_NAMES[2:]:
        assert bound.PATTERNS["tekken"] == tekken_encoding_args(name)["pat_str"]


def brute_force_split_bound(data: bytes, table: frozenset[bytes], join_check: int) -> int:
    best = 0
    for cuts in itertools.product([False, True], repeat=len(data) - 1):
        pieces, start = [], 0
        for i, cut in enumerate(cuts, 1):
            if cut:
                pieces.append(data[start:i])
                start = i
        pieces.append(data[start:])
        if all(len(a + b) > join_check or a + b not in table for a, b in itertools.pairwise(pieces)):
            best = max(best, len(pieces))
    return best


@settings(max_examples=400, deadline=None)
@given(data=st.binary(min_size=1, max_size=11).map(lambda b: bytes(97 + x % 3 for x in b)),
       table=st.sets(st.text("abc", min_size=2, max_size=5).map(str.encode), max_size=40),
       join_check=st.integers(2, 6))
def test_split_bound_is_the_most_pieces_of_any_allowed_split(data, table, join_check):
    assert bound.split_bound(data, frozenset(table), join_check) == brute_force_split_bound(
        data, frozenset(table), join_check)


@pytest.mark.parametrize("r", [1, 2, 3, 5, 8])
def test_run_bound_equals_the_split_bound_of_a_run(r):
    table = frozenset(b"x" * j for j in range(2, r + 1))
    for n in range(1, 40):
        assert bound.run_bound(n, r) == bound.split_bound(b"x" * n, table, max(r, 2)), n


def test_a_chunk_that_is_a_token_costs_one_and_nothing_costs_more_than_its_bytes():
    assert bound.chunk_bound(" return") == 1
    assert bound.chunk_bound("        ") == 1
    assert bound.chunk_bound("é") == 1 and bound.chunk_bound("x") == 1
    for text in ["qzxjvk", "ZQXJ", "\U0001F600\U0001F680", "a" * (bound.SPLIT_LIMIT + 10)]:
        assert 1 <= bound.chunk_bound(text) <= len(text.encode())


def test_on_ordinary_code_the_bound_stays_close(exact):
    """Python and seven other languages from the test corpus: within 1.6x of the most any exact
    tokenizer spends (docs/benchmarks.md, "The token bound on httpx", gives the figure)."""
    code = "".join(python_chunks(800).values()) + "".join(
        corpus()[name] for name in ("javascript", "typescript", "rust", "go", "c", "sql", "html", "json"))
    most = max(len(enc.encode_ordinary(code)) for enc in exact.values())
    assert most <= bound.token_bound(code) <= 1.6 * most


@pytest.fixture(scope="module")
def assumed_tokenizers() -> dict[str, tiktoken.Encoding]:
    """Tokenizers made of nothing but the bound's assumptions: each pre-tokenizer of PATTERNS, a
    vocabulary of the 256 bytes and the shared strings, merged in two orders (shortest first, as
    BPE learns; and shuffled). Machines here have few tokenizers; these stand for the ones they
    do not have."""
    import random

    table = sorted(bound.shared_tokens(), key=lambda t: (len(t), t))
    shuffled = table[:]
    random.Random(22).shuffle(shuffled)
    made = {}
    for name, pattern in bound.PATTERNS.items():
        for order, strings in (("learned", table), ("shuffled", shuffled)):
            ranks = {bytes([b]): b for b in range(256)}
            ranks.update({t: 256 + i for i, t in enumerate(strings)})
            made[f"{name}/{order}"] = tiktoken.Encoding(name=f"{name}-{order}", pat_str=pattern,
                                                        mergeable_ranks=ranks, special_tokens={})
    return made


@settings(max_examples=600, deadline=None)
@given(texts)
@example(" UseClientDefault RequestExtensions QueryParamTypes AsyncByteStream")
def test_the_bound_holds_for_any_tokenizer_that_meets_its_assumptions(assumed_tokenizers, text):
    assert under_counts(text, assumed_tokenizers) == {}
