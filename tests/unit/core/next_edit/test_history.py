"""Edit history per document (SPEC M): changes coalesced into edits a person would name, by pause
and by place; an undo recognised; bounded; each edit replays exactly from the text before it."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from margin.core.next_edit.history import DocumentHistory, EditHistories
from margin.core.next_edit.spans import changed_span

TEXT = "import math\n\ndef area(r):\n    return math.pi * r * r\n\ndef perimeter(r):\n    return 2 * math.pi * r\n"


def typed(history: DocumentHistory, at: int, word: str, now: float, step: float = 0.1) -> float:
    """`word` typed a character at a time at offset `at`; the time after the last key."""
    for i, char in enumerate(word):
        text = history.text
        history.changed(text[: at + i] + char + text[at + i :], history.version + 1, now)
        now += step
    return now - step


def replay(original: str, history: DocumentHistory) -> str:
    text = original
    for edit in history.edits():
        assert text[edit.start : edit.start + len(edit.old)] == edit.old
        text = text[: edit.start] + edit.new + text[edit.start + len(edit.old) :]
    return text


def test_keystrokes_close_in_time_and_place_are_one_edit_with_its_lines_and_context():
    history = DocumentHistory(TEXT, 1)
    at = TEXT.index("r):") + 1
    typed(history, at, "adius", 10.0)  # def area(r): → def area(radius):
    (edit,) = history.edits()
    assert (edit.old, edit.new, edit.line) == ("", "adius", 2)
    assert (edit.old_lines, edit.new_lines) == ("def area(r):", "def area(radius):")
    assert edit.context_before == "import math\n\n" and edit.context_after == "    return math.pi * r * r\n\n" \
        "def perimeter(r):\n"
    assert history.original == TEXT and edit.version == 6


def test_a_pause_or_a_change_elsewhere_starts_the_next_edit():
    history = DocumentHistory(TEXT, 1)
    now = typed(history, TEXT.index("r):") + 1, "adius", 10.0)
    body = history.text.index("r * r")
    history.changed(history.text[:body] + "radius * radius" + history.text[body + 5 :], 8, now + 0.2)  # near: one line down
    assert len(history.edits()) == 1
    far = history.text.index("2 * math")
    history.changed(history.text[:far] + "2.0" + history.text[far + 1 :], 9, now + 0.4)  # four lines down
    assert [e.new for e in history.edits()] == ["adius):\n    return math.pi * radius * radius", ".0"]
    later = history.text.index("perimeter")
    history.changed(history.text[:later] + "circumference" + history.text[later + 9 :], 10, now + 5.0)  # a pause
    assert [(e.old_lines, e.new_lines) for e in history.edits()][-2:] == [
        ("    return 2 * math.pi * r", "    return 2.0 * math.pi * r"),
        ("def perimeter(r):", "def circumference(r):")]
    assert replay(TEXT, history) == history.text


def test_an_undo_takes_both_edits_away_and_typing_then_deleting_is_no_edit():
    history = DocumentHistory(TEXT, 1)
    typed(history, 0, "# area\n", 1.0)
    history.changed(TEXT, 9, 5.0)  # undone after a pause
    assert history.edits() == []
    history.changed(TEXT + "x", 10, 9.0)
    assert [e.new for e in history.edits()] == ["x"]
    history.changed(TEXT, 11, 9.1)  # deleted again at once
    assert history.edits() == []
    history.changed(TEXT + "y", 12, 20.0)
    assert [e.new for e in history.edits()] == ["y"] and replay(history.original, history) == history.text


def test_only_the_last_edits_are_kept_and_the_original_moves_with_them():
    history = DocumentHistory(TEXT, 1, keep=5)
    for n in range(8):
        history.changed(history.text + f"x{n} = {n}\n\n\n\n", n + 2, 10.0 * n)
    assert len(history.edits()) == 5
    assert replay(history.original, history) == history.text
    assert history.original == TEXT + "".join(f"x{n} = {n}\n\n\n\n" for n in range(3))


def test_a_change_too_large_to_be_an_edit_starts_the_history_again():
    history = DocumentHistory(TEXT, 1, max_chars=100)
    history.changed(TEXT + "a", 2, 1.0)
    history.changed(TEXT + "a" + "b" * 500, 3, 5.0)  # a paste of a file, a formatter
    assert history.edits() == [] and history.original == history.text


def test_histories_follow_open_change_and_close():
    histories = EditHistories(pause_s=0.5)
    histories.opened("file:///a.py", "x = 1\n", 1)
    histories.changed("file:///a.py", "x = 2\n", 2, 1.0)
    history = histories.get("file:///a.py")
    assert history is not None and [e.new for e in history.edits()] == ["2"] and history.pause_s == 0.5
    histories.closed("file:///a.py")
    assert histories.get("file:///a.py") is None


def test_the_changed_span_is_the_shortest_that_explains_the_change():
    assert changed_span("abcdef", "abXef") == (2, 4, 3)
    assert changed_span("aaaa", "aaaaa") == (4, 4, 5)
    assert changed_span("same", "same") == (4, 4, 4)


@given(st.text(alphabet="ab\n ", max_size=60), st.data())
def test_every_history_replays_from_its_original_to_the_text(text, data):
    history = DocumentHistory(text, 0, keep=data.draw(st.integers(1, 6)), near_lines=1, max_chars=8)
    now = 0.0
    for version in range(1, data.draw(st.integers(1, 30)) + 1):
        current = history.text
        start = data.draw(st.integers(0, len(current)))
        end = data.draw(st.integers(start, min(len(current), start + 5)))
        new = data.draw(st.text(alphabet="abc\n", max_size=4))
        now += data.draw(st.sampled_from([0.05, 0.3, 2.0]))
        history.changed(current[:start] + new + current[end:], version, now)
        edits = history.edits()
        assert replay(history.original, history) == history.text
        assert len(edits) <= history.keep
        assert all(e.old != e.new for e in edits)
        assert all(not b.undoes(a) for a, b in itertools.pairwise(edits))
