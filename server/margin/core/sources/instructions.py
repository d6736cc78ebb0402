"""Project instructions as a prompt source (core.instructions): required, in the system prompt
after the template's text; their own cap, applied when they are gathered, is what cuts them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from margin.core import instructions as rules
from margin.core.budget import Section, SectionResult
from margin.core.sources.base import SYSTEM, Draft, Part, Source


@dataclass(frozen=True)
class Rules:
    files: Sequence[rules.InstructionFile] = ()
    """the instruction files within their cap, farthest first"""
    cut: Sequence[str] = ()
    """the instruction files, or their ends, left out over the cap"""


class Instructions(Source):
    name, at, default = "instructions", 20, Rules()

    def texts(self, given: Rules) -> list[str]:
        return rules.texts_to_count(given.files)

    def section(self, draft: Draft) -> Section:
        given: Rules = draft.input(self)
        return rules.section(given.files, given.cut, draft.count)

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return [Part(SYSTEM, rules.render(draft.input(self).files))]


INSTRUCTIONS = Instructions()
