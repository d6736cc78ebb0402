"""Selection edits in core: instruction comments, the region replaced, the fitted replacement,
and the prompt within its budget."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.budget import Window
from margin.core.editops import ReplyRejected
from margin.core.selection_edit import (
    Diagnostic,
    EditInput,
    assemble_edit,
    edit_region,
    fence,
    find_instruction,
    fit_replacement,
    fix_instruction,
    parse_selection_reply,
    selection_reply_fragment,
    selection_reply_schema,
)


def words(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word or line break."""
    return len(text.split()) + text.count("\n")


# --- instruction comments ------------------------------------------------------------------

CODE = "import os\n# margin: make it iterative\ndef f(n):\n    return f(n - 1) if n else 0\n"


def selection(text: str, first: str, last: str) -> tuple[int, int]:
    start = text.index(first)
    end = text.index(last) + len(last)
    return start, end


def test_the_comment_on_the_line_above_the_selection_is_the_instruction():
    start, end = selection(CODE, "def f", "else 0\n")
    found = find_instruction(CODE, start, end)
    assert found is not None and found.text == "make it iterative"
    assert CODE[found.start:found.end] == "# margin: make it iterative\n"


def test_a_comment_inside_the_selection_counts_and_one_two_lines_up_does_not():
    text = "# margin: not this one\nx = 1\ny = 2\n    // Margin:  use a loop  \nz = 3\n"
    start, end = selection(text, "y = 2", "z = 3\n")
    found = find_instruction(text, start, end)
    assert found is not None and found.text == "use a loop"  # case-insensitive, trimmed
    start, end = selection(text, "y = 2", "y = 2\n")
    assert find_instruction(text, start, end) is None  # the line above is `x = 1`


@pytest.mark.parametrize("line, expected", [
    ("-- margin: add an index", "add an index"),
    ("/* margin: rename to total */", "rename to total"),
    ("<!-- margin: make it a list -->", "make it a list"),
    (" * margin: document the params", "document the params"),
    ("; margin: tidy", "tidy"),
    ("x = 1  # margin: trailing comments are code", None),
    ("# margin:", None),
    ("# the margin: is not at the start", None),
])
def test_comment_styles(line, expected):
    text = f"{line}\nvalue = compute()\n"
    start, end = selection(text, "value", "()\n")
    found = find_instruction(text, start, end)
    assert (found.text if found else None) == expected


def test_the_region_takes_in_the_comment_and_the_model_is_not_shown_it():
    start, end = selection(CODE, "def f", "else 0\n")
    region = edit_region(CODE, start, end, find_instruction(CODE, start, end))
    assert CODE[region.start:region.end] == "# margin: make it iterative\ndef f(n):\n    return f(n - 1) if n else 0\n"
    assert region.shown == "def f(n):\n    return f(n - 1) if n else 0\n"
    inside = "a = 1\n    # margin: swap\nb = 2\n"
    region = edit_region(inside, 0, len(inside), find_instruction(inside, 0, len(inside)))
    assert (region.start, region.end, region.shown) == (0, len(inside), "a = 1\nb = 2\n")
    assert edit_region(CODE, 3, 7, None).shown == CODE[3:7]


def test_fix_instruction_names_each_problem_by_line():
    text = fix_instruction([Diagnostic(4, "undefined name 'x'", "pyflakes", "F821"), Diagnostic(0, "unused")])
    assert "- line 5: undefined name 'x' (pyflakes F821)" in text and "- line 1: unused" in text


# --- the answer ----------------------------------------------------------------------------

def test_the_answer_is_validated_by_the_schema_the_prompt_shows():
    assert parse_selection_reply('{"replacement": "x = 2\\n"}') == "x = 2\n"
    assert json.dumps(selection_reply_schema(), separators=(",", ":")) in selection_reply_fragment()
    with pytest.raises(ReplyRejected, match="valid JSON"):
        parse_selection_reply("Sure, here is the code: x = 2")
    with pytest.raises(ReplyRejected, match="selection-edit schema"):
        parse_selection_reply('{"code": "x = 2"}')


@pytest.mark.parametrize("replacement, shown, file_text, expected", [
    ("a\nb", "x\ny\n", "x\ny\n", "a\nb\n"),  # the line break the selection ended with is kept
    ("a\nb\n", "x\ny", "x\ny", "a\nb"),  # and none is added where it had none
    ("a\nb\n", "x\r\ny\r\n", "x\r\ny\r\n", "a\r\nb\r\n"),  # CRLF files stay CRLF
    ("a\r\nb", "x\r\ny\r\n", "", "a\r\nb\r\n"),
    ("a b", "x", "x\r\ny\r\n", "a b"),  # one line: the file's style decides, nothing to change
    ("a\n", "x", "x\r\ny\r\n", "a"),
])
def test_the_replacement_is_fitted_to_the_file(replacement, shown, file_text, expected):
    assert fit_replacement(replacement, shown, file_text) == expected


def test_a_fence_is_longer_than_any_backtick_run_inside():
    assert fence("x = 1", "python") == "```python\nx = 1\n```"
    assert fence("s = '````'\n").startswith("`````\n")


# --- the prompt ----------------------------------------------------------------------------

def edit_input(before: str, shown: str, after: str, instruction: str = "rename x to total") -> EditInput:
    return EditInput("You rewrite code.", [("care", "Be careful with indentation.")], "src/a.py", "python",
                     before, shown, after, instruction)


def test_everything_is_sent_when_it_fits():
    edit = edit_input("import os\n", "x = 1\n", "print(x)\n")
    assembly = assemble_edit(edit, words, Window(4096, 100, "words", True))
    assert assembly.over_budget is None
    system, user = assembly.messages
    assert system.content == "You rewrite code.\n\nBe careful with indentation."
    assert "```python\nimport os\n```" in user.content and "```python\nprint(x)\n```" in user.content
    assert user.content.index("import os") < user.content.index("x = 1") < user.content.index("print(x)")
    assert user.content.endswith("Instruction: rename x to total")


def test_the_code_around_is_trimmed_farthest_lines_first_and_the_selection_stays_whole():
    before = "".join(f"before_{i} = {i}\n" for i in range(200))
    after = "".join(f"after_{i} = {i}\n" for i in range(200))
    shown = "".join(f"selected_{i} = {i}\n" for i in range(20))
    assembly = assemble_edit(edit_input(before, shown, after), words, Window(700, 100, "words", True))
    assert assembly.over_budget is None
    user = assembly.messages[1].content
    assert shown in user and "before_199 = 199\n" in user and "after_0 = 0\n" in user
    assert "before_0 = 0\n" not in user and "after_199 = 199\n" not in user
    report = assembly.plan.report()
    prefix = report.section("prefix")
    assert prefix.dropped and prefix.dropped[0].reason == "farthest from the selection"
    assert sum(words(m.content) for m in assembly.messages) <= assembly.plan.limit


def test_a_selection_too_large_for_the_window_is_over_budget_and_nothing_is_sent():
    shown = "word " * 2000
    assembly = assemble_edit(edit_input("a\n", shown, "b\n"), words, Window(1024, 100, "words", True))
    assert assembly.messages == [] and "Too large to send" in assembly.over_budget


@settings(max_examples=60, deadline=None)
@given(before=st.lists(st.text(alphabet="ab `\t", max_size=30), max_size=40),
       after=st.lists(st.text(alphabet="cd `\t", max_size=30), max_size=40),
       shown=st.text(alphabet="xy `\n", max_size=60),
       window=st.integers(min_value=200, max_value=900))
def test_what_is_sent_fits_and_keeps_the_selection_and_the_lines_nearest_it(before, after, shown, window):
    before_text = "".join(line + "\n" for line in before)
    after_text = "".join(line + "\n" for line in after)
    edit = edit_input(before_text, shown, after_text)
    assembly = assemble_edit(edit, words, Window(window, 50, "words", True), message_overhead=4)
    if assembly.over_budget:
        return
    user = assembly.messages[1].content
    assert fence(shown, "python") in user
    kept_before = assembly.plan.section("prefix")
    kept_text = kept_before.trimmed.text if kept_before.trimmed else before_text
    assert before_text.endswith(kept_text)  # a run of whole lines ending at the selection
    assert assembly.plan.total <= assembly.plan.limit
    assert sum(words(m.content) + 4 for m in assembly.messages) <= assembly.plan.limit
