"""The C tokeniser (_fastterms.c) gives exactly what the Python one gives: the same sorted terms,
line count, counts and line numbers, on real code, on generated code, on arbitrary text and at
the edges (long words, non-ASCII, stopwords, 65,536 lines and more), also from several threads at
once (it releases the GIL).

The package is built with it wherever a C compiler is (scripts/setup.sh, CI), so its absence
fails here rather than leaving the index seven times slower unnoticed."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.retrieval import filedata
from margin.core.retrieval.terms import STOPWORDS
from tests.conftest import REPO


def both(text: str) -> tuple[tuple[object, ...], tuple[object, ...]]:
    c, python = filedata.from_text(text, "fp"), filedata.python_from_text(text, "fp")
    return ((c.lines, c.terms, c.counts.typecode, list(c.counts), list(c.positions)),
            (python.lines, python.terms, python.counts.typecode, list(python.counts), list(python.positions)))


def test_the_package_was_built_with_the_c_tokeniser():
    assert filedata.fast_tokeniser(), "margin.core.retrieval._fastterms did not import: run scripts/setup.sh"


def test_c_and_python_agree_on_every_text_file_of_this_repository():
    paths = [p for p in REPO.rglob("*") if p.suffix in {".py", ".md", ".c", ".ts", ".el", ".lua", ".toml", ".sh"}
             and ".venv" not in p.parts and "node_modules" not in p.parts]
    assert len(paths) > 200
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        c, python = both(text)
        assert c == python, path


def test_c_and_python_agree_at_the_edges():
    long_word = "".join(random.Random(7).choice(["Http", "URL", "x", "_", "2", "ies", "ING", "sed"]) for _ in range(3000))
    texts = [
        "", "\n", "\n\n\n", "_", "__init__", "a b c I", "x1 1x 12ab AB12 aB",
        "HTTPServer2 getHTTPResponseCode ABCDef x_Y_z a1b2 IOError résumé café_Bar\r\nclasses dies already_ings",
        "é\U0001F600abc_Def\nx\u00e9y" * 5, "\u0100lpha beta\u0101gamma",  # 2-byte and 4-byte str kinds
        " ".join(sorted(STOPWORDS)) + "\n" + "_".join(sorted(STOPWORDS)),
        "proxies cookies statuses class status passing feed needed is us ss ties ing ed eed",
        long_word, long_word.upper(), long_word.lower() + "\n" + long_word,
        "token\n" * 70_000,  # 4-byte counts and line numbers
        "token other\n" * 65_535, "token other\n" * 65_536,
    ]
    for text in texts:
        c, python = both(text)
        assert c == python, text[:80]


pieces = st.sampled_from(["HTTP", "Http", "http", "URL", "url", "ies", "ing", "ed", "eed", "s", "ss", "us", "is",
                          "_", "__", "0", "42", "x", "I", "the", "self", "def", " ", "\t", "\n", "\r\n", ".", "(",
                          "é", "\u0100", "\U0001F600", "\x00"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(pieces, st.text(max_size=12)), max_size=80).map("".join))
def test_c_and_python_agree_on_arbitrary_text(text):
    c, python = both(text)
    assert c == python


def test_the_tokeniser_gives_the_same_answers_from_several_threads_at_once():
    texts = [p.read_text(encoding="utf-8") for p in sorted((REPO / "server" / "margin").rglob("*.py"))[:40]]
    expected = [both(text)[1] for text in texts]
    failures: list[int] = []

    def run() -> None:
        for _ in range(3):
            for i, text in enumerate(texts):
                if both(text)[0] != expected[i]:
                    failures.append(i)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_the_c_tokeniser_refuses_what_is_not_a_str():
    from margin.core.retrieval import _fastterms

    with pytest.raises(TypeError, match="expects a str"):
        _fastterms.from_text(b"bytes")  # type: ignore[arg-type]
