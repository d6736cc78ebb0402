from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.vfs import (
    Position,
    PositionEncoding,
    Range,
    SyncError,
    TextChange,
    VirtualFile,
    VirtualFileStore,
    choose_position_encoding,
    fingerprint,
)

ENCODINGS = list(PositionEncoding)
# Text rich in what breaks position code: astral-plane emoji, 2- and 3-byte characters, every
# kind of line break, tabs.
ALPHABET = st.sampled_from(list("ab \t\n\r") + ["\r\n", "é", "中", "😀", "𝒳", "\u200b"])
texts = st.lists(ALPHABET, max_size=60).map("".join)


def units(text: str, encoding: PositionEncoding) -> int:
    if encoding is PositionEncoding.UTF8:
        return len(text.encode("utf-8"))
    if encoding is PositionEncoding.UTF16:
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def test_fingerprint_is_sha256_of_the_exact_utf8_bytes():
    text = "x = '😀'\r\nprint(x)\n"
    expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert fingerprint(text) == f"sha256:{expected}"
    file = VirtualFile("file:///a", "python", 1, text)
    assert file.fingerprint == f"sha256:{expected}"
    assert fingerprint(text.replace("\r\n", "\n")) != file.fingerprint


def test_position_encoding_choice():
    assert choose_position_encoding(["utf-32", "utf-8", "utf-16"]) is PositionEncoding.UTF8
    assert choose_position_encoding(["utf-32", "utf-16"]) is PositionEncoding.UTF16
    assert choose_position_encoding(None) is PositionEncoding.UTF16


@pytest.mark.parametrize("encoding,column", [
    (PositionEncoding.UTF16, 3), (PositionEncoding.UTF8, 5), (PositionEncoding.UTF32, 2)])
def test_column_after_an_emoji_in_each_encoding(encoding, column):
    file = VirtualFile("file:///a", "txt", 1, "a😀b\r\nc")
    assert file.offset_at(Position(0, column), encoding) == 2
    assert file.position_at(2, encoding) == Position(0, column)


def test_past_the_end_positions_clamp_as_lsp_requires():
    file = VirtualFile("file:///a", "txt", 1, "ab\r\ncd")
    assert file.offset_at(Position(0, 50), PositionEncoding.UTF16) == 2  # before \r\n
    assert file.offset_at(Position(9, 0), PositionEncoding.UTF16) == 6
    assert file.line_count == 2


def test_column_inside_a_character_rounds_down_to_its_start():
    file = VirtualFile("file:///a", "txt", 1, "😀x")
    assert file.offset_at(Position(0, 1), PositionEncoding.UTF16) == 0
    assert file.offset_at(Position(0, 3), PositionEncoding.UTF8) == 0


@settings(max_examples=300)
@given(texts, st.sampled_from(ENCODINGS), st.data())
def test_position_offset_round_trip(text, encoding, data):
    file = VirtualFile("file:///a", "txt", 1, text)
    offset = data.draw(st.integers(0, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1  # no LSP position points between \r and \n
    position = file.position_at(offset, encoding)
    assert file.offset_at(position, encoding) == offset
    # The column counts the line's text before the offset in the encoding's units.
    line_start = file.line_starts[position.line]
    assert position.character == units(text[line_start:offset], encoding)


@settings(max_examples=300)
@given(texts, texts, st.sampled_from(ENCODINGS), st.data())
def test_incremental_change_equals_splicing_the_text(text, insert, encoding, data):
    file = VirtualFile("file:///a", "txt", 1, text)
    def addressable(offset: int) -> int:  # no LSP position points between \r and \n
        inside_crlf = 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"
        return offset - 1 if inside_crlf else offset

    a = addressable(data.draw(st.integers(0, len(text))))
    b = max(a, addressable(data.draw(st.integers(0, len(text)))))
    change = TextChange(insert, Range(file.position_at(a, encoding), file.position_at(b, encoding)))
    updated = file.with_changes(2, [change], encoding)
    assert updated.text == text[:a] + insert + text[b:]
    assert updated.version == 2 and file.text == text  # snapshots are immutable


def test_changes_apply_in_order_each_on_the_previous_result():
    store = VirtualFileStore(PositionEncoding.UTF16)
    store.open("file:///a", "python", 1, "one\ntwo\n")
    updated = store.change("file:///a", 2, [
        TextChange("ONE", Range(Position(0, 0), Position(0, 3))),
        TextChange("zero\n", Range(Position(0, 0), Position(0, 0))),
        TextChange("", Range(Position(2, 0), Position(3, 0))),
    ])
    assert updated.text == "zero\nONE\n"


def test_store_rejects_changes_it_cannot_apply_and_keeps_the_file():
    store = VirtualFileStore()
    with pytest.raises(SyncError, match="not open"):
        store.change("file:///missing", 1, [TextChange("x")])
    store.open("file:///a", "python", 5, "text")
    with pytest.raises(SyncError, match="after version 5"):
        store.change("file:///a", 4, [TextChange("old")])
    with pytest.raises(SyncError, match="ends before it starts"):
        store.change("file:///a", 6, [TextChange("x", Range(Position(0, 3), Position(0, 1)))])
    assert store.get("file:///a").text == "text" and store.get("file:///a").version == 5


def test_recently_edited_orders_by_last_edit():
    store = VirtualFileStore()
    for name in "abc":
        store.open(f"file:///{name}", "txt", 1, name)
    store.change("file:///b", 2, [TextChange("B")])
    store.change("file:///a", 2, [TextChange("A")])
    store.change("file:///b", 3, [TextChange("BB")])
    assert [f.uri for f in store.recently_edited()] == ["file:///b", "file:///a"]
    store.close("file:///b")
    assert [f.uri for f in store.recently_edited()] == ["file:///a"]


def test_fingerprint_is_computed_once_per_version():
    file = VirtualFile("file:///a", "txt", 1, "x" * 1000)
    assert file.fingerprint is file.fingerprint
    assert "x" * 10 not in repr(file)  # a repr never carries content
