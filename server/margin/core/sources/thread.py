"""The thread as prompt sources: its stored history (whole exchanges and the latest context of
each file, oldest first; cut oldest first, keeping a minimum of recent exchanges) and the
pointers (core.pointers) that stand for old content in it, with their legend and recall tool.

Pointers are shown when they pay: when what they save is more than the legend and the recall
tool cost (every pointer shares that fixed cost), or when the prompt needs the room. Then the
masking line is the first of `mask_lines` (steps of MASK_BATCH turns, so the start of the
prompt — what a backend's prompt cache holds — stays as it was for most turns) at which the
whole prompt fits, so turns are dropped only when even the most masking leaves it too large.
The pointers' legend joins the system prompt exactly when a pointer is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from margin.core import pointers
from margin.core.budget import Item, Plan, Section, SectionResult
from margin.core.sources.base import (
    AFTER_THREAD,
    CONTEXT_ROLE,
    HISTORY,
    PER_MESSAGE_OVERHEAD,
    SYSTEM,
    THREAD,
    Draft,
    Part,
    Sent,
    Source,
)
from margin.core.threads import FILE_CONTEXT, Message


@dataclass(frozen=True)
class Pointers:
    legend: str = f"{pointers.LEGEND} {pointers.RECALL_BY_USER}"
    """what pointers mean and how to see their content again: joins the system prompt when a
    pointer is shown"""
    masking: bool = True
    """False: old content is shown whole or dropped, never as a pointer"""
    render_pointer: Callable[[int, str], str] = pointers.pointer
    shown: Sequence[pointers.Shown] | None = None
    """pointers.show(thread), when the caller has already made it"""
    tools: Sequence[dict[str, Any]] = ()
    """tools offered with the legend (the `recall` tool), and `tools_tokens`, what their
    definitions cost"""
    tools_tokens: int = 0
    after: int = 0
    """the turns up to this one are folded into the summary the prompt shows (core.summary):
    their messages are shown by no prompt, so no pointer is made for them"""


def current_turn(history: Sequence[Message]) -> int:
    """The number of the turn being asked: one more than the user messages stored."""
    return 1 + pointers.user_turns(history)


def _tokens(texts: Sequence[str], count: Callable[[str], int]) -> int:
    """A message's parts, joined by a blank line each, with its framing."""
    return sum(map(count, texts)) + len(texts) - 1 + PER_MESSAGE_OVERHEAD


Views = dict[tuple[int, bool], tuple[Sent, int]]
"""How a message is sent, and its tokens, by the id() of its `pointers.Shown` and whether its
turn is masked: an assembly lays out the history more than once (a wider masking line, files
sent again), and most messages are sent the same way each time."""


def history_items(shown: Sequence[pointers.Shown], skip_contexts: set[str], latest: dict[str, Message],
                  line: int | None, count: Callable[[str], int], masking: bool = True,
                  views: Views | None = None) -> list[Item]:
    """Whole exchanges and latest file contexts, oldest first. A superseded file context goes
    with the turn it was sent in: as its pointer when pointers are shown (`line` not None), else
    left out (a file's older text is never shown; without `masking` at all it is whole); the
    parts of turns up to `line` whose pointer is shorter are pointers. `views`: what earlier
    calls of one assembly made (the same `shown` and `count`)."""
    views = {} if views is None else views
    items: list[Item] = []
    pending: list[Sent] = []
    carried: list[Sent] = []  # the contexts stored before the next user message
    sizes: list[int] = []

    def flush() -> None:
        if pending:
            items.append(Item(f"turn {pending[0].message.id}", sum(sizes), tuple(pending)))
            pending.clear()
            sizes.clear()

    for entry in shown:
        message = entry.message
        if message.kind == FILE_CONTEXT:
            if message.uri not in skip_contexts and latest.get(message.uri or "") is message:
                flush()
                items.append(Item(f"file {message.meta.get('file_id', message.uri)}",
                                  count(message.content) + PER_MESSAGE_OVERHEAD, (Sent(message, message.content),)))
            elif not masking:
                carried.append(Sent(message, message.content))
            elif line is not None:
                ref = entry.parts[0].pointer or ""
                carried.append(Sent(message, ref, (ref,)))
            continue
        if message.role == "user":
            flush()
            for sent in carried:
                pending.append(sent)
                sizes.append(count(sent.content) + PER_MESSAGE_OVERHEAD)
            carried.clear()
        masked = line is not None and entry.turn <= line
        view = views.get((id(entry), masked))
        if view is None:
            texts, refs = entry.view(line, count) if masked and line is not None else ([p.text for p in entry.parts], [])
            view = views[id(entry), masked] = (Sent(message, "\n\n".join(texts), tuple(refs)), _tokens(texts, count))
        pending.append(view[0])
        sizes.append(view[1])
    flush()
    return items


class PointerSource(Source):
    """The legend and recall tool, required while a pointer is shown; the pointers themselves
    are reported here too (the history's report shows its turns without them)."""

    name, at, stage, default = "pointers", 40, AFTER_THREAD, Pointers()

    def texts(self, given: Pointers) -> list[str]:
        return [given.legend, *(pointers.texts(given.shown) if given.shown is not None else ())]

    def counted(self, given: Pointers, thread: Sequence[Message], count: Callable[[str], int]) -> Pointers:
        if given.shown is not None:
            return given
        return Pointers(given.legend, given.masking, given.render_pointer,
                        pointers.show(thread, count, given.render_pointer, given.after), given.tools,
                        given.tools_tokens, given.after)

    def prepare(self, draft: Draft) -> None:
        given: Pointers = draft.input(self)
        draft.shown = given.shown if given.shown is not None else pointers.show(draft.thread, draft.count,
                                                                               given.render_pointer, given.after)

    def section(self, draft: Draft) -> Section:
        given: Pointers = draft.input(self)
        shows = any(sent.pointers for item in draft.sections[HISTORY].items for sent in item.payload)
        legend = (Item("legend", fixed_costs(given, draft.count)[0]),)
        tool = (Item("recall tool", given.tools_tokens),) if given.tools else ()
        return Section(self.name, legend + tool if shows else (), required=True)

    def settle(self, draft: Draft, section: Section) -> Section:
        return self.section(draft)  # after the history's

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        given: Pointers = draft.input(self)
        assert draft.plan is not None
        draft.pointers = _pointer_report(draft.plan, draft.count)
        draft.tools = given.tools if draft.pointers else ()
        return [Part(SYSTEM, given.legend)] if draft.pointers else []


def fixed_costs(given: Pointers, count: Callable[[str], int]) -> tuple[int, int]:
    """What the legend costs, and what showing any pointer costs (the legend and the tools)."""
    legend = count(given.legend) if given.masking else 0
    return legend, legend + given.tools_tokens


class History(Source):
    """Input: how many recent exchanges only the last pass may drop."""

    name, at, stage, default = HISTORY, 70, THREAD, 2

    def section(self, draft: Draft) -> Section:
        given: Pointers = draft.input(POINTERS)
        lines = pointers.mask_lines(current_turn(draft.thread)) if given.masking else [0]
        costs = pointers.Economy(draft.shown, draft.resend, draft.latest, fixed_costs(given, draft.count)[1],
                                 draft.count, PER_MESSAGE_OVERHEAD) if given.masking else None
        # Pointers are shown when they save more than they cost, or the room is needed (settle).
        line = lines[0] if costs is not None and costs.pay(lines[0]) else None
        draft.notes[self.name] = (costs, lines, line)
        return self._section(draft, history_items(draft.shown, draft.resend, draft.latest, line, draft.count,
                                                  given.masking, draft.kept.setdefault(self.name, {})))

    def settle(self, draft: Draft, section: Section) -> Section:
        costs, lines, line = draft.notes[self.name]
        rest = draft.spent()
        if costs is None or rest <= draft.room:
            return section
        # the room is needed: mask more, in MASK_BATCH steps
        plain = rest + (costs.gain(line) if line is not None else 0)  # the same without pointers
        wider = costs.line_for(lines, plain - draft.room)
        if wider == line:
            return section
        draft.notes[self.name] = (costs, lines, wider)
        return self._section(draft, history_items(draft.shown, draft.resend, draft.latest, wider, draft.count,
                                                  views=draft.kept.setdefault(self.name, {})))

    def _section(self, draft: Draft, items: list[Item]) -> Section:
        return Section(self.name, tuple(items), protect_last=draft.input(self),
                       drop_reason="older than the kept history")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return [Part(CONTEXT_ROLE if sent.message.kind == FILE_CONTEXT else sent.message.role, sent.content)
                for item in kept.kept for sent in item.payload]


def _pointer_report(result: Plan, count: Callable[[str], int]) -> list[str]:
    """The pointers the kept history shows, in order. The budget report shows them in their own
    section with the legend, and the history without them."""
    shown = [ref for item in result.section(HISTORY).kept for sent in item.payload for ref in sent.pointers]
    if shown:
        history, section = result.section(HISTORY), result.section(POINTERS.name)
        tokens = sum(count(ref) for ref in shown)
        history.tokens -= tokens
        section.tokens += tokens
        section.kept = (*section.kept, *(Item(ref, count(ref)) for ref in shown))
    return shown


POINTERS = PointerSource()
HISTORY_SOURCE = History()
