"""What Margin writes to a terminal shows control sequences instead of running them. A model's
reply, a file's name or text from a repository may hold escape sequences that a terminal acts on
(OSC 52 sets the clipboard, others retitle the window, move the cursor, rewrite what was shown).
Written to a terminal, every control character but the line break and the tab is shown as text
(`\\x1b`); written to a file or a pipe, the text is left exactly as it is."""

from __future__ import annotations

import re
import sys
from typing import TextIO

_CONTROLS = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with its control characters shown as escapes (a CRLF line break stays a line break)."""
    return _CONTROLS.sub(lambda m: "\n" if m.group() == "\r\n" else f"\\x{ord(m.group()):02x}", text)


class VisibleControls:
    """A text stream that shows control characters before they reach the terminal behind it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(visible(text))
        return len(text)

    def writelines(self, lines: object) -> None:
        for line in lines:  # type: ignore[attr-defined]
            self.write(line)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def guard_terminal() -> None:
    """sys.stdout and sys.stderr show control characters when they are terminals."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, VisibleControls) and stream.isatty():
            setattr(sys, name, VisibleControls(stream))
