"""The cheap lower bound (`fewest_tokens`: a length, no counting) is below every count Margin
makes, so what it refuses could never have fit; and counting a long text runs in a counting
thread, never on the event loop's, while a short one stays on it."""

from __future__ import annotations

import asyncio
import threading
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mistral_common.tokens.tokenizers.tekken import Tekkenizer

from margin.core.tokens.bound import shared_tokens
from margin.core.tokens.counter import LONGEST_TOKEN_BYTES, OFF_LOOP_CHARS, fewest_tokens, heuristic_counter
from margin.core.tokens.local import tekken_counter, tiktoken_counter
from tests.unit.core.tokens.test_counters import TEKKEN_FILES


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_no_openai_token_is_longer_than_the_bound_assumes(encoding):
    from margin.core.tokens.assets import openai_encoding_args
    from margin.core.tokens.local import _encoding

    assert max(map(len, _encoding(openai_encoding_args(encoding))._mergeable_ranks)) <= LONGEST_TOKEN_BYTES


@pytest.mark.parametrize("name", TEKKEN_FILES)
def test_no_tekken_token_is_longer_than_the_bound_assumes(name):
    tekken = Tekkenizer.from_file(str(resources.files("mistral_common.data").joinpath(f"{name}.json")))
    longest = max(len(tekken.id_to_byte_piece(i)) for i in range(tekken.num_special_tokens, tekken.n_words))
    assert longest <= LONGEST_TOKEN_BYTES


def test_no_token_of_the_bounds_table_is_longer_than_the_bound_assumes():
    assert max(map(len, shared_tokens())) <= LONGEST_TOKEN_BYTES


COUNTERS = {"o200k": tiktoken_counter("o200k_base"), "cl100k": tiktoken_counter("cl100k_base"),
            "tekken": tekken_counter(TEKKEN_FILES[0]), "heuristic": heuristic_counter()}


@settings(max_examples=60, deadline=None)
@given(piece=st.text(min_size=1, max_size=300), times=st.integers(1, 400))
def test_the_lower_bound_is_never_above_a_count(piece, times):
    """Long repetitive texts are where tokens are longest (runs of spaces, of `=`)."""
    text = piece * times
    for name, counter in COUNTERS.items():
        assert fewest_tokens(text) <= counter.count(text), name
    assert fewest_tokens(" " * 100_000) <= COUNTERS["o200k"].count(" " * 100_000)


def recording():
    """The heuristic counter, recording which thread each text was counted on."""
    seen: list[tuple[int, str]] = []
    made = heuristic_counter()
    count = made._encode_len

    def encode_len(text: str) -> int:
        seen.append((threading.get_ident(), text))
        return count(text)
    made._encode_len = encode_len
    return made, seen


async def test_a_long_text_is_counted_off_the_event_loop_and_a_short_one_on_it():
    made, seen = recording()
    loop_thread = threading.get_ident()
    long_text = "function(a,b){return a+b};" * (OFF_LOOP_CHARS // 20)
    assert await made.count_texts(["short one"]) == [made.count("short one")]
    assert seen[-1][0] == loop_thread
    await made.count_texts([long_text, "another"])
    assert {thread for thread, text in seen if text in (long_text, "another")} == {seen[-1][0]} != {loop_thread}
    seen.clear()
    assert await made.count_texts([long_text]) and seen == []  # counted once: the cache answers now


async def test_a_long_chat_is_counted_off_the_event_loop():
    from margin.core.llm import ChatMessage

    made, seen = recording()
    await made.count_chat([ChatMessage("user", "x = 1\n" * OFF_LOOP_CHARS)])
    assert seen and all(thread != threading.get_ident() for thread, _ in seen)


async def test_the_loop_answers_while_a_long_text_is_counted():
    """A task on the loop runs to its end while a 4 MB text is counted (the count is not done
    then: on the loop's own thread the task could not have run before it)."""
    made, _ = recording()
    text = "function(a,b){return a+b};" * 160_000
    counting = asyncio.ensure_future(made.count_texts([text]))
    ticks = 0
    while not counting.done() and ticks < 3:
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 3 and not counting.done()
    assert (await counting)[0] >= fewest_tokens(text)
