"""The next-edit prompt, counted exactly and cut like every prompt (SPEC B/D, M), in the model's
format: Sweep's (`<|file_sep|>` sections, for Sweep's next-edit models), Zeta's (the edits as
diff hunks and the excerpt with its editable region — the window — and the cursor marked, for
Zed's Zeta models), or the chat route's (the same parts in words, for an instruction model, with
the `nextEdit` template as its system prompt).

What is never cut: the window around the cursor as it is now and as it was before the edits, the
framing, and the chat route's system prompt. What is cut, in order, when it does not fit: the
context files (the least recently edited first), then the recent edits (the oldest first).
Besides the model's window less its output, the prompt keeps to `max_prompt_tokens` (Sweep's
reference: 7,000 — a next-edit model is trained on prompts that size, and a small prompt is a
fast answer). With no edit to go on, or a special token in a text, nothing is sent.

Counting is the caller's (`count`, sync: the texts `pieces` names are counted beforehand where
the tokenizer is the model server's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from margin.core import budget
from margin.core.next_edit import formats
from margin.core.next_edit.decide import WINDOW_ABOVE, WINDOW_BELOW, Window, window
from margin.core.next_edit.history import Edit
from margin.core.next_edit.spans import common_ends

MAX_PROMPT_TOKENS = 7000
FENCE = "```"


@dataclass(frozen=True)
class NextEditPrompt:
    text: str | None
    """the whole prompt (Sweep) or the user message (chat); None: nothing is sent (`silence`)"""
    current: Window
    plan: budget.Plan | None = None
    silence: str | None = None


@dataclass(frozen=True)
class Parts:
    """What a prompt is made of, before the budget: each as its format writes it."""

    files: list[str]
    """context files' blocks, the most recently edited first"""
    edits: list[str]
    """recent edits' blocks, the oldest first"""
    frame: str
    """the windows and the framing: never cut"""
    recent: list[formats.RecentEdit]
    before: Window
    current: Window
    excerpt: tuple[str, str, tuple[int, int], tuple[int, int], int] | None = None
    """Zeta's: the path, the document, the excerpt's span, the editable span (the window) and the
    cursor (the end of its line)"""


def original_line(original: str, current: str, line: int) -> int:
    """The line of `original` that `line` of `current` was, as far as the text says: the same
    line above the first change, shifted by the lines added or removed below the last one, and
    in proportion in between."""
    old, new = original.split("\n"), current.split("\n")
    first, same = common_ends(old, new)
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


def _fenced(text: str) -> str:
    return f"{FENCE}\n{text}\n{FENCE}"


ZETA_CONTEXT_LINES = 10
"""lines of the excerpt shown on each side of the editable region (the window)"""


def parts(route: str, path: str, document: str, line: int, edits: Sequence[Edit], original: str,
          context_files: Sequence[tuple[str, str]]) -> Parts:
    """The prompt's parts for `route` ("sweep", "zeta" or "chat")."""
    current = window(document, line)
    before = window(original, original_line(original, document, line))
    recent = [formats.RecentEdit(path, e.old_lines, e.new_lines, e.line, e.context_before, e.context_after)
              for e in edits]
    sep = formats.FILE_SEP
    if route == "sweep":
        return Parts([_block([sep + name, text]) for name, text in context_files],
                     [_block([f"{sep}{e.path}.diff", "original:", e.original, "updated:", e.updated]) for e in recent],
                     _block([f"{sep}original/{path}", before.text, f"{sep}current/{path}", current.text])
                     + f"{sep}updated/{path}", recent, before, current)
    if route == "zeta":  # no context files in Zeta's format
        wider = window(document, line, WINDOW_ABOVE + ZETA_CONTEXT_LINES, WINDOW_BELOW + ZETA_CONTEXT_LINES)
        line_start = current.start + sum(len(text) + 1 for text in current.text.split("\n")[: line - current.first_line])
        end_of_line = document.find("\n", line_start)
        cursor = len(document) if end_of_line < 0 else end_of_line
        excerpt = (path, document, (wider.start, wider.end), (current.start, current.end), cursor)
        frame = formats.ZETA_INSTRUCTION + formats.ZETA_EXCERPT \
            + formats.zeta_excerpt(path, document, excerpt[2], excerpt[3], cursor) + formats.ZETA_RESPONSE
        return Parts([], [formats.zeta_event(e) + "\n\n" for e in recent], frame, recent, before, current, excerpt)
    cursor_line = line - current.first_line + 1
    return Parts([f"Another file the user edited, {name}:\n{_fenced(text)}\n\n" for name, text in context_files],
                 [f"An edit the user made to {e.path}, before:\n{_fenced(e.original)}\nafter:\n{_fenced(e.updated)}\n\n"
                  for e in recent],
                 # (a window that reaches the end of the file ends with an empty line: not shown here)
                 f"The window of {path} before those edits:\n{_fenced(before.text.rstrip(chr(10)))}\n\n"
                 f"The window now (the cursor is on its line {cursor_line}):\n{_fenced(current.text.rstrip(chr(10)))}",
                 recent, before, current)


def next_edit_prompt(route: str, found: Parts, context_files: Sequence[tuple[str, str]], count: Callable[[str], int],
                     limits: budget.Window, system: str = "", max_prompt_tokens: int = MAX_PROMPT_TOKENS) -> NextEditPrompt:
    """The prompt from `found` (parts()), under the budget."""
    current = found.current
    if not found.recent:
        return NextEditPrompt(None, current, silence="no recent edit")
    sections = [
        budget.Section("context files", tuple(budget.Item(context_files[i][0], count(found.files[i]), i)
                                              for i in reversed(range(len(found.files))))),
        budget.Section("recent edits", tuple(budget.Item(f"edit {i + 1}", count(text), i)
                                             for i, text in enumerate(found.edits))),
        budget.Section("windows", (budget.Item("windows", count(found.frame)),), required=True),
    ]
    if system:
        sections.insert(0, budget.Section("system prompt", (budget.Item("system prompt", count(system)),),
                                          required=True, is_system=True))
    limit = max(0, limits.context_window - limits.reserved_output - limits.margin)
    capped = replace(limits, context_window=min(limits.context_window,
                                                max_prompt_tokens + limits.reserved_output + limits.margin)) \
        if max_prompt_tokens < limit else limits
    try:
        plan = budget.plan(sections, capped, margin=limits.margin)
    except budget.SystemPromptTooLarge as error:
        return NextEditPrompt(None, current, silence=str(error))
    if plan.over_budget:
        return NextEditPrompt(None, current, plan, silence=plan.over_budget)
    files = sorted(item.payload for item in plan.section("context files").kept)
    kept = sorted(item.payload for item in plan.section("recent edits").kept)
    if route == "zeta" and found.excerpt is not None:
        text = formats.zeta([found.recent[i] for i in kept], *found.excerpt)
    elif route == "sweep":
        text = formats.sweep([context_files[i] for i in files], [found.recent[i] for i in kept], found.recent[0].path,
                             found.before.text, current.text)
    else:
        shown = [found.recent[i] for i in kept]
        if any(FENCE in t for t in [found.before.text, current.text, *(e.original + e.updated for e in shown),
                                    *(context_files[i][1] for i in files)]):
            return NextEditPrompt(None, current, plan, silence="a text holds a code fence, which would end its block")
        text = "".join(found.files[i] for i in files) + "".join(found.edits[i] for i in kept) + found.frame
    if text is None:
        return NextEditPrompt(None, current, plan, silence="a text holds one of the format's special tokens")
    return NextEditPrompt(text, current, plan)


def sweep_prompt(path: str, document: str, line: int, edits: Sequence[Edit], original: str,
                 context_files: Sequence[tuple[str, str]], count: Callable[[str], int], limits: budget.Window,
                 max_prompt_tokens: int = MAX_PROMPT_TOKENS) -> NextEditPrompt:
    """Sweep's prompt for the cursor on `line` of `document` (at `path`), from the document's
    recent `edits` (oldest first) and its text before them (`original`), with `context_files`
    (path, text; the most recently edited first)."""
    found = parts("sweep", path, document, line, edits, original, context_files)
    return next_edit_prompt("sweep", found, context_files, count, limits, max_prompt_tokens=max_prompt_tokens)
