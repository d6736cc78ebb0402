"""A kind of context the tests add through the registry, as a new feature would: the problems
the editor reports, most severe first. Shown after the snippets and before the open files;
cut after the snippets and before the files, the least severe first."""

from __future__ import annotations

from collections.abc import Sequence

from margin.core.budget import Item, Section, SectionResult
from margin.core.sources.base import PER_MESSAGE_OVERHEAD, Draft, Part, Source

HEADING = "Problems the editor reports:"


class Diagnostics(Source):
    """Input: the problems' texts, most severe first."""

    name, at, default = "diagnostics", 85, ()

    def texts(self, given: Sequence[str]) -> list[str]:
        return [HEADING, *given]

    def section(self, draft: Draft) -> Section:
        problems, count = draft.input(self), draft.count
        items = [Item(f"problem {i + 1}", count(text) + 1 + (count(HEADING) + PER_MESSAGE_OVERHEAD if i == 0 else 0),
                      text) for i, text in enumerate(problems)]
        return Section(self.name, tuple(items[::-1]), drop_reason="less severe than the problems kept")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        problems = [item.payload for item in kept.kept][::-1]
        return [Part("user", "\n".join([HEADING, *problems]))] if problems else []


DIAGNOSTICS = Diagnostics()
