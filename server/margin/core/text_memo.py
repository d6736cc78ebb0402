"""What was made from a text, kept by the text itself: a prompt is built from the same string
objects request after request (the stored thread, the open files' blocks), and a string keeps
its hash, so finding one again is a dict lookup, not a pass over its characters.

Bounded by the characters of the texts held: when the next text would pass the bound, all is
let go and keeping begins again (the texts of the current requests come back at once; no
bookkeeping per lookup, as a least-recently-used order would need)."""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")


class TextMemo(Generic[V]):
    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._kept: dict[str, V] = {}
        self._chars = 0

    def get(self, text: str) -> V | None:
        return self._kept.get(text)

    def put(self, text: str, value: V) -> None:
        """Keep `value` for `text` (a text longer than the bound is not kept)."""
        if self._chars + len(text) > self.max_chars:
            self._kept.clear()
            self._chars = 0
        if len(text) <= self.max_chars:
            self._kept[text] = value
            self._chars += len(text)
