"""The next-edit prompt in Sweep's format, counted exactly and cut like every prompt (SPEC B/D, M).

What is never cut: the window around the cursor as it is now and as it was before the edits, and
the sections' framing. What is cut, in order, when it does not fit: the context files (the least
recently edited first), then the recent edits (the oldest first). Besides the model's window less
its output, the prompt keeps to `max_prompt_tokens` (the reference's 7,000: a next-edit model is
trained on prompts that size, and a small prompt is a fast answer). With no edit to go on, or a
special token in a text, nothing is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from margin.core import budget
from margin.core.next_edit import formats
from margin.core.next_edit.decide import Window, window
from margin.core.next_edit.history import Edit

MAX_PROMPT_TOKENS = 7000


@dataclass(frozen=True)
class NextEditPrompt:
    text: str | None
    """None: nothing is sent (`silence` says why)"""
    current: Window
    plan: budget.Plan | None = None
    silence: str | None = None


def original_line(original: str, current: str, line: int) -> int:
    """The line of `original` that `line` of `current` was, as far as the text says: the same
    line above the first change, shifted by the lines added or removed below the last one, and
    in proportion in between."""
    old, new = original.split("\n"), current.split("\n")
    first = 0
    while first < min(len(old), len(new)) and old[first] == new[first]:
        first += 1
    same = 0
    while same < min(len(old), len(new)) - first and old[-1 - same] == new[-1 - same]:
        same += 1
    old_end, new_end = len(old) - same, len(new) - same
    if line < first:
        mapped = line
    elif line < new_end:
        mapped = first + min(round((line - first) * (old_end - first) / max(new_end - first, 1)),
                             max(old_end - first - 1, 0))
    else:
        mapped = line - (new_end - old_end)
    return max(0, min(mapped, len(old) - 1))


def _block(parts: Sequence[str]) -> str:
    return "\n".join(parts) + "\n"


def sweep_prompt(path: str, document: str, line: int, edits: Sequence[Edit], original: str,
                 context_files: Sequence[tuple[str, str]], count: Callable[[str], int], limits: budget.Window,
                 max_prompt_tokens: int = MAX_PROMPT_TOKENS) -> NextEditPrompt:
    """The prompt for the cursor on `line` of `document` (at `path`), from the document's recent
    `edits` (oldest first) and its text before them (`original`), with `context_files` (path,
    text; the most recently edited first)."""
    current = window(document, line)
    if not edits:
        return NextEditPrompt(None, current, silence="no recent edit")
    before = window(original, original_line(original, document, line))
    recent = [formats.RecentEdit(path, e.old_lines, e.new_lines, e.line, e.context_before, e.context_after)
              for e in edits]
    frame = _block([f"{formats.FILE_SEP}original/{path}", before.text, f"{formats.FILE_SEP}current/{path}",
                    current.text]) + f"{formats.FILE_SEP}updated/{path}"
    sections = [
        budget.Section("context files", tuple(budget.Item(name, count(_block([formats.FILE_SEP + name, text])), i)
                                              for i, (name, text) in reversed(list(enumerate(context_files))))),
        budget.Section("recent edits", tuple(
            budget.Item(f"edit {i + 1}", count(_block([f"{formats.FILE_SEP}{e.path}.diff", "original:", e.original,
                                                       "updated:", e.updated])), i)
            for i, e in enumerate(recent))),
        budget.Section("windows", (budget.Item("windows", count(frame)),), required=True),
    ]
    limit = max(0, limits.context_window - limits.reserved_output - limits.margin)
    capped = replace(limits, context_window=min(limits.context_window,
                                                max_prompt_tokens + limits.reserved_output + limits.margin)) \
        if max_prompt_tokens < limit else limits
    plan = budget.plan(sections, capped, margin=limits.margin)
    if plan.over_budget:
        return NextEditPrompt(None, current, plan, silence=plan.over_budget)
    files = sorted(item.payload for item in plan.section("context files").kept)
    kept = sorted(item.payload for item in plan.section("recent edits").kept)
    text = formats.sweep([context_files[i] for i in files], [recent[i] for i in kept], path, before.text, current.text)
    if text is None:
        return NextEditPrompt(None, current, plan, silence="a text holds one of the format's special tokens")
    return NextEditPrompt(text, current, plan)
