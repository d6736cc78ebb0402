"""The event-stream reader: `data:` values as httpx's line splitting would give them, wherever the
chunks of the body happen to be cut."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.adapters.stream_shapes import event_data, json_of

BODY = (b": a comment\r\n"
        b"event: message\n"
        b"data: {\"a\": 1}\n\n"
        b"data:{\"b\": \"caf\xc3\xa9 \xe2\x9c\x93\"}\r\n\r\n"
        b"id: 7\r"
        b"data: {\"c\": 3}\r\r"
        b"data: [DONE]\n\n"
        b"data: {\"after\": true}")  # no line end at the very end


async def chunked(body: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in sorted(cuts):
        if start < cut:
            yield body[start:cut]
            start = cut
    if start < len(body):
        yield body[start:]


async def data_of(body: bytes, cuts: list[int]) -> list[bytes]:
    return [data async for data in event_data(chunked(body, cuts))]


async def httpx_data(body: bytes) -> list[bytes]:
    """What the same body gives through httpx's own aiter_lines."""
    response = httpx.Response(200, content=body)
    return [line[5:].strip().encode() async for line in response.aiter_lines() if line.startswith("data:")]


async def test_data_values_in_order() -> None:
    assert await data_of(BODY, []) == [b'{"a": 1}', '{"b": "café ✓"}'.encode(), b'{"c": 3}', b"[DONE]",
                                       b'{"after": true}']


@given(st.lists(st.integers(min_value=1, max_value=len(BODY) - 1), max_size=12))
async def test_the_same_wherever_the_chunks_are_cut(cuts: list[int]) -> None:
    assert await data_of(BODY, cuts) == await httpx_data(BODY)


async def test_every_byte_its_own_chunk() -> None:
    assert await data_of(BODY, list(range(1, len(BODY)))) == await httpx_data(BODY)


def test_json_of_reads_bytes_that_are_not_utf8_as_a_text_decoder_does() -> None:
    assert json_of('{"t": "ok ✓"}'.encode()) == {"t": "ok ✓"}
    assert json_of(b'{"t": "half \xe2\x9c"}') == {"t": "half \ufffd"}
    with pytest.raises(json.JSONDecodeError):
        json_of(b"not json")


def _json_of_as_before(data: bytes) -> Any:
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        return json.loads(data.decode("utf-8", "replace"))


def _outcome(read: Callable[[bytes], Any], data: bytes) -> tuple[str, Any]:
    try:
        return "value", read(data)
    except (ValueError, RecursionError) as error:
        return type(error).__name__, str(error)


_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                            max_leaves=8)


@settings(max_examples=400)
@given(st.one_of(
    _json_values.map(lambda value: json.dumps(value, ensure_ascii=False).encode()),
    st.tuples(_json_values, st.sampled_from(["", " ", "\n", "\ufeff", "x", "}", ","]),
              st.sampled_from(["", " ", "\r\n", "\ufeff", "x", "]"])).map(
        lambda t: (t[1] + json.dumps(t[0], ensure_ascii=False) + t[2]).encode()),
    st.binary(max_size=40),
    st.sampled_from([b"\xef\xbb\xbf{}", b'"\xed\xa0\x80"', b"NaN", b"-Infinity", b"", b"  ", b"[1,]", b"{\"a\":1}{"])))
def test_json_of_gives_what_json_loads_gives(data: bytes) -> None:
    """The scanner's way for a plain event gives the same value, or the same error, as
    `json.loads` (and the text decoder's U+FFFD for bytes that are not UTF-8)."""
    assert _outcome(json_of, data) == _outcome(_json_of_as_before, data)
