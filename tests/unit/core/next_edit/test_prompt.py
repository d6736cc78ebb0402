"""The next-edit prompt (Sweep's format) under a budget: the windows are never cut; context files
go first (least recently edited first), then recent edits (oldest first); too little room for
the windows, or no edit yet, is silence."""

from __future__ import annotations

from margin.core import budget
from margin.core.next_edit import formats
from margin.core.next_edit.history import DocumentHistory
from margin.core.next_edit.prompt import original_line, sweep_prompt

LIMITS = budget.Window(context_window=8192, reserved_output=512, tokenizer="test", exact=True)
CODE = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(30))


def count(text: str) -> int:
    return len(text) // 4 + 1


def edited(times: int) -> DocumentHistory:
    history = DocumentHistory(CODE, 1)
    for n in range(times):  # each a separate edit: far apart and after a pause
        history.changed(history.text.replace(f"def f{n * 3}(x)", f"def f{n * 3}(value)"), n + 2, 10.0 * n)
    return history


def test_the_prompt_is_sweeps_format_with_the_windows_before_and_now():
    history = edited(2)
    line = history.text.split("\n").index("def f3(value):")
    found = sweep_prompt("m.py", history.text, line, history.edits(), history.original, [("util.py", "X = 1\n")],
                         count, LIMITS)
    assert found.silence is None and found.text is not None
    assert found.text.startswith("<|file_sep|>util.py\nX = 1\n\n<|file_sep|>m.py.diff\noriginal:\ndef f0(x):\n"
                                 "updated:\ndef f0(value):\n<|file_sep|>m.py.diff\noriginal:\ndef f3(x):\n")
    before = "\n".join(CODE.split("\n")[max(0, line - 10) : line + 11])
    assert "<|file_sep|>original/m.py\n" + before + "\n<|file_sep|>current/m.py\n" in found.text
    assert found.text.endswith(found.current.text + "\n<|file_sep|>updated/m.py")
    assert found.current.first_line == max(0, line - 10)
    assert found.plan is not None and found.plan.section("recent edits").tokens > 0


def test_what_does_not_fit_goes_context_files_first_then_the_oldest_edits():
    history = edited(4)
    line = history.text.split("\n").index("def f9(value):")
    files = [("new.py", "A = 1\n" * 40), ("old.py", "B = 2\n" * 40)]  # most recently edited first
    whole = sweep_prompt("m.py", history.text, line, history.edits(), history.original, files, count, LIMITS)
    assert whole.text is not None and "old.py" in whole.text and whole.text.count(".diff\n") == 4
    windows = whole.plan.section("windows").tokens
    one_file = sweep_prompt("m.py", history.text, line, history.edits(), history.original, files, count, LIMITS,
                            max_prompt_tokens=windows + 4 * 17 + 70)  # an edit is 17 tokens, a file 66
    assert one_file.text is not None and "new.py" in one_file.text and "old.py" not in one_file.text
    assert one_file.text.count(".diff\n") == 4
    two_edits = sweep_prompt("m.py", history.text, line, history.edits(), history.original, files, count, LIMITS,
                             max_prompt_tokens=windows + 2 * 17)
    assert two_edits.text is not None and "new.py" not in two_edits.text
    assert two_edits.text.count(".diff\n") == 2 and "def f0(x)" not in two_edits.text.split("original/")[0]
    assert "def f9(x)" in two_edits.text.split("original/")[0]  # the newest kept
    none = sweep_prompt("m.py", history.text, line, history.edits(), history.original, files, count, LIMITS,
                        max_prompt_tokens=windows - 1)
    assert none.text is None and none.silence is not None and none.silence.startswith("Too large to send")


def test_no_edit_no_prompt_and_a_special_token_is_never_sent():
    history = DocumentHistory(CODE, 1)
    assert sweep_prompt("m.py", CODE, 3, history.edits(), history.original, [], count, LIMITS).silence == "no recent edit"
    history.changed(CODE + "# <|file_sep|>\n", 2, 1.0)
    found = sweep_prompt("m.py", history.text, 3, history.edits(), history.original, [], count, LIMITS)
    assert found.text is None and "special token" in (found.silence or "")
    assert formats.FILE_SEP not in CODE


def test_the_cursor_line_before_the_edits():
    original = "a\nb\nc\nd\n"
    assert original_line(original, "a\nX\nY\nb\nc\nd\n", 5) == 3  # two lines added above: shifted
    assert original_line(original, "a\nb\nc\nd\n", 2) == 2
    assert original_line(original, "a\nB\nc\nd\n", 0) == 0  # above the first change
    assert original_line(original, "a\nd\n", 1) == 3  # two lines removed above
    assert original_line(original, "a\nB\nC\nD\nE\nF\nd\n", 4) == 2  # in a rewritten stretch: in proportion
