"""The agent's `edit` tool, pure: a replacement applied only onto text the model has read, in the
version it read.

A turn keeps a ledger of what the model saw of each file: the version (its sha256) and the
lines shown. An edit is refused, with the reason told to the model, when the model never read
the file ("read it first"), when the file changed since it read it — the person typed in it, or
a formatter ran: their text is never overwritten by an edit made on an older version — or when
the text to replace lies outside the lines it was shown. The replacement itself needs `old` to
occur exactly once (small models' trailing spaces forgiven, nothing else). After the agent's own
edit, the new version is what the model knows: the lines it saw stay seen, moved by the edit."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Seen:
    version: str
    """the sha256 of the whole file as it was read"""
    lines: list[tuple[int, int]] = field(default_factory=list)
    """the line ranges shown (1-based, inclusive), merged"""

    def add(self, start: int, end: int) -> None:
        ranges = sorted([*self.lines, (start, end)])
        merged = [ranges[0]]
        for low, high in ranges[1:]:
            if low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        self.lines = merged

    def covers(self, start: int, end: int) -> bool:
        return any(low <= start and end <= high for low, high in self.lines)


_CHANGED = ("{path} changed since you read it (the person may be editing it): read it again, then make your edit "
            "on what it holds now.")


@dataclass(frozen=True)
class Applied:
    text: str
    """the file's new text"""
    start_line: int
    end_line: int
    """where the replacement lies in the new text (1-based, inclusive)"""


@dataclass(frozen=True)
class Refused:
    reason: str
    """for the model"""


@dataclass
class Ledger:
    """What the model saw of each file in one turn, by path."""

    seen: dict[str, Seen] = field(default_factory=dict)

    def read(self, path: str, text: str, start: int = 1, end: int | None = None) -> None:
        """The model was shown lines `start`..`end` (all: None) of `text`, the file's current version."""
        version = fingerprint(text)
        known = self.seen.get(path)
        if known is None or known.version != version:
            known = self.seen[path] = Seen(version)
        last = max(1, text.count("\n") + (0 if text.endswith("\n") or not text else 1))
        known.add(max(1, start), min(end or last, last))

    def edit(self, path: str, current: str | None, old: str, new: str) -> Applied | Refused:
        """`old` replaced by `new` in `current` (the file's text now, the editor's buffer when
        open; None: no such file), if the model may; the ledger then knows the new version."""
        if current is None:
            if old:
                return Refused(f"There is no file {path}. To make one, edit it with an empty old.")
            current = ""
        elif path not in self.seen and current:
            return Refused(f"Read {path} first: an edit is made only on text you have read.")
        known = self.seen.get(path)
        if known is not None and known.version != fingerprint(current):
            return Refused(_CHANGED.format(path=path))
        found = _find(current, old)
        if isinstance(found, Refused):
            return found
        return self._apply(path, current, *found, new)

    def edit_lines(self, path: str, current: str | None, start: int, end: int, new: str) -> Applied | Refused:
        """Lines `start`..`end` of `current` replaced by `new` (whole lines: a line break is
        added at its end where the replaced lines had one), if the model read those lines of
        this version."""
        if current is None:
            return Refused(f"There is no file {path}. Read the files you mean to change first.")
        if path not in self.seen:
            return Refused(f"Read {path} first: an edit is made only on text you have read.")
        lines = current.splitlines(keepends=True)
        if lines and (end < start or start > len(lines)):
            return Refused(f"{path} has {len(lines)} lines: lines {start}-{end} are not in it.")
        end = min(end, len(lines))
        begin = sum(len(line) for line in lines[:start - 1])
        replaced = "".join(lines[start - 1:end])
        if new and not new.endswith("\n") and replaced.endswith("\n"):
            new += "\n"
        return self._apply(path, current, begin, begin + len(replaced), new)

    def _apply(self, path: str, current: str, begin: int, finish: int, new: str) -> Applied | Refused:
        """Checks the version and the lines read, then replaces current[begin:finish]."""
        known = self.seen.get(path)
        if known is not None and known.version != fingerprint(current):
            return Refused(_CHANGED.format(path=path))
        first_line = current.count("\n", 0, begin) + 1
        last_line = first_line + _breaks(current[begin:finish])
        if known is not None and current and not known.covers(first_line, max(first_line, min(last_line, _lines(current)))):
            return Refused(f"Lines {first_line}-{last_line} of {path} are not among those you read: read them first.")
        text = current[:begin] + new + current[finish:]
        new_last = first_line + _breaks(new)
        added = new_last - last_line
        moved = Seen(fingerprint(text))
        for low, high in (known.lines if known is not None else []):
            if high < first_line:
                moved.add(low, high)
            elif low > last_line:
                moved.add(low + added, high + added)
            else:
                moved.add(low, max(high + added, low))
        moved.add(first_line, new_last)
        self.seen[path] = moved
        return Applied(text, first_line, new_last)


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _breaks(text: str) -> int:
    """Line breaks inside `text`, a final one not counted: the lines it spans, less one."""
    return text.count("\n") - (1 if text.endswith("\n") else 0) if text else 0


def _find(text: str, old: str) -> tuple[int, int] | Refused:
    """Where `old` is in `text`, once: exactly, else with trailing spaces of each line ignored."""
    if not old:
        if text:
            return Refused("old is empty, but the file is not: give the exact text to replace.")
        return (0, 0)
    count = text.count(old)
    if count == 1:
        begin = text.index(old)
        return (begin, begin + len(old))
    if count > 1:
        return Refused(f"The text to replace occurs {count} times: give more of its lines, so that it occurs once.")
    pattern = "\n".join(re.escape(line.rstrip()) + r"[ \t]*" for line in old.split("\n"))
    matches = list(re.finditer(pattern, text))
    if len(matches) == 1:
        return (matches[0].start(), matches[0].end())
    if len(matches) > 1:
        return Refused(f"The text to replace occurs {len(matches)} times: give more of its lines, so that it occurs once.")
    return Refused("The text to replace is not in the file as it is now: read the lines again and copy them exactly.")
