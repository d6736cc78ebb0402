"""The template's fragments as prompt sources: its required text opens the system prompt and is
never cut; its optional fragments close it and are the last thing cut (SPEC D, E)."""

from __future__ import annotations

from collections.abc import Sequence

from margin.core.budget import Item, Section, SectionResult
from margin.core.sources.base import PER_MESSAGE_OVERHEAD, SYSTEM, Draft, Part, Source


class System(Source):
    """Input: the template's required fragments, joined."""

    name, at, default = "system", 10, ""

    def texts(self, given: str) -> list[str]:
        return [given]

    def section(self, draft: Draft) -> Section:
        tokens = draft.count(draft.input(self)) + PER_MESSAGE_OVERHEAD
        return Section(self.name, (Item("system prompt", tokens),), required=True, is_system=True)

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return [Part(SYSTEM, draft.input(self))]


class OptionalSystem(Source):
    """Input: (name, text) of the template's optional fragments, dropped first to last."""

    name, at, default = "optional system", 50, ()

    def texts(self, given: Sequence[tuple[str, str]]) -> list[str]:
        return [text for _, text in given]

    def section(self, draft: Draft) -> Section:
        items = tuple(Item(name, draft.count(text)) for name, text in draft.input(self))
        return Section(self.name, items, drop_reason="optional fragment; the rest did not fit")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        names = {item.id for item in kept.kept}
        return [Part(SYSTEM, text) for name, text in draft.input(self) if name in names]


SYSTEM_PROMPT = System()
OPTIONAL_SYSTEM = OptionalSystem()
