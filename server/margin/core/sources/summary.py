"""The thread's summary as a prompt source (core.summary): shown first after the system prompt;
the turns it folds are not shown. Cut after the history's turns."""

from __future__ import annotations

from margin.core.budget import Item, Section, SectionResult
from margin.core.sources.base import PER_MESSAGE_OVERHEAD, Draft, Part, Source
from margin.core.summary import SUMMARY_ROLE, Summary


class SummarySource(Source):
    """Input: the latest summary, or None."""

    name, at, default = "summary", 60, None

    def texts(self, given: Summary | None) -> list[str]:
        return [given.shown()] if given else []

    def prepare(self, draft: Draft) -> None:
        summary: Summary | None = draft.input(self)
        if summary is not None:  # the turns it folds are not shown; their files are sent again if need be
            draft.folded = summary.to_turn

    def section(self, draft: Draft) -> Section:
        summary: Summary | None = draft.input(self)
        items = (Item(f"summary of turns {summary.first_turn}–{summary.to_turn}",
                      draft.count(summary.shown()) + PER_MESSAGE_OVERHEAD, summary),) if summary else ()
        return Section(self.name, items, drop_reason="the turns after it came first")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return [Part(SUMMARY_ROLE, item.payload.shown()) for item in kept.kept]


SUMMARY = SummarySource()
