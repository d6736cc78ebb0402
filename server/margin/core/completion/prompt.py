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

Deterministic: the same input and counts give the same prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from margin.core.budget import Item, Plan, Section, Trimmed, plan, safety_margin
from margin.core.trim import line_trimmer

PREFIX_SHARE, SUFFIX_SHARE, EXTRA_SHARE = 0.6, 0.25, 0.15
"""How the room left by the required parts is shared. The code before the cursor decides most
completions; the code after it mostly tells the model where to stop (llama.vim sends 256 lines
before and 64 after; llama.cpp's /infill keeps 3:1); other files help least and cost most."""

CONTEXT_CHARS_PER_TOKEN = 12
"""The code around the cursor is read at most this many characters per token of the window on
each side: more could never fit, so it is never counted (as services/selection_edit.py)."""

CURSOR_LINE_STEP = 32
"""The cursor line is budgeted in steps of this many tokens, so typing along a line leaves the
rest of the plan — and the backend's cached prompt — unchanged."""

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


def assemble_completion(
    input: CompletionInput,
    count: Callable[[str], int],
    *,
    context_window: int,
    reserved_output: int,
    tokenizer: str,
    exact: bool,
    framing_tokens: int = 0,
    fixed_tokens: int = 0,
    render_snippet: Callable[[Snippet], str] = plain_snippet,
) -> CompletionPrompt:
    """Decide what a completion request carries. `fixed_tokens`: the format's own tokens and
    instructions (formats.fixed_text, counted); `render_snippet`: a snippet as the format sends
    it (formats.snippet_text), so its cost includes its separators."""
    start = cursor_line_start(input.prefix)
    line = input.prefix[start:]
    reach = max(context_window - reserved_output, 0) * CONTEXT_CHARS_PER_TOKEN
    before, after = within_reach(input.prefix[:start], input.suffix, reach)

    line_tokens = count(line)
    limit = max(0, context_window - reserved_output - safety_margin(context_window, exact))
    required = framing_tokens + fixed_tokens + line_tokens
    stepped = (line_tokens // CURSOR_LINE_STEP + 1) * CURSOR_LINE_STEP
    room_to_type = max(0, min(stepped - line_tokens, limit - required))

    # Items are dropped from the front: the lowest-priority snippet comes first.
    ranked = tuple(reversed(range(len(input.extra))))
    extra_items = tuple(Item(f"{input.extra[i].file_id} ({input.extra[i].reason})",
                             count(render_snippet(input.extra[i])), i) for i in ranked)
    sections = [
        # Framing is counted here, not by plan(): a window too small for it is over budget
        # like any other, not a configuration error.
        Section("format", (Item("format tokens and instructions", fixed_tokens),
                           Item("framing", framing_tokens)), required=True),
        Section("cursor line", (Item("typed part", line_tokens), Item("room to type", room_to_type)),
                required=True),
        Section("extra", extra_items, share=EXTRA_SHARE, drop_reason=LOW_PRIORITY),
        Section("suffix", (Item("code after the cursor", count(after)),), share=SUFFIX_SHARE,
                drop_reason=FAR_FROM_CURSOR, trimmer=line_trimmer(after, "start", count)),
        Section("prefix", (Item("code before the cursor line", count(before)),), share=PREFIX_SHARE,
                drop_reason=FAR_FROM_CURSOR, trimmer=line_trimmer(before, "end", count)),
    ]
    result = plan(sections, context_window=context_window, reserved_output=reserved_output,
                  tokenizer=tokenizer, exact=exact)
    dropped = result.section("extra").dropped_items
    if dropped and not result.over_budget and result.total < result.limit:
        # A snippet is kept or dropped whole, so one larger than the room left leaves that room
        # unused: plan again without the dropped snippets, and their share goes to the code.
        at = next(i for i, section in enumerate(sections) if section.name == "extra")
        sections[at] = replace(sections[at], items=tuple(result.section("extra").kept))
        result = plan(sections, context_window=context_window, reserved_output=reserved_output,
                      tokenizer=tokenizer, exact=exact)
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
