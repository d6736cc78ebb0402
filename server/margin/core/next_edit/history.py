"""Each open document's recent edits, from the editor's changes (SPEC M), as a person would name
them: keystrokes close together in time and place make one edit; a pause (`pause_s`) or a change
elsewhere (more than `near_lines` lines away) starts the next. An edit that puts back what the
one before it changed is an undo: both go. The last `keep` edits are kept, with the text before
the oldest of them (what next-edit prompts show as "before the edits"); a change larger than
`max_chars` (a formatter, a checkout, a paste of a file) is no edit a person would name, and the
history starts again from the text it left. Forgotten when the document closes.

Each change is found by comparing the text before and after it (the longest common prefix and
suffix), so it does not matter how the editor sent it (ranges, several at once, or the whole
text). The edit still being made is part of what `edits()` returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from margin.core.next_edit.spans import changed_span

CONTEXT_LINES = 3
"""unchanged lines kept on each side of an edit (for diff-style prompts)"""


@dataclass(frozen=True, slots=True)
class Edit:
    start: int
    """where it starts, as an offset in the text before it"""
    old: str
    new: str
    line: int
    """the first line it touches (from 0), the same before and after it"""
    old_lines: str
    """the whole lines it touched, before it (no final line break)"""
    new_lines: str
    """those lines after it"""
    context_before: str
    """up to CONTEXT_LINES unchanged lines above, each with its line break"""
    context_after: str
    """up to CONTEXT_LINES unchanged lines below, each with its line break"""
    version: int
    """the document's version once it was made"""

    def undoes(self, other: Edit) -> bool:
        return self.start == other.start and self.old == other.new and self.new == other.old


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _line_end(text: str, offset: int) -> int:
    end = text.find("\n", offset)
    return len(text) if end < 0 else end


def _edit(before: str, after: str, version: int) -> Edit | None:
    start, old_end, new_end = changed_span(before, after)
    if start == old_end == new_end:
        return None
    first = _line_start(before, start)
    last_old, last_new = _line_end(before, old_end), _line_end(after, new_end)
    above = first
    for _ in range(CONTEXT_LINES):
        if above == 0:
            break
        above = _line_start(before, above - 1)
    below = last_new
    for _ in range(CONTEXT_LINES):
        if below >= len(after):
            break
        below = _line_end(after, below + 1)
    return Edit(start, before[start:old_end], after[start:new_end], before.count("\n", 0, first),
                before[first:last_old], after[first:last_new], before[above:first],
                after[last_new + 1 : below + 1] if last_new < len(after) else "", version)


class DocumentHistory:
    def __init__(self, text: str, version: int, *, pause_s: float = 1.0, near_lines: int = 2,
                 keep: int = 25, max_chars: int = 4000) -> None:
        self.pause_s, self.near_lines, self.keep, self.max_chars = pause_s, near_lines, keep, max_chars
        self.text = text
        self.version = version
        self.base = text
        """the text before the oldest kept edit"""
        self._closed: list[Edit] = []
        self._open: tuple[str, int, int, float] | None = None
        """the edit being made: the text before it, its span in the current text, its last change's time"""

    def changed(self, text: str, version: int, now: float) -> None:
        """The document is now `text` (at `version`, time `now` in seconds)."""
        before = self.text
        start, old_end, new_end = changed_span(before, text)
        if start == old_end == new_end:
            self.version = version
            return
        if max(old_end - start, new_end - start) > self.max_chars:
            self.text, self.version = text, version
            self._restart()
            return
        if self._open is not None:
            base, low, high, last = self._open
            if now - last <= self.pause_s and self._near(before, low, high, start, old_end):
                delta = new_end - old_end
                mapped = high if high <= start else high + delta if high >= old_end else new_end
                self._open = (base, min(low, start), max(mapped, new_end), now)
                self.text, self.version = text, version
                return
            self._close()
        self._open = (before, start, new_end, now)
        self.text, self.version = text, version

    def edits(self) -> list[Edit]:
        """The kept edits, oldest first, the one being made last."""
        current = self._current()
        if current is None:
            return list(self._closed)
        if self._closed and current.undoes(self._closed[-1]):
            return self._closed[:-1]  # being undone
        return [*self._closed, current]

    @property
    def original(self) -> str:
        """The text before the edits `edits()` returns."""
        if self._closed or self._open is None:
            return self.base
        return self._open[0]

    def _near(self, text: str, low: int, high: int, start: int, end: int) -> bool:
        """Whether the change [start, end) is within near_lines lines of the span [low, high)."""
        if start > high:
            return text.count("\n", high, start) <= self.near_lines
        if end < low:
            return text.count("\n", end, low) <= self.near_lines
        return True

    def _current(self) -> Edit | None:
        if self._open is None:
            return None
        return _edit(self._open[0], self.text, self.version)

    def _close(self) -> None:
        edit = self._current()
        base = self._open[0] if self._open is not None else self.text
        self._open = None
        if edit is None:
            return
        if not self._closed:
            self.base = base
        if self._closed and edit.undoes(self._closed[-1]):
            self._closed.pop()  # an undo: both go (the text is back to what it was before the one undone)
            return
        self._closed.append(edit)
        while len(self._closed) > max(self.keep - 1, 0):  # room for the edit that opens next
            oldest = self._closed.pop(0)
            self.base = self.base[: oldest.start] + oldest.new + self.base[oldest.start + len(oldest.old) :]

    def _restart(self) -> None:
        self._closed.clear()
        self._open = None
        self.base = self.text


class EditHistories:
    """The histories of the open documents, by URI."""

    def __init__(self, **options: float) -> None:
        self._options = options
        self._documents: dict[str, DocumentHistory] = {}

    def opened(self, uri: str, text: str, version: int) -> None:
        self._documents[uri] = DocumentHistory(text, version, **self._options)  # type: ignore[arg-type]

    def changed(self, uri: str, text: str, version: int, now: float) -> None:
        history = self._documents.get(uri)
        if history is None:
            self.opened(uri, text, version)
        else:
            history.changed(text, version, now)

    def closed(self, uri: str) -> None:
        self._documents.pop(uri, None)

    def get(self, uri: str) -> DocumentHistory | None:
        return self._documents.get(uri)
