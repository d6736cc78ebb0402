"""Chat bodies keep their message texts' JSON, and are byte for byte what `json=` sent before."""

import json

from hypothesis import given
from hypothesis import strategies as st

from margin.adapters import json_body
from margin.core.llm import ChatMessage, ToolCall
from margin.core.text_memo import TextMemo


def plain(body):
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200)
messages = st.builds(
    ChatMessage, st.sampled_from(["system", "user", "assistant", "tool"]), texts,
    st.lists(st.builds(ToolCall, texts, texts, texts), max_size=2).map(tuple), st.none() | texts)


@given(st.lists(messages, max_size=6), st.booleans(), st.none() | st.integers(1, 4096))
def test_a_body_is_the_same_bytes_as_before(sent, stream, max_tokens):
    body = {"messages": [m.as_json() for m in sent], "stream": stream}
    if max_tokens is not None:
        body |= {"max_tokens": max_tokens, "temperature": 0.2, "tools": [{"type": "function"}],
                 "response_format": {"type": "json_object"}}
    assert json_body.chat_body(body) == plain(body)
    assert json_body.chat_body(body) == plain(body)  # from what it kept


def test_texts_past_the_limit_are_still_encoded_right(monkeypatch):
    kept = TextMemo[str](10)
    monkeypatch.setattr(json_body, "_literals", kept)
    for text in ['a "quoted" line\n', "é\t\\", "short", "x" * 50, "short"]:
        body = {"messages": [{"role": "user", "content": text}], "stream": True}
        assert json_body.chat_body(body) == plain(body)
    assert kept.get("short") == '"short"' and kept.get("x" * 50) is None
