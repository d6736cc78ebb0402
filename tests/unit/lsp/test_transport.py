"""Reading the editor's messages: the thread that reads the stream, and the scan that finds a
message's id and method when the JSON parser cannot read the message."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.lsp.transport import PipeReader, top_level

KEYS = ("id", "method")


def test_the_outer_id_is_found_past_nesting_no_parser_can_read():
    deep = "[" * 100_000 + "]" * 100_000
    body = f'{{"jsonrpc":"2.0","method":"margin/chat","params":{{"id":7,"x":{deep}}},"id":"r-1"}}'
    assert top_level(body.encode(), KEYS) == {"method": "margin/chat", "id": "r-1"}


def test_keys_inside_strings_and_nested_objects_are_not_taken():
    body = r'{"params":{"id":1,"s":"\"id\": 2, {"},"note":"}\"id\":3","id":4}'
    assert top_level(body.encode(), KEYS) == {"id": 4}


def test_values_before_the_damage_are_kept_and_non_scalars_ignored():
    assert top_level(b'{"id": 12, "method": "margin/status", "params": {"a": [1, 2', KEYS) == {
        "id": 12, "method": "margin/status"}
    assert top_level(b'{"id": {"x": 1}, "method": true}', KEYS) == {}
    assert top_level(b'\xff\xfe not json', KEYS) == {}
    assert top_level(b'{"id": 1.5, "method": "a\\u00e9"}', KEYS) == {"method": "a\u00e9"}


@given(st.dictionaries(st.text(max_size=5), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12), max_size=4), st.integers() | st.text(max_size=8), st.text(max_size=12))
def test_the_scan_agrees_with_the_parser_on_any_message(extra, msg_id, method):
    message = {**extra, "id": msg_id, "method": method}
    assert top_level(json.dumps(message).encode(), KEYS) == {"id": msg_id, "method": method}
    assert top_level(json.dumps(message, ensure_ascii=False, indent=1).encode(), KEYS) == {"id": msg_id, "method": method}


# --- PipeReader: the editor's stream read by a thread, taken by the loop ----------------------

def framed(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_all(reader: PipeReader) -> list[bytes]:
    """The bodies, read as the server's loop reads them (transport.read_messages)."""
    bodies = []
    while header := await reader.readline():
        length = int(header.split(b":")[1])
        assert await reader.readline() == b"\r\n"
        bodies.append(await reader.readexactly(length))
    return bodies


def writing(fd: int, data: bytes, pieces: int) -> threading.Thread:
    """`data` written to `fd` in `pieces` parts from a thread (the editor), then the pipe closed."""
    def write() -> None:
        step = max(1, len(data) // pieces)
        for start in range(0, len(data), step):
            os.write(fd, data[start:start + step])
        os.close(fd)
    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.mark.parametrize("pieces", [1, 7, 1000])
async def test_a_pipe_gives_every_message_whole_and_in_order(pieces: int) -> None:
    bodies = [json.dumps({"id": n, "text": "é" * n * 37}).encode() for n in range(60)]
    read_end, write_end = os.pipe()
    thread = writing(write_end, b"".join(framed(b) for b in bodies), pieces)
    with os.fdopen(read_end, "rb") as stream:
        assert await read_all(PipeReader(stream)) == bodies
    thread.join()


async def test_bodies_larger_than_the_limit_still_arrive() -> None:
    """The thread pauses while more than `limit` bytes wait, unless the loop needs more: a body
    over the limit is read whole, not waited for for ever."""
    bodies = [b"x" * 300_000, b"y" * 10, b"z" * 200_000]
    read_end, write_end = os.pipe()
    thread = writing(write_end, b"".join(framed(b) for b in bodies), 50)
    with os.fdopen(read_end, "rb") as stream:
        assert await read_all(PipeReader(stream, limit=1000)) == bodies
    thread.join()


async def test_a_stream_with_no_file_and_a_cut_end() -> None:
    stream = io.BytesIO(framed(b'{"a": 1}') + b"Content-Length: 50\r\n\r\n{\"cut")
    reader = PipeReader(stream)
    assert await reader.readline() == b"Content-Length: 8\r\n"
    assert await reader.readline() == b"\r\n"
    assert await reader.readexactly(8) == b'{"a": 1}'
    assert await reader.readline() == b"Content-Length: 50\r\n"
    assert await reader.readline() == b"\r\n"
    assert await reader.readexactly(50) == b'{"cut'  # fewer at the end, as a file's read gives
    assert await reader.readline() == b""
