"""The counters are exact where they claim to be, and the heuristic never under-counts."""

from __future__ import annotations

import json
from importlib import resources

import bpe_openai
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, UserMessage
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
from mistral_common.tokens.tokenizers.tekken import Tekkenizer

from margin.core.llm import ChatMessage
from margin.core.tokens import assets
from margin.core.tokens.counter import CountCache, heuristic_count, heuristic_counter
from margin.core.tokens.local import tekken_counter, tiktoken_counter
from tests.fixtures.corpus import corpus

CORPUS = corpus()
TEKKEN_FILES = ["tekken_240911", "tekken_240718"]


@pytest.fixture(scope="module", params=["o200k_base", "cl100k_base"])
def openai_pair(request):
    return tiktoken_counter(request.param), bpe_openai.get_encoding(request.param)


@pytest.fixture(scope="module", params=TEKKEN_FILES)
def tekken_pair(request):
    path = resources.files("mistral_common.data").joinpath(f"{request.param}.json")
    return tekken_counter(request.param), Tekkenizer.from_file(str(path))


@pytest.fixture(scope="module", params=["v3", "v7"])
def mistral_chat(request, tmp_path_factory):
    """Margin's counter and mistral-common's own encoder for the same instruct version. The
    shipped Tekken file is v3; for v7 (current models) mistral-common reads the same vocabulary
    with its config's version set to v7."""
    raw = json.loads(resources.files("mistral_common.data").joinpath("tekken_240911.json").read_bytes())
    raw["config"]["version"] = request.param
    path = tmp_path_factory.mktemp("tekken") / "tekken_240911.json"
    path.write_text(json.dumps(raw))
    return tekken_counter("tekken_240911", request.param), MistralTokenizer.from_file(str(path))


def test_corpus_is_varied():
    assert len(CORPUS) >= 40 and sum(map(len, CORPUS.values())) > 50_000


def test_tiktoken_counts_equal_an_independent_implementation(openai_pair):
    ours, reference = openai_pair
    for name, text in CORPUS.items():
        assert ours.count(text) == len(reference.encode_ordinary(text)), name


def test_tekken_fast_path_equals_mistral_common(tekken_pair):
    ours, reference = tekken_pair
    for name, text in CORPUS.items():
        assert ours.count(text) == len(reference.encode(text, bos=False, eos=False)), name


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_tekken_equals_mistral_common_on_arbitrary_text(tekken_pair, text):
    ours, reference = tekken_pair
    assert ours.count(text) == len(reference.encode(text, bos=False, eos=False))


def test_special_token_text_is_counted_as_ordinary_text(openai_pair):
    ours, _ = openai_pair
    assert ours.count("<|endoftext|>") > 1


PIECES = st.sampled_from(sorted(CORPUS.values(), key=len)[:30])
MESSAGE_TYPES = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(PIECES | st.just(""), max_size=2),
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), PIECES | st.just("")), max_size=6),
    PIECES,
)
def test_mistral_chat_framing_equals_encode_chat_completion(mistral_chat, systems, history, last):
    """Conversations shaped as Margin sends them: system messages first, the newest user
    message last (mistral-common refuses empty assistant messages; Margin never sends one)."""
    ours, reference = mistral_chat
    assume(all(text or role != "assistant" for role, text in history))
    messages = ([ChatMessage("system", text) for text in systems]
                + [ChatMessage(role, text) for role, text in history] + [ChatMessage("user", last)])
    request = ChatCompletionRequest(messages=[MESSAGE_TYPES[m.role](content=m.content) for m in messages])
    assert ours.count_chat_now(messages) == len(reference.encode_chat_completion(request).tokens)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_heuristic_never_under_counts_openai(encoding):
    exact = tiktoken_counter(encoding)
    for name, text in CORPUS.items():
        assert heuristic_count(text) >= exact.count(text), name


@pytest.mark.parametrize("name", TEKKEN_FILES)
def test_heuristic_never_under_counts_tekken(name):
    exact = tekken_counter(name)
    for label, text in CORPUS.items():
        assert heuristic_count(text) >= exact.count(text), label


async def test_heuristic_counter_is_marked_approximate_and_frames_generously(mistral_chat):
    counter = heuristic_counter()
    messages = [ChatMessage("system", "s"), ChatMessage("user", "hello there")]
    assert counter.exact is False and counter.name == "heuristic"
    assert await counter.count_chat(messages) >= mistral_chat[0].count_chat_now(messages)


def test_counts_are_cached_by_content():
    calls = []
    cache = CountCache()
    for text in ["a", "b", "a", "a"]:
        cache.get_or_count(text, lambda t: calls.append(t) or len(t))
    assert calls == ["a", "b"] and (cache.hits, cache.misses) == (2, 2)


def test_texts_past_the_front_are_still_counted_once():
    """The front holds a few characters here: the texts it lets go of are found by their hash,
    and an equal text that is another string object is a hit too."""
    calls = []
    cache = CountCache(front_chars=10)
    texts = ["abcdef", "ghijkl", "mnopqr", "abc" + "def", "x" * 50, "x" * 50, "ghijkl"]
    counts = [cache.get_or_count(text, lambda t: calls.append(t) or len(t)) for text in texts]
    assert counts == [6, 6, 6, 6, 50, 50, 6]
    assert calls == ["abcdef", "ghijkl", "mnopqr", "x" * 50]
    assert (cache.hits, cache.misses) == (3, 4)


def test_a_tampered_asset_is_refused(monkeypatch):
    monkeypatch.setitem(assets.TEKKEN_SHA256, "tekken_240911", "0" * 64)
    with pytest.raises(assets.AssetError, match="sha256"):
        tekken_counter("tekken_240911")


def test_a_missing_asset_is_named():
    with pytest.raises(assets.AssetError, match="unknown Tekken file"):
        tekken_counter("tekken_missing")
    with pytest.raises(assets.AssetError, match="no encoding named"):
        tiktoken_counter("p99k_base")
