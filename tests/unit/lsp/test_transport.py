"""The scan that finds a message's id and method when the JSON parser cannot read the message."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from margin.lsp.transport import top_level

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
