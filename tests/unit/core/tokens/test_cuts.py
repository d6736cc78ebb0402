"""Safe cuts (core/tokens/cuts.py): pieces whose token counts add up exactly to the count of the
whole, for every tokenizer Margin runs in-process, on real code and on random text built from the
characters that could break the rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.tokens.cuts import line_cuts_for
from margin.core.tokens.local import tekken_counter, tiktoken_counter

REPO = Path(__file__).resolve().parents[4]
COUNTERS = {
    "o200k_base": lambda: tiktoken_counter("o200k_base"),
    "cl100k_base": lambda: tiktoken_counter("cl100k_base"),
    "tekken_240911": lambda: tekken_counter("tekken_240911"),
    "tekken_240718": lambda: tekken_counter("tekken_240718"),
}


@pytest.fixture(scope="module", params=sorted(COUNTERS))
def counter(request):
    return COUNTERS[request.param]()


def tokens(counter, text: str) -> int:
    return counter._encode_len(text)  # the tokenizer itself, not the count cache


def real_code() -> list[str]:
    """Margin's own code, tests, scripts and docs: Python, JavaScript, Lua, shell, Markdown."""
    paths = [p for folder in ("server", "tests", "client-vscode", "scripts", "benchmarks")
             for p in sorted((REPO / folder).rglob("*"))
             if p.is_file() and p.suffix in {".py", ".mjs", ".js", ".ts", ".lua", ".sh", ".md", ".json", ".toml"}
             and "node_modules" not in p.parts]
    return [p.read_text(encoding="utf-8", errors="replace") for p in paths] + [
        p.read_text(encoding="utf-8") for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]]


def test_every_in_process_tokenizer_has_known_safe_cuts(counter):
    assert counter.line_cuts is not None, counter.name


def test_an_unknown_split_pattern_gets_no_cuts():
    assert line_cuts_for(r"\S+|\s+") is None


def test_pieces_add_up_on_real_code(counter):
    texts = real_code()
    assert len(texts) > 100
    wrong = []
    for text in texts:
        pieces = counter.line_cuts.pieces(text)
        assert "".join(pieces) == text
        if tokens(counter, text) != sum(tokens(counter, piece) for piece in pieces):
            wrong.append(text[:80])
    assert not wrong


TRICKY = st.lists(st.sampled_from(["\n", "\r\n", "\r", " ", "  ", "\t", "/", "//", "}", ")", ":", "a", "Ab",
                                   "'s", "'LL", "1", "2222", "\u00a0", "\u2028", "\x0c", "\x0b", "\x85", "\x1c",
                                   "é", "中", "#", " x", "*", "/*", "'", "\n\n", "  \n", "\t\n", "😀"]),
                  max_size=80).map("".join)


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_pieces_add_up_on_random_text(counter, text):
    pieces = counter.line_cuts.pieces(text)
    assert "".join(pieces) == text and all(pieces)
    assert all(piece.endswith("\n") for piece in pieces[:-1])
    assert tokens(counter, text) == sum(tokens(counter, piece) for piece in pieces)


def test_a_line_starting_with_a_slash_is_no_cut_where_punctuation_takes_it_in():
    """o200k takes the line break and the slashes after punctuation into one split: cutting before
    "//" would count one token too many, so the rule keeps that line with the one before."""
    counter = tiktoken_counter("o200k_base")
    text = "}\n// next\n"
    assert tokens(counter, text) != tokens(counter, "}\n") + tokens(counter, "// next\n")
    assert counter.line_cuts.pieces(text) == [text]
    assert tiktoken_counter("cl100k_base").line_cuts.pieces(text) == ["}\n", "// next\n"]
