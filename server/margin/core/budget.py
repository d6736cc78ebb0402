"""The budget engine: what fits in the context window, decided by rules a person can predict.

    limit = context window − reserved output (maxOutputTokens) − safety margin

A prompt is made of sections. *Required* sections (the system prompt's required fragments, the
selection, the newest user message) are never cut. The others are cut, when everything does
not fit, in the deterministic order of the list they are given in — Margin's order is:
prefix/suffix (trimmed line-aligned) → conversation turns (oldest whole turns first) → summary →
lower-priority context → optional system fragments.

Ratios and borrowing: each cuttable section may reserve a share of what the required sections
leave. The first pass cuts, in order, only what a section holds *beyond* its share (its floor),
and leaves a history section its minimum of recent exchanges; a section that needs less than
its share lends the rest simply by not using it, and the sections cut last (the most
important) keep what they borrowed. Items are dropped whole, so a section can be left above its
floor; the second pass takes from such sections, in order, before anyone else. Only then does
the third pass cut, in order, into the shares and the protected exchanges. A section never
holds more than it needs, and never loses anything while a section before it in the order
could still give from beyond its share.

If the required sections alone do not fit, the outcome is over budget (no model call, nothing
stored); if the required system prompt alone does not fit, that is a configuration error, and
it says so with the sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

SYSTEM_PROMPT_WARN_RATIO = 0.25


def safety_margin(context_window: int, exact: bool) -> int:
    """Tokens kept free on top of the reserved output: framing the counters cannot see exactly
    (a system prompt merged into a user turn, a template's own tokens). Larger when counting is
    approximate."""
    return math.ceil(context_window * (0.02 if exact else 0.05)) + (8 if exact else 16)


@dataclass(frozen=True)
class Window:
    """What a request may spend: the model's context window less the output it reserves, as
    counted with `tokenizer` (`exact`: its counts are exact, not an upper bound);
    `framing_tokens`: the fixed cost of the prompt's framing (reply priming, begin-of-text)."""

    context_window: int
    reserved_output: int
    tokenizer: str
    exact: bool
    framing_tokens: int = 0

    @property
    def margin(self) -> int:
        return safety_margin(self.context_window, self.exact)


class Item(NamedTuple):
    """A piece of a section that is kept or dropped whole (a turn, a file's context, a
    fragment). `payload` travels with it for the caller. (A tuple: threads hold thousands.)"""

    id: str
    tokens: int
    payload: Any = None


@dataclass(frozen=True)
class Trimmed:
    """What a trimmer keeps of a text for a given allowance: the text and its exact count."""

    text: str
    tokens: int
    dropped_lines: int


Trimmer = Callable[[int], Trimmed]
"""Given an allowance in tokens, the longest line-aligned part of the text that fits."""


@dataclass(frozen=True)
class Section:
    name: str
    items: tuple[Item, ...] = ()
    """Items in the order they are to be dropped (for history: oldest first)."""
    required: bool = False
    share: float = 0.0
    """Fraction of what the required sections leave, reserved for this section."""
    protect_last: int = 0
    """How many items at the end (the most recent exchanges) only the second pass may drop."""
    drop_reason: str = "did not fit the budget"
    trimmer: Trimmer | None = None
    """For a text trimmed line by line (prefix, suffix) instead of dropped by items; the
    section then has one item, the whole text."""
    is_system: bool = False
    cut_before: tuple[Item, ...] = ()
    """Items left out before planning, by the section's own cap (instruction files): reported
    as dropped, with `drop_reason`."""


class Dropped(NamedTuple):
    item: str
    reason: str


REPORT_RUN = 5
"""A run of more dropped items than this is reported as one entry (first … last, count)."""


@dataclass(frozen=True)
class SectionReport:
    name: str
    tokens: int
    kept: int
    """how many items were kept"""
    dropped: tuple[Dropped, ...]


@dataclass(frozen=True)
class BudgetReport:
    """How a prompt spent the window: the report in every chat, edit and explain result."""

    context_window: int
    reserved_output: int
    limit: int
    total: int
    """the engine's sum of its sections"""
    tokenizer: str
    exact: bool
    sections: tuple[SectionReport, ...]
    counted: int = 0
    """the final prompt counted whole by the tokenizer (0 when nothing is sent)"""

    def section(self, name: str) -> SectionReport:
        return next(s for s in self.sections if s.name == name)


@dataclass
class SectionResult:
    name: str
    tokens: int
    kept: Sequence[Item]
    dropped_items: Sequence[Item] = ()
    reason: str = ""
    trimmed: Trimmed | None = None

    @property
    def dropped(self) -> list[Dropped]:
        if self.trimmed is not None and self.trimmed.dropped_lines:
            return [Dropped(f"{self.trimmed.dropped_lines} lines", self.reason)]
        return [Dropped(item.id, self.reason) for item in self.dropped_items]

    def report(self) -> SectionReport:
        items = self.dropped_items
        if self.trimmed is None and len(items) > REPORT_RUN:
            dropped: tuple[Dropped, ...] = (
                Dropped(f"{items[0].id} … {items[-1].id} ({len(items)} items)", self.reason),)
        else:
            dropped = tuple(self.dropped)
        return SectionReport(self.name, self.tokens, len(self.kept), dropped)


class SystemPromptTooLarge(ValueError):
    """The required system prompt alone does not fit: a configuration problem."""

    def __init__(self, system_tokens: int, limit: int, context_window: int, reserved: int) -> None:
        self.system_tokens = system_tokens
        self.limit = limit
        super().__init__(
            f"The required system prompt is {system_tokens} tokens, but only {limit} fit "
            f"(context window {context_window} − reserved output {reserved} − safety margin). "
            "Use a shorter template, lower maxOutputTokens, or a model with a larger window."
        )


@dataclass
class Plan:
    context_window: int
    reserved_output: int
    limit: int
    sections: list[SectionResult]
    tokenizer: str
    exact: bool
    over_budget: str | None = None
    """Why nothing can be sent (the required parts alone exceed the limit), or None."""
    required_tokens: int = 0

    @property
    def total(self) -> int:
        return sum(section.tokens for section in self.sections)

    def section(self, name: str) -> SectionResult:
        return next(s for s in self.sections if s.name == name)

    def report(self, counted: int = 0) -> BudgetReport:
        """The budget report (SPEC D), with `counted`: the final prompt counted whole."""
        return BudgetReport(self.context_window, self.reserved_output, self.limit, self.total,
                            self.tokenizer, self.exact, tuple(s.report() for s in self.sections), counted)


def system_prompt_warning(system_tokens: int, context_window: int) -> str | None:
    if system_tokens > context_window * SYSTEM_PROMPT_WARN_RATIO:
        share = 100 * system_tokens / context_window
        return (f"The system prompt takes {system_tokens} tokens, {share:.0f}% of the "
                f"{context_window}-token window; little is left for your code and conversation.")
    return None


class _Cut:
    """A cuttable section being cut. Items are dropped from the front, so what is kept is
    always `items[start:]`; the running total makes each step O(1)."""

    def __init__(self, section: Section, floor: int) -> None:
        self.section = section
        self.floor = floor
        self.start = 0
        self.total = sum(item.tokens for item in section.items)
        self.trimmed: Trimmed | None = None

    @property
    def tokens(self) -> int:
        return self.trimmed.tokens if self.trimmed is not None else self.total

    def give_back(self, excess: int, *, second_pass: bool) -> None:
        """Shrink by at least `excess` tokens if it can, never below the floor in the first
        pass. Items go whole, in the section's order; a trimmed text goes line by line."""
        section = self.section
        floor = 0 if second_pass else self.floor
        target = max(self.tokens - excess, floor)
        if self.tokens <= target:
            return
        if section.trimmer is not None:
            self.trimmed = section.trimmer(target)
            return
        items = section.items
        stop = len(items) - (0 if second_pass else section.protect_last)
        while self.start < stop and self.total > target:
            size = items[self.start].tokens
            if self.total - size < floor:
                break  # items are whole: the first pass does not cut into the share
            self.total -= size
            self.start += 1

    def result(self) -> SectionResult:
        section = self.section
        if self.trimmed is not None:
            kept = section.items if self.trimmed.tokens else ()
            return SectionResult(section.name, self.trimmed.tokens, kept, (), section.drop_reason,
                                 self.trimmed)
        return SectionResult(section.name, self.total, section.items[self.start :],
                             section.cut_before + section.items[: self.start], section.drop_reason)


def plan(sections: Sequence[Section], window: Window, *, margin: int | None = None) -> Plan:
    """Decide what is sent. `sections` are given in prompt order; the cuttable ones are cut in
    the order they appear. Raises SystemPromptTooLarge when the required system prompt cannot
    fit on its own."""
    context_window, reserved_output, tokenizer, exact, framing_tokens = (
        window.context_window, window.reserved_output, window.tokenizer, window.exact, window.framing_tokens)
    if margin is None:
        margin = window.margin
    limit = max(0, context_window - reserved_output - margin)
    required = [s for s in sections if s.required]
    system_tokens = sum(i.tokens for s in required if s.is_system for i in s.items)
    if system_tokens + framing_tokens > limit:
        raise SystemPromptTooLarge(system_tokens, limit, context_window, reserved_output)
    required_tokens = framing_tokens + sum(i.tokens for s in required for i in s.items)

    def finish(results: dict[str, SectionResult], over: str | None) -> Plan:
        ordered = [results[s.name] for s in sections]
        if framing_tokens:
            ordered.append(SectionResult("framing", framing_tokens, ()))
        return Plan(context_window, reserved_output, limit, ordered, tokenizer, exact, over,
                    required_tokens)

    if required_tokens > limit:
        results = {
            s.name: SectionResult(s.name, sum(i.tokens for i in s.items), s.items, s.cut_before, s.drop_reason)
            if s.required
            else SectionResult(s.name, 0, (), s.cut_before + s.items, "the required parts alone do not fit")
            for s in sections
        }
        biggest = sorted(required, key=lambda s: -sum(i.tokens for i in s.items))
        parts = ", ".join(f"{s.name} {sum(i.tokens for i in s.items)}" for s in biggest)
        return finish(results, (
            f"Too large to send: the parts that cannot be cut need {required_tokens} tokens "
            f"({parts}), but only {limit} fit (context window {context_window} − reserved "
            f"output {reserved_output} − safety margin {margin})."
        ))

    available = limit - required_tokens
    shares = sum(s.share for s in sections if not s.required)
    cuts: list[_Cut] = []
    for section in sections:
        if section.required:
            continue
        reserved = math.floor(available * section.share / shares) if shares else 0
        protected = sum(i.tokens for i in section.items[len(section.items) - section.protect_last:]) \
            if section.protect_last else 0
        cuts.append(_Cut(section, max(reserved, protected)))

    # 1: down to the floors; 2: sections still above their floor (whole items kept them
    # there) give what they hold beyond it, and more; 3: everyone, into the shares.
    for pass_number in (1, 2, 3):
        for cut in cuts:
            excess = sum(c.tokens for c in cuts) - available
            if excess <= 0:
                break
            if pass_number == 2 and cut.tokens <= cut.floor:
                continue
            cut.give_back(excess, second_pass=pass_number > 1)

    results = {s.name: SectionResult(s.name, sum(i.tokens for i in s.items), s.items, s.cut_before, s.drop_reason)
               for s in required}
    results.update({cut.section.name: cut.result() for cut in cuts})
    return finish(results, None)
