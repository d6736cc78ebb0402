"""Completion post-processing: the golden cases (golden/*.json, one file per language) and
properties of `clean` over any raw output.

A golden case is {name, language, rules, prefix, suffix, raw, fim_tokens?, expected}, expected
being {text, replaces} or null. A text field may be a list of lines (joined with "\\n") for
readability. `rules` names what the case exercises; `source`, where given, is where the code
came from (the Python cases are mined from httpx's history by mine_python_cases.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from margin.core.completion import formats
from margin.core.completion.junk import Silence
from margin.core.completion.markup import KNOWN_TOKENS
from margin.core.completion.postprocess import MAX_LINES, CompletionContext, Suggestion, clean, judge

GOLDEN = Path(__file__).parent / "golden"
RULES = {"plain", "tokens", "think", "fence", "echo", "overlap", "next_line", "auto_close",
         "midline", "scope", "cap", "reindent", "trailing", "empty", "crlf"}


def _text(value: str | list[str]) -> str:
    return "\n".join(value) if isinstance(value, list) else value


def load_cases() -> list[dict]:
    cases = []
    for path in sorted(GOLDEN.glob("*.json")):
        for case in json.loads(path.read_text()):
            expected = case["expected"]
            cases.append({
                **case,
                "file": path.name,
                "prefix": _text(case["prefix"]),
                "suffix": _text(case["suffix"]),
                "raw": _text(case["raw"]),
                "expected": None if expected is None else
                Suggestion(_text(expected["text"]), expected["replaces"]),
            })
    return cases


CASES = load_cases()


JUNK_RULES = {"instructions", "file_copy", "misplaced"}
"""silence over junk (core/completion/junk.py): golden cases of their own (golden/junk.json)"""


def context_of(case: dict) -> CompletionContext:
    instructions = formats.fixed_text("chat", file_id="geo.py", language=case["language"]) \
        if case.get("instructions") == "chat" else ""  # the chat route's own prompt text
    return CompletionContext(case["prefix"], case["suffix"], case["language"],
                             tuple(case.get("fim_tokens", ())), instructions)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_case(case):
    got = clean(case["raw"], context_of(case))
    assert got == case["expected"], f"golden case {case['name']} ({case['file']})"


def test_the_golden_set_is_large_and_covers_every_rule_in_four_languages():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), [n for n, k in Counter(names).items() if k > 1]
    assert len(CASES) >= 200
    languages = Counter(c["language"] for c in CASES)
    assert {"python", "typescript", "rust", "go", "c"} <= set(languages), languages
    for case in CASES:
        assert case["rules"] and set(case["rules"]) <= RULES | JUNK_RULES, case["name"]
    for language in ("python", "typescript", "rust", "go", "c"):
        covered = {r for c in CASES if c["language"] == language for r in c["rules"]}
        assert RULES - {"crlf", "cap"} <= covered, (language, RULES - covered)


def test_each_junk_rule_has_golden_cases_silenced_and_kept_and_says_why():
    junk_cases = [c for c in CASES if set(c["rules"]) & JUNK_RULES]
    for rule in JUNK_RULES:
        mine = [c for c in junk_cases if rule in c["rules"]]
        assert any(c["expected"] is None for c in mine) and any(c["expected"] is not None for c in mine), rule
    for case in junk_cases:
        made = judge(case["raw"], context_of(case))
        if case["expected"] is None:
            assert made == Silence(case["silence"]), case["name"]
        else:
            assert made == case["expected"], case["name"]


def test_the_golden_expectations_apply_cleanly():
    """Every expected suggestion is non-blank and replaces only auto-closed characters."""
    for case in CASES:
        if (expected := case["expected"]) is not None:
            assert expected.text.strip(), case["name"]
            rest = case["suffix"].split("\n", 1)[0]
            assert expected.replaces <= len(rest.rstrip()), case["name"]


# --- properties -------------------------------------------------------------------------------

FAMILIES = [
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|endoftext|>", "<|fim_pad|>",
     "<|file_sep|>", "<|repo_name|>"),
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<|endoftext|>", "<file_sep>"),
    ("<PRE>", "<SUF>", "<MID>", "<EOT>"),
    ("[PREFIX]", "[SUFFIX]", "[MIDDLE]", "</s>"),
    (),
]
PIECES = ["x", "return x", "foo(", ")", "]", "}", "{", "\"", "'", "`", ";", ",", " ", "  ", "\t",
          "\n", "\n    ", "\n\t", "```", "```python\n", "<think>", "</think>", ":", "if x:", "end",
          "def f():", "fn main() {", "}\n", "  \n", "\r\n", "<|endoftext|>", *KNOWN_TOKENS[:6]]
LANGUAGES = ["python", "typescript", "javascript", "rust", "go", "c", "lua", "markdown"]


def pieces(tokens=()):
    return st.lists(st.sampled_from(PIECES + list(tokens)) | st.text(max_size=6), max_size=14).map("".join)


@st.composite
def any_request(draw):
    tokens = draw(st.sampled_from(FAMILIES))
    case = draw(st.sampled_from(CASES))
    context = CompletionContext(
        draw(st.sampled_from([case["prefix"][-300:], ""])) + draw(pieces()),
        draw(pieces()) + draw(st.sampled_from([case["suffix"][:300], ""])),
        draw(st.sampled_from(LANGUAGES)), tokens)
    return draw(pieces(tokens)), context


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(any_request())
def test_never_a_blank_suggestion_nor_a_special_token(request):
    raw, context = request
    got = clean(raw, context)
    if got is not None:
        assert got.text.strip()
        assert not any(t.strip() and t.strip() in got.text for t in context.fim_tokens)
        assert not any(t in got.text for t in KNOWN_TOKENS)
        assert got.text.count("\n") < MAX_LINES
        rest = context.suffix.replace("\r\n", "\n").split("\n", 1)[0]
        assert 0 <= got.replaces <= len(rest)


def _completed(case: dict) -> tuple[str, int, str]:
    """The document the case's expected suggestion makes, the cursor's offset in it, and its
    language."""
    expected = case["expected"]
    return (case["prefix"] + expected.text + case["suffix"][expected.replaces:],
            len(case["prefix"]), case["language"])


DOCUMENTS = [_completed(c) for c in CASES if c["expected"] is not None and "crlf" not in c["rules"]]


@st.composite
def cut_document(draw):
    """A real document cut around a cursor: (prefix, true middle within one line, suffix,
    language)."""
    document, focus, language = draw(st.sampled_from(DOCUMENTS))
    start = document.rfind("\n", 0, focus) + 1
    line_no = document.count("\n", 0, start) + draw(st.integers(-3, 3))
    lines = document.split("\n")
    line_no = min(max(line_no, 0), len(lines) - 1)
    start = sum(len(x) + 1 for x in lines[:line_no])
    line = lines[line_no]
    a = draw(st.integers(0, len(line)))
    b = draw(st.integers(a, len(line)))
    return document[: start + a], line[a:b], document[start + b:], language


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(cut_document())
def test_a_model_that_writes_the_middle_then_the_suffix_gets_the_middle(cut):
    prefix, middle, suffix, language = cut
    typed = prefix.rsplit("\n", 1)[-1]
    assume(middle.strip() and middle[0] not in " \t" and middle[-1] not in " \t")
    for a, b in ((typed[-1:], middle[:1]), (middle[-1:], suffix[:1])):  # not inside """ or ```
        assume(not (a == b and a in "\"'`"))
    assume(not middle.startswith(typed.lstrip()) or not typed.strip())
    assume(not any(t in middle for t in ("```", "<think>", "</think>", *KNOWN_TOKENS)))
    if not typed.strip():  # a whole line: not a repeat of the line above or below
        around = [x.strip() for x in (prefix.split("\n")[-2:-1] + suffix.split("\n")[1:])
                  if x.strip()][:2]
        assume(middle.strip() not in around)
    got = clean(middle + suffix, CompletionContext(prefix, suffix, language))
    assert got is not None
    assert prefix + got.text + suffix[got.replaces:] == prefix + middle + suffix


@st.composite
def cut_document_lines(draw):
    """A real document cut around a cursor, the true middle running over several lines."""
    document, focus, language = draw(st.sampled_from(DOCUMENTS))
    start = draw(st.integers(max(0, focus - 400), min(len(document), focus + 400)))
    end = draw(st.integers(start, min(len(document), start + 600)))
    return document[:start], document[start:end], document[end:], language


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(cut_document_lines())
def test_a_model_that_writes_the_middle_then_the_suffix_never_doubles_the_suffix(cut):
    prefix, middle, suffix, language = cut
    got = clean(middle + suffix, CompletionContext(prefix, suffix, language))
    if got is not None and got.text.startswith(middle) and len(got.text) > len(middle):
        # whatever it kept past the true middle must be what it replaces, not a second copy
        assert len(got.text) - got.replaces <= len(middle), (got, middle)


def test_a_lone_surrogate_in_the_answer_reaches_the_editor_as_a_replacement_character():
    """A backend's JSON can escape half a surrogate pair; the editor is sent valid Unicode, and a
    pair split by the escapes is one character again."""
    context = CompletionContext('label = "', '"\n', "python")
    assert clean("caf\udce9 \ud83d\ude00", context) == Suggestion("caf\ufffd \U0001f600", 0)
    assert "\ud800" not in clean("x\ud800", context).text


@pytest.mark.parametrize("typed,raw,expected", [
    ("ééé", "ééé```python\n", None),  # found by a property test under another seed
    ("ééé", "ééé```python", None),
    ("def f():\n    ret", "ret```python\nreturn 1\n```", "return 1"),
    ("def f():\n    ret", "def f():\n    ret```python\nurn 1\n```\n", "urn 1"),
])
def test_the_typed_text_again_then_a_fence_is_never_a_fence_suggestion(typed, raw, expected):
    got = clean(raw, CompletionContext(typed, "\n", "python"))
    assert (got.text if got else None) == expected


def test_in_markdown_a_fence_is_content():
    got = clean("ééé```python", CompletionContext("ééé", "", "markdown"))
    assert got is not None and got.text == "```python"
