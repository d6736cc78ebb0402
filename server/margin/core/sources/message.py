"""The newest message as a prompt source: the user's message (with any selected code), and
after it what this kind of request asks of the answer (the template's `[request]` fragments).
Required: never cut."""

from __future__ import annotations

from dataclasses import dataclass

from margin.core.budget import Item, Section, SectionResult
from margin.core.sources.base import PER_MESSAGE_OVERHEAD, Draft, Part, Source


@dataclass(frozen=True)
class Newest:
    text: str
    request: str = ""
    """sent after the message, with a blank line between"""


class Message(Source):
    name, at, default = "message", 100, Newest("")

    def texts(self, given: Newest) -> list[str]:
        return [given.text, given.request]

    def section(self, draft: Draft) -> Section:
        newest: Newest = draft.input(self)
        items: tuple[Item, ...] = (Item("newest message", draft.count(newest.text) + PER_MESSAGE_OVERHEAD),)
        if newest.request:  # and the blank line before it
            items += (Item("request instructions", draft.count(newest.request) + 1),)
        return Section(self.name, items, required=True)

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        newest: Newest = draft.input(self)
        return [Part("user", f"{newest.text}\n\n{newest.request}" if newest.request else newest.text)]


MESSAGE = Message()
