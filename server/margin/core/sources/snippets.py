"""Retrieved snippets as a prompt source (seed 002's memory share): windows of workspace files
relevant to the message, sent and retained like files. They fill, in rank order, a share of the
room the required parts leave (less what the history already shows of them), and borrow what
the rest leaves unused; what passes the share is reported cut. Under pressure they go before
files."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from margin.core.budget import Item, Section, SectionResult
from margin.core.sources.base import FILL, HISTORY, Draft, FileRef, Part, Source, items_of, sent_parts


@dataclass(frozen=True)
class Snippets:
    refs: Sequence[FileRef] = ()
    """most relevant first"""
    share: float = 0.3
    """the share of the room the required parts leave that snippets may fill (more when the
    rest leaves room unused)"""


def pack(ranked: Sequence[Item], cap: int) -> tuple[list[Item], list[Item]]:
    """Seed 002's packing: items in rank order until the next one would pass `cap`; the rest."""
    spent = 0
    for at, item in enumerate(ranked):
        if spent + item.tokens > cap:
            return list(ranked[:at]), list(ranked[at:])
        spent += item.tokens
    return list(ranked), []


class SnippetSource(Source):
    name, at, stage, default = "snippets", 80, FILL, Snippets()

    def contexts(self, given: Snippets) -> Sequence[FileRef]:
        return given.refs

    def section(self, draft: Draft) -> Section:
        given: Snippets = draft.input(self)
        uris = {ref.file.uri for ref in given.refs}
        # the share holds the snippets retained in the history too: sent once, they keep their place
        retained = sum(item.tokens for item in draft.sections[HISTORY].items if item.payload[0].message.uri in uris)
        share = math.floor(max(0, draft.room - draft.spent(required=True)) * given.share) - retained
        ranked = items_of(given.refs, "snippet", draft)
        draft.notes[self.name] = (ranked, share)
        return self._section(*pack(ranked, share))

    def settle(self, draft: Draft, section: Section) -> Section:
        ranked, share = draft.notes[self.name]
        unused = draft.room - draft.spent(leaving=self.name)
        if unused > share and section.cut_before:  # snippets borrow what the rest leaves unused
            return self._section(*pack(ranked, unused))
        return section

    def _section(self, packed: list[Item], over_share: list[Item]) -> Section:
        return Section(self.name, tuple(packed[::-1]), cut_before=tuple(over_share),
                       drop_reason="less relevant than the snippets kept, within the memory share")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return sent_parts([item.payload for item in kept.kept][::-1], draft)  # most relevant first


SNIPPETS = SnippetSource()
