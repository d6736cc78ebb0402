"""The agent's edits land only on text the model read, in the version it read: never on a file
the person changed since, never on lines it was not shown, never where `old` is ambiguous."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core.agent.edits import Applied, Ledger, Refused

TEXT = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def test_an_edit_on_what_was_read_applies_and_the_new_version_is_known():
    ledger = Ledger()
    ledger.read("calc.py", TEXT)
    done = ledger.edit("calc.py", TEXT, "    return a - b\n", "    return a - b  # difference\n")
    assert isinstance(done, Applied) and (done.start_line, done.end_line) == (6, 6)
    assert done.text == TEXT.replace("a - b\n", "a - b  # difference\n")
    again = ledger.edit("calc.py", done.text, "    return a + b\n", "    return b + a\n")  # its own edit known
    assert isinstance(again, Applied) and "return b + a" in again.text


def test_a_file_never_read_is_refused_and_a_new_one_may_be_made():
    ledger = Ledger()
    assert ledger.edit("calc.py", TEXT, "a + b", "b + a") == Refused(
        "Read calc.py first: an edit is made only on text you have read.")
    made = ledger.edit("new.py", None, "", "x = 1\n")
    assert isinstance(made, Applied) and made.text == "x = 1\n"
    assert isinstance(ledger.edit("new.py", "x = 1\n", "x = 1", "x = 2"), Applied)  # made by it: known
    assert isinstance(ledger.edit("gone.py", None, "x", "y"), Refused)


def test_the_persons_typing_since_the_read_is_never_overwritten():
    ledger = Ledger()
    ledger.read("calc.py", TEXT)
    typed = TEXT.replace("def sub", "def subtract")  # the person renamed it meanwhile
    refused = ledger.edit("calc.py", typed, "    return a + b\n", "    return b + a\n")
    assert isinstance(refused, Refused) and "changed since you read it" in refused.reason
    ledger.read("calc.py", typed)
    assert isinstance(ledger.edit("calc.py", typed, "    return a + b\n", "    return b + a\n"), Applied)


def test_only_lines_that_were_shown_can_be_replaced():
    ledger = Ledger()
    ledger.read("calc.py", TEXT, 1, 2)
    refused = ledger.edit("calc.py", TEXT, "    return a - b\n", "    return b - a\n")
    assert refused == Refused("Lines 6-6 of calc.py are not among those you read: read them first.")
    assert isinstance(ledger.edit("calc.py", TEXT, "    return a + b\n", "    return b + a\n"), Applied)


def test_lines_read_after_an_edit_that_moved_them_stay_seen_where_they_went():
    ledger = Ledger()
    ledger.read("calc.py", TEXT, 1, 2)
    ledger.read("calc.py", TEXT, 5, 6)
    grown = ledger.edit("calc.py", TEXT, "    return a + b\n", "    total = a + b\n    return total\n")
    assert isinstance(grown, Applied)
    moved = ledger.edit("calc.py", grown.text, "    return a - b\n", "    return b - a\n")  # now line 7
    assert isinstance(moved, Applied) and (moved.start_line, moved.end_line) == (7, 7)
    unseen = ledger.edit("calc.py", moved.text, "\n\n\n", "\n\n")  # lines 3-5: never shown
    assert isinstance(unseen, Refused)


def test_old_must_occur_once_with_trailing_spaces_forgiven():
    ledger = Ledger()
    ledger.read("calc.py", TEXT)
    twice = ledger.edit("calc.py", TEXT, "(a, b):", "(x, y):")
    assert twice == Refused("The text to replace occurs 2 times: give more of its lines, so that it occurs once.")
    spaced = TEXT.replace("    return a + b\n", "    return a + b   \n")
    ledger.read("calc.py", spaced)
    loose = ledger.edit("calc.py", spaced, "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return b + a\n")
    assert isinstance(loose, Applied) and loose.text.startswith("def add(a, b):\n    return b + a\n\n")
    missing = ledger.edit("calc.py", loose.text, "return a * b", "x")
    assert isinstance(missing, Refused) and "not in the file" in missing.reason
    assert isinstance(ledger.edit("calc.py", loose.text, "", "x"), Refused)


LINES = st.lists(st.sampled_from(["x = 1", "y = 2", "def f():", "    return x", "", "# note", "z = x + y"]),
                 min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(lines=LINES, seen=st.tuples(st.integers(1, 12), st.integers(1, 12)), pick=st.tuples(st.integers(0, 11), st.integers(1, 3)),
       new=st.sampled_from(["", "w = 0\n", "a\nb\n", "q = 9\nr = 8\ns = 7\n"]))
def test_an_edit_is_the_plain_replacement_and_only_ever_of_lines_that_were_shown(lines, seen, pick, new):
    text = "".join(line + "\n" for line in lines)
    low, high = min(seen), max(seen)
    ledger = Ledger()
    ledger.read("f.py", text, low, high)
    first, count = min(pick[0], len(lines) - 1), pick[1]
    old = "".join(line + "\n" for line in lines[first:first + count])
    done = ledger.edit("f.py", text, old, new)
    last = first + len(lines[first:first + count])
    if text.count(old) == 1 and old.strip("\n"):
        shown = low <= first + 1 and last <= min(high, len(lines))
        if shown:
            assert isinstance(done, Applied) and done.text == text.replace(old, new, 1)
        else:
            assert isinstance(done, Refused)
    elif isinstance(done, Applied):  # spaces forgiven, or a blank-line run found once: still the plain replacement
        assert done.text.count(new) >= 1


def test_a_small_models_edit_replaces_whole_lines_it_read_by_number():
    text = "a = 1\nb = 2\nc = 3\n"
    ledger = Ledger()
    assert isinstance(ledger.edit_lines("f.py", text, 2, 2, "b = 20"), Refused)  # not read yet
    ledger.read("f.py", text, 1, 2)
    done = ledger.edit_lines("f.py", text, 2, 2, "b = 20")
    assert isinstance(done, Applied) and done.text == "a = 1\nb = 20\nc = 3\n" and (done.start_line, done.end_line) == (2, 2)
    assert "not among those you read" in ledger.edit_lines("f.py", done.text, 3, 3, "c = 30").reason
    assert "has 3 lines" in ledger.edit_lines("f.py", done.text, 5, 6, "x").reason
    two = ledger.edit_lines("f.py", done.text, 1, 2, "a = 1\nb = 2\nb2 = 3\n")
    assert two.text == "a = 1\nb = 2\nb2 = 3\nc = 3\n" and (two.start_line, two.end_line) == (1, 3)
    assert "changed since you read it" in ledger.edit_lines("f.py", text, 1, 1, "x").reason
