"""The budget of an inline completion: which code around the cursor, and which extra snippets,
a fill-in-the-middle request carries, counted in exact tokens (the request shapes are in
formats.py).

    limit = context window − reserved output − safety margin      (core/budget.py)

Never cut: the format's own tokens and instructions (`fixed_tokens`) and the cursor line up to
the cursor. The rest shares what they leave — code before the cursor 60%, code after it 25%,
extra snippets 15% — and a share a section does not need is lent to the others. The code
before the cursor loses its first lines first and the code after it its last lines, whole
lines only; extra snippets are dropped whole, the last in the list (the lowest priority) first,
and the room a dropped snippet leaves goes to the code (the plan is made again without it).
Sections are cut in the order extra → suffix → prefix, so room nobody else needs ends up with
the code just above the cursor, the context a completion depends on most.

Typing must not move the rest of the prompt: the backend's prompt cache (llama.cpp
`cache_prompt`) then re-evaluates only the few tokens typed. So the cursor line is budgeted in
steps of `CURSOR_LINE_STEP` tokens (the difference is reported as "room to type"), and the reach
below is measured from the start of the cursor line: typing along a line changes neither what
the other sections may hold nor which of their lines are kept.

Reach: the code around the cursor is read at most `CONTEXT_CHARS_PER_TOKEN` characters per token
of the window on each side (whole lines); more could never fit, so a 3,000-line file is not
counted whole on every keystroke. Lines beyond the reach are reported as dropped.

Counting, cheaply and exactly: the code before and after the cursor is counted in pieces that a
caller may cache (with the code of recent requests: `RecentCode`). With a tokenizer whose safe
cuts are known (core/tokens/cuts.py: tiktoken's and Tekken's), the pieces start at lines where
the tokenizer itself must split, so their counts add up to the exact count of any run of them:
the code is sized and trimmed without counting it whole. Otherwise the pieces are lines, a side
whose lines add up to clearly more than the room (`SURELY_OVER`) is not counted whole, as it is
cut anyway, and what is kept of it is counted whole (`CodeLines.trim`: as many lines as their
one-by-one counts allow, checked with one count of the whole, not one per line).

Deterministic: the same input and counts give the same prompt.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Literal

from margin.core.budget import Item, Plan, Section, Trimmed, Window, plan
from margin.core.tokens.cuts import LineCuts

PREFIX_SHARE, SUFFIX_SHARE, EXTRA_SHARE = 0.6, 0.25, 0.15
"""How the room left by the required parts is shared. The code before the cursor decides most
completions; the code after it mostly tells the model where to stop (llama.vim sends 256 lines
before and 64 after; llama.cpp's /infill keeps 3:1); other files help least and cost most."""

CONTEXT_CHARS_PER_TOKEN = 12
"""The code around the cursor is read at most this many characters per token of the window on
each side: more could never fit, so it is never counted (as services/selection_edit.py)."""

LONG_LINE_CHARS_PER_TOKEN = 2
"""A cursor line longer than this many characters per token of the window (a minified bundle's
one line) is read from its last that many characters before the cursor only, as if it began
there: what is counted stays bounded however long the line, and lines above it are not sent.
(Two characters a token: in most code that is the window's worth; what cannot fit is over budget
as any cursor line too long is.)"""

CURSOR_LINE_STEP = 32
"""The cursor line is budgeted in steps of this many tokens, so typing along a line leaves the
rest of the plan — and the backend's cached prompt — unchanged."""

SURELY_OVER = 1.1
"""Code whose lines, counted one by one, add up to more than this many times the room left by the
required parts is cut unless counting it whole saves over 10% (tokens merged across line breaks:
a few percent in code): its line sum then stands for its size, and only what is kept of it is
counted whole. Were the whole to fit after all, the trimmer keeps it all, counted exactly;
nothing can overflow, only the sections cut before it may have been cut more than needed."""

FAR_FROM_CURSOR = "farthest from the cursor"
LOW_PRIORITY = "lower-priority extra context; the code around the cursor came first"


@dataclass(frozen=True)
class Snippet:
    """Extra context: another open file's window near where it was last edited, or a recently
    edited region."""

    file_id: str
    text: str
    reason: str
    """e.g. "open file", "recently edited" """


@dataclass(frozen=True)
class CompletionInput:
    file_id: str
    language: str
    prefix: str
    """the document before the cursor"""
    suffix: str
    """the document after the cursor"""
    extra: tuple[Snippet, ...] = ()
    """highest priority first"""


def cursor_line_start(prefix: str) -> int:
    """Where the cursor line starts in `prefix` (just after its last line break)."""
    return max(prefix.rfind("\n"), prefix.rfind("\r")) + 1


@dataclass
class CompletionPrompt:
    """What is kept: `prefix` ends with the whole cursor line up to the cursor, `suffix` is the
    start of the code after it, `extra` the kept snippets in their given order."""

    prefix: str
    suffix: str
    extra: tuple[Snippet, ...]
    plan: Plan
    """the budget report comes from plan.report(counted)"""
    file_id: str = ""
    language: str = ""

    @property
    def over_budget(self) -> str | None:
        return self.plan.over_budget

    @property
    def cursor_line(self) -> str:
        """The cursor line up to the cursor: the part that changes while typing."""
        return self.prefix[cursor_line_start(self.prefix):]

    @property
    def lines_before(self) -> str:
        """The kept whole lines above the cursor line."""
        return self.prefix[: cursor_line_start(self.prefix)]


def plain_snippet(snippet: Snippet) -> str:
    """A snippet as most formats send it: its path on a line, then its text."""
    return f"{snippet.file_id}\n{snippet.text}"


def within_reach(before: str, after: str, reach: int) -> tuple[str, str]:
    """The whole lines of `before` (ending where it ends) and of `after` (starting where it
    starts) that lie within `reach` characters."""
    if len(before) > reach:
        cut = before.find("\n", len(before) - reach - 1)
        before = before[cut + 1:] if cut >= 0 else ""
    if len(after) > reach:
        after = after[: after.rfind("\n", 0, reach) + 1]
    return before, after


class CodeLines:
    """The code on one side of the cursor in units of whole lines, nearest the cursor first, with
    their running counts: its size for the budget, and its trimmer. With a tokenizer whose safe
    cuts are known (`LineCuts`), the units are pieces whose counts add up exactly, so sizing and
    trimming need no count of the whole; otherwise they are lines, and what is kept is counted
    whole."""

    def __init__(self, text: str, keep: Literal["start", "end"], count: Callable[[str], int],
                 ratio: float = 1.0, *, cuts: LineCuts | None = None) -> None:
        self.text = text
        self.units = cuts.pieces(text) if cuts is not None and text else text.splitlines(keepends=True)
        self.exact = cuts is not None
        """the running counts are the exact counts of what they add up"""
        self.keep = keep
        self.count = count
        ordered = self.units[::-1] if keep == "end" else self.units
        many = getattr(count, "many", None)  # counts of many texts at once, where the caller has it
        self.running: list[int] = [0, *accumulate(many(ordered) if many is not None else map(count, ordered))]
        """running[n]: the n units nearest the cursor, counted one by one"""
        self.ratio = ratio
        """tokens counted whole per token counted line by line, as last seen: where a trim's
        first guess lands"""
        self._sizes: dict[int, int] = {}
        self._trimmed: dict[int, Trimmed] = {}

    @property
    def least(self) -> float:
        """Its size is at least this many tokens."""
        return self.running[-1] if self.exact else self.running[-1] / SURELY_OVER

    def size(self, room: int) -> int:
        """Its tokens, exactly; or its line sum when that is surely more than `room`, the most this
        side could get."""
        if self.exact:
            return self.running[-1]
        if room not in self._sizes:
            surely_over = self.running[-1] > SURELY_OVER * room
            self._sizes[room] = self.running[-1] if surely_over else self.count(self.text)
        return self._sizes[room]

    def join(self, n: int) -> str:
        """The n units nearest the cursor."""
        units = self.units
        return "".join(units[len(units) - n:]) if self.keep == "end" else "".join(units[:n])

    def trim(self, allowance: int) -> Trimmed:
        """The units nearest the cursor that fit `allowance`, counted exactly. With exact running
        counts, as many as they allow. Otherwise, as many as their one-by-one counts allow (one
        count of the whole), or, in the rare case that does not fit, the most that fit, found with
        few counts of the whole: each guess is where the line counts, scaled by how the whole last
        compared with them, say the allowance is reached."""
        if allowance not in self._trimmed:
            self._trimmed[allowance] = self._trim(allowance)
        return self._trimmed[allowance]

    def _lines_for(self, tokens: float) -> int:
        """How many units nearest the cursor add up to at most `tokens`, counted one by one."""
        return bisect_right(self.running, tokens) - 1

    def _trim(self, allowance: int) -> Trimmed:
        running, total = self.running, len(self.units)
        by_lines = self._lines_for(allowance)
        if self.exact:
            kept = self.join(by_lines)
            return Trimmed(kept, running[by_lines], _lines_in(self.text) - _lines_in(kept))
        # The lines whose counts, one by one, add up to the allowance: counted whole they almost
        # always fit (tokens merge where lines meet, never the other way in code), so one count
        # decides. What this leaves unused is those merges: a few percent, for one count
        # instead of a search. The same input always keeps the same lines.
        tokens = self.count(self.join(by_lines))
        if tokens <= allowance:
            return Trimmed(self.join(by_lines), tokens, total - by_lines)
        fits, fits_tokens, over = 0, 0, by_lines  # `fits` lines fit; `over` lines do not
        guess = self._lines_for(allowance / self.ratio)
        guesses = 0
        while over - fits > 1:
            guesses += 1
            if guesses > 3:  # guesses that keep missing: halve the range instead
                guess = (fits + over) // 2
            guess = min(max(guess, fits + 1), over - 1)
            tokens = self.count(self.join(guess))
            if running[guess] and tokens:
                self.ratio = tokens / running[guess]
            if tokens <= allowance:
                fits, fits_tokens = guess, tokens
            else:
                over = guess
            guess = self._lines_for(running[guess] + (allowance - tokens) / self.ratio)
        return Trimmed(self.join(fits), fits_tokens, total - fits)


class RecentCode:
    """The code on either side of the cursor in the last few requests, with its line counts:
    typing along a line leaves that code as it was, so it is neither counted nor trimmed again.
    One per tokenizer: the counts are its."""

    def __init__(self, entries: int = 4) -> None:
        self._entries: OrderedDict[tuple[str, str], CodeLines] = OrderedDict()
        self._max = entries
        self._last: dict[str, CodeLines] = {}

    def lines(self, text: str, keep: Literal["start", "end"], count: Callable[[str], int],
              *, cuts: LineCuts | None = None) -> CodeLines:
        key = (keep, text)
        found = self._entries.get(key)
        if found is None:
            last = self._last.get(keep)
            found = self._entries[key] = CodeLines(text, keep, count, last.ratio if last else 1.0, cuts=cuts)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        self._last[keep] = found
        return found


def assemble_completion(
    input: CompletionInput,
    count: Callable[[str], int],
    window: Window,
    *,
    fixed_tokens: int = 0,
    render_snippet: Callable[[Snippet], str] = plain_snippet,
    recent: RecentCode | None = None,
    cuts: LineCuts | None = None,
) -> CompletionPrompt:
    """Decide what a completion request carries. `fixed_tokens`: the format's own tokens and
    instructions (formats.fixed_text, counted); `render_snippet`: a snippet as the format sends
    it (formats.snippet_text), so its cost includes its separators; `recent`: the code of recent
    requests counted with the same tokenizer as `count`, to reuse; `cuts`: that tokenizer's safe
    cuts, when known (its counts of the code are then exact sums of cached pieces)."""
    start = cursor_line_start(input.prefix)
    line = input.prefix[start:]
    room_chars = max(window.context_window - window.reserved_output, 0)
    reach = room_chars * CONTEXT_CHARS_PER_TOKEN
    before, after = within_reach(input.prefix[:start], input.suffix, reach)
    if len(line) > room_chars * LONG_LINE_CHARS_PER_TOKEN:  # never counted whole: its end, and no line above
        line, before = line[len(line) - room_chars * LONG_LINE_CHARS_PER_TOKEN:], ""

    line_tokens = count(line)
    limit = max(0, window.context_window - window.reserved_output - window.margin)
    required = window.framing_tokens + fixed_tokens + line_tokens
    stepped = (line_tokens // CURSOR_LINE_STEP + 1) * CURSOR_LINE_STEP
    room_to_type = max(0, min(stepped - line_tokens, limit - required))
    lines = recent.lines if recent is not None else CodeLines
    code_before = lines(before, "end", count, cuts=cuts)
    code_after = lines(after, "start", count, cuts=cuts)
    room = max(0, limit - required - room_to_type)
    # The most either side can get is what the other leaves: at least its share, or all of it
    # when smaller (its line sum over SURELY_OVER is less than it counts whole).
    least_after = min(code_after.least, SUFFIX_SHARE * room)
    least_before = min(code_before.least, PREFIX_SHARE * room)

    # Items are dropped from the front: the lowest-priority snippet comes first.
    ranked = tuple(reversed(range(len(input.extra))))
    extra_items = tuple(Item(f"{input.extra[i].file_id} ({input.extra[i].reason})",
                             count(render_snippet(input.extra[i])), i) for i in ranked)
    sections = [
        # Framing is counted here, not by plan(): a window too small for it is over budget
        # like any other, not a configuration error.
        Section("format", (Item("format tokens and instructions", fixed_tokens),
                           Item("framing", window.framing_tokens)), required=True),
        Section("cursor line", (Item("typed part", line_tokens), Item("room to type", room_to_type)),
                required=True),
        Section("extra", extra_items, share=EXTRA_SHARE, drop_reason=LOW_PRIORITY),
        Section("suffix", (Item("code after the cursor", code_after.size(int(room - least_before))),), share=SUFFIX_SHARE,
                drop_reason=FAR_FROM_CURSOR, trimmer=code_after.trim),
        Section("prefix", (Item("code before the cursor line", code_before.size(int(room - least_after))),), share=PREFIX_SHARE,
                drop_reason=FAR_FROM_CURSOR, trimmer=code_before.trim),
    ]
    unframed = replace(window, framing_tokens=0)  # counted in the "format" section instead
    result = plan(sections, unframed)
    dropped = result.section("extra").dropped_items
    if dropped and not result.over_budget and result.total < result.limit:
        # A snippet is kept or dropped whole, so one larger than the room left leaves that room
        # unused: plan again without the dropped snippets, and their share goes to the code.
        at = next(i for i, section in enumerate(sections) if section.name == "extra")
        sections[at] = replace(sections[at], items=tuple(result.section("extra").kept))
        result = plan(sections, unframed)
        extra = result.section("extra")
        extra.dropped_items = (*dropped, *extra.dropped_items)
        extra.reason = LOW_PRIORITY
    if result.over_budget:
        return CompletionPrompt("", "", (), result, input.file_id, input.language)
    kept_before = _kept(result, "prefix", before, _lines_in(input.prefix[: start - len(before)]))
    kept_after = _kept(result, "suffix", after, _lines_in(input.suffix[len(after):]))
    kept_extra = tuple(input.extra[i] for i in sorted(item.payload for item in result.section("extra").kept))
    return CompletionPrompt(kept_before + line, kept_after, kept_extra, result, input.file_id, input.language)


def _lines_in(text: str) -> int:
    """How many lines `text` (cut off beyond the reach) holds."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _kept(result: Plan, name: str, reached: str, beyond: int) -> str:
    """What the plan keeps of a trimmed section; lines beyond the reach are reported as dropped
    with the lines the budget dropped."""
    section = result.section(name)
    trimmed = section.trimmed
    text = trimmed.text if trimmed is not None else reached
    if beyond:
        dropped = trimmed.dropped_lines if trimmed is not None else 0
        section.trimmed = Trimmed(text, section.tokens, dropped + beyond)
        section.reason = section.reason or FAR_FROM_CURSOR
    return text
