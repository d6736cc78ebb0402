"""Pinned memories as a prompt source: facts the user asked to remember, oldest first, in the
system prompt under one heading; cut oldest first, after files (the newest carries the heading,
so it goes last)."""

from __future__ import annotations

from collections.abc import Sequence

from margin.core.budget import Item, Section, SectionResult
from margin.core.sources.base import SYSTEM, Draft, Part, Source

MEMORIES_HEADING = "Facts the user asked you to remember:"


def memory_line(text: str) -> str:
    return "- " + " ".join(text.split())


def memories_text(memories: Sequence[str]) -> str:
    return "\n".join([MEMORIES_HEADING, *map(memory_line, memories)]) if memories else ""


class Memories(Source):
    """Input: the memories' texts, oldest first."""

    name, at, default = "memories", 30, ()

    def texts(self, given: Sequence[str]) -> list[str]:
        return [MEMORIES_HEADING, *map(memory_line, given)]

    def section(self, draft: Draft) -> Section:
        memories, count = draft.input(self), draft.count
        items = tuple(Item(f"memory {i + 1}", count(memory_line(text)) + 1
                           + (count(MEMORIES_HEADING) + 2 if i == len(memories) - 1 else 0), text)
                      for i, text in enumerate(memories))
        return Section(self.name, items, drop_reason="older than the memories kept")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return [Part(SYSTEM, memories_text([item.payload for item in kept.kept]))]


MEMORIES = Memories()
