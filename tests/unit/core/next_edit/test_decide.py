"""What a next-edit answer becomes: the smallest edits that make the window the model's rewrite
(exactly: applied, they give the rewrite), or silence with its reason — unchanged, not a
rewrite, cut off, or undoing the user's last edit."""

from __future__ import annotations

import itertools

from hypothesis import example, given
from hypothesis import strategies as st

from margin.core.next_edit.decide import Suggested, apply, decide, near, window
from margin.core.next_edit.history import DocumentHistory

DOC = ("import math\n\ndef area(radius):\n    return math.pi * r * r\n\n"
       "def perimeter(r):\n    return 2 * math.pi * r\n")


def test_the_next_edit_becomes_the_smallest_edit_in_the_document():
    current = window(DOC, 2)
    assert current.start == 0 and current.text == DOC and current.first_line == 0  # the whole file: it is short
    rewrite = DOC.replace("r * r", "radius * radius")
    decision = decide(DOC, current, rewrite)
    assert decision.silence is None
    at = DOC.index("r * r")
    assert decision.edits == (Suggested(at + 1, at + 5, "adius * radius"),)  # the smallest: "r" stays
    assert apply(DOC, decision.edits) == rewrite


def test_a_window_is_the_cursors_line_and_ten_on_each_side():
    text = "".join(f"line {n}\n" for n in range(40))
    middle = window(text, 20)
    assert middle.first_line == 10 and middle.text.split("\n") == [f"line {n}" for n in range(10, 31)]
    assert text[middle.start : middle.end] == middle.text
    end = window(text, 39)
    assert end.text.endswith("line 39\n")  # the file's last line break: an empty last line
    rewrite = end.text.replace("line 35", "line thirty-five").rstrip("\n")  # the model drops the empty line
    decision = decide(text, end, rewrite)
    assert apply(text, decision.edits) == text.replace("line 35", "line thirty-five")  # the file keeps its line break


def test_silence_when_unchanged_cut_off_or_not_a_rewrite():
    current = window(DOC, 2)
    assert decide(DOC, current, DOC).silence == "unchanged"
    assert decide(DOC, current, "\n" + DOC + "\n\n").silence == "unchanged"
    assert decide(DOC, current, DOC.replace("r * r", "radius * radius"), finished=False).silence == "cut off"
    assert decide(DOC, current, None).silence == "cut off"
    prose = "The function area should use radius instead of r.\nAlso perimeter."
    assert decide(DOC, current, prose).silence == "not a rewrite"
    assert decide(DOC, current, DOC + "\n".join(f"x{n} = {n}" for n in range(40))).silence == "not a rewrite"


def test_an_edit_that_undoes_the_users_last_edit_is_never_shown():
    before = DOC.replace("def area(radius):", "def area(r):")
    history = DocumentHistory(before, 1)
    history.changed(DOC, 2, 1.0)
    (last,) = history.edits()
    current = window(DOC, 2)
    back = decide(DOC, current, before, last)
    assert back.silence == "reverses the last edit" and back.edits == ()
    onward = decide(DOC, current, DOC.replace("r * r", "radius * radius"), last)
    assert onward.silence is None  # the edit the user's edit calls for
    both = decide(DOC, current, before.replace("r * r", "radius * radius"), last)
    assert both.silence == "reverses the last edit"  # one of its edits undoes it: nothing is shown


LINES = st.lists(st.sampled_from(["a", "b", "x = 1", "    return y", "", "def f():"]), min_size=1, max_size=12)


@given(LINES, LINES, st.data())
@example(["a", "b"], ["a"], None)
def test_applied_the_edits_give_exactly_the_rewrite(core, rewrite_lines, data):
    prefix, suffix = "head\n", "\ntail\n"
    document = prefix + "\n".join(core) + suffix
    current = window(document, 1, above=0, below=len(core) - 1)
    assert current.text == "\n".join(core)
    rewrite = "\n".join(rewrite_lines)
    decision = decide(document, current, rewrite)
    if decision.silence is None:
        lead = len(current.text) - len(current.text.lstrip("\n"))
        trail = len(current.text) - len(current.text.rstrip("\n"))
        expected = (prefix + current.text[:lead] + rewrite.strip("\n") + current.text[len(current.text) - trail :]
                    + suffix)
        assert apply(document, decision.edits) == expected
        assert all(e.start <= e.end for e in decision.edits)
        spans = sorted((e.start, e.end) for e in decision.edits)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # none overlap


def test_an_edit_on_the_cursors_line_at_or_after_it_goes_out_as_a_replacement_from_the_cursor():
    line = DOC.index("    return math.pi")
    at = DOC.index("r * r")
    edits = (Suggested(at + 1, at + 5, "adius * radius"),)
    found = near(DOC, line + 4, edits)  # the cursor before `return`
    assert found == Suggested(line + 4, at + 5, DOC[line + 4 : at + 1] + "adius * radius")
    assert apply(DOC, (found,)) == apply(DOC, edits)
    assert near(DOC, at + 1, edits) == edits[0]  # the cursor right at it
    assert near(DOC, at + 2, edits) is None  # it starts before the cursor
    assert near(DOC, DOC.index("def area"), edits) is None  # another line


def test_an_edit_reaching_past_the_cursors_line_is_not_near():
    line = DOC.index("    return math.pi")
    end = DOC.index("\n", line)
    across = (Suggested(end - 1, end + 1, "r2\n"),)  # it replaces the line break too
    assert near(DOC, line, across) is None
    inserting = (Suggested(end, end, "  # area\n    assert r > 0"),)  # a new line may come: nothing past it goes
    assert near(DOC, line, inserting) == Suggested(line, end, DOC[line:end] + inserting[0].text)
    assert near(DOC, 0, ()) is None
