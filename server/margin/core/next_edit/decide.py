"""What a next-edit answer becomes (SPEC M): the model's rewrite of the window around the cursor,
diffed against the window as it is into the smallest edits — or silence, with the reason, when
the window comes back unchanged, when the answer is no rewrite of the window (prose, a different
text, lines beyond it, cut off), or when an edit would undo the user's last edit.

Offsets are into the document's text as the model saw it; whoever shows the edits checks first
that the document is still that text (its version and fingerprint).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from margin.core.next_edit.history import Edit
from margin.core.next_edit.spans import changed_span

WINDOW_ABOVE = 10
WINDOW_BELOW = 10
"""the window: the cursor's line and ten lines on each side, 21 lines (Sweep's)"""
SIMILAR_ENOUGH = 0.5
"""of the window's lines, the share a rewrite keeps (difflib's ratio): below it, the answer is
another text, not this window edited"""


_FENCED = re.compile(r"^(`{3,})[^\n`]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)


def fenced_code(answer: str) -> str | None:
    """The code of a chat answer's first closed fenced block (None: there is none — prose, or an
    answer cut off before its block closed)."""
    found = _FENCED.search(answer)
    return found.group(2).removesuffix("\n") if found else None


@dataclass(frozen=True, slots=True)
class Window:
    start: int
    """its offset in the document"""
    text: str
    """its lines, joined by line breaks (no final one)"""
    first_line: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def window(text: str, line: int, above: int = WINDOW_ABOVE, below: int = WINDOW_BELOW) -> Window:
    """The lines [line - above, line + below] of `text` (those there are)."""
    lines = text.split("\n")
    first, last = max(0, line - above), min(len(lines), line + below + 1)
    start = sum(len(part) + 1 for part in lines[:first])
    return Window(start, "\n".join(lines[first:last]), first)


@dataclass(frozen=True, slots=True)
class Suggested:
    start: int
    end: int
    """the span of the document it replaces (offsets)"""
    text: str


@dataclass(frozen=True, slots=True)
class Decision:
    edits: tuple[Suggested, ...]
    silence: str | None = None
    """why nothing is shown: "unchanged", "not a rewrite", "cut off", "reverses the last edit" """


def _narrow(old: str, new: str, at: int) -> Suggested | None:
    """The replacement of `old` (at offset `at`) by `new`, less their common prefix and suffix."""
    if old == new:
        return None
    start, old_end, new_end = changed_span(old, new)
    return Suggested(at + start, at + old_end, new[start:new_end])


def _line_offsets(lines: list[str], start: int) -> list[int]:
    offsets = [start]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    return offsets


def decide(document: str, current: Window, rewrite: str | None, last: Edit | None = None,
           finished: bool = True) -> Decision:
    """The edits that make `current` (a window of `document`) into `rewrite`, or silence.
    `finished`: the answer ended by itself (not cut off at the output limit). `last`: the
    user's last edit, which no suggestion may undo."""
    if rewrite is None or not finished:
        return Decision((), "cut off")
    # Empty lines at the window's ends are not the model's to keep or drop (a window that reaches
    # the end of a file ends with one): both sides are compared without them.
    rewrite = rewrite.strip("\n")
    core = current.text.strip("\n")
    if rewrite == core:
        return Decision((), "unchanged")
    lead = len(current.text) - len(current.text.lstrip("\n"))
    old_lines, new_lines = core.split("\n"), rewrite.split("\n")
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    if matcher.ratio() < SIMILAR_ENOUGH or len(new_lines) > 2 * len(old_lines) + 2:
        return Decision((), "not a rewrite")
    offsets = _line_offsets(old_lines, current.start + lead)
    edits: list[Suggested] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        # whole lines i1..i2 become j1..j2; with their line breaks, as the text between offsets
        if i1 < i2:
            old = document[offsets[i1] : offsets[i2] - 1]
            new = "\n".join(new_lines[j1:j2])
            at = offsets[i1]
            if j1 == j2:  # lines removed: with one of their line breaks
                old, at = (document[offsets[i1] - 1 : offsets[i2] - 1], offsets[i1] - 1) if i1 > 0 else \
                    (document[offsets[i1] : offsets[i2]], offsets[i1])
        else:  # lines inserted before line i1
            at = offsets[i1] if i1 < len(old_lines) else offsets[i1] - 1
            old, new = "", ("\n".join(new_lines[j1:j2]) + "\n") if i1 < len(old_lines) else \
                ("\n" + "\n".join(new_lines[j1:j2]))
        narrowed = _narrow(old, new, at)
        if narrowed is not None:
            edits.append(narrowed)
    if not edits:
        return Decision((), "unchanged")
    if last is not None and _reverses(document, edits, last):
        return Decision((), "reverses the last edit")
    return Decision(tuple(edits))


def apply(text: str, edits: tuple[Suggested, ...]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text


def _reverses(document: str, edits: list[Suggested], last: Edit) -> bool:
    """Whether the edits put back the lines the user's last edit changed, as they were before it."""
    if last.old_lines == last.new_lines:
        return False
    changed = last.new_lines.count("\n") + 1
    lines = document.split("\n")
    if "\n".join(lines[last.line : last.line + changed]) != last.new_lines:
        return False  # the document no longer holds that edit where it was made
    result = apply(document, tuple(edits)).split("\n")
    restored = last.old_lines.count("\n") + 1
    return "\n".join(result[last.line : last.line + restored]) == last.old_lines


def near(document: str, cursor: int, edits: tuple[Suggested, ...]) -> Suggested | None:
    """The first edit an inline completion can carry: it starts at or after the cursor on the
    cursor's line and replaces nothing past that line. Returned as the replacement from the
    cursor on (the text between the cursor and the edit kept), so that an editor showing
    suggestions that begin at the cursor shows it."""
    line_end = document.find("\n", cursor)
    line_end = len(document) if line_end < 0 else line_end
    for edit in edits:
        if cursor <= edit.start <= line_end and edit.end <= line_end:
            return Suggested(cursor, edit.end, document[cursor : edit.start] + edit.text)
    return None
