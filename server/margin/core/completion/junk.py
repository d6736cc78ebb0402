"""Silence over junk (core/completion/postprocess.py): an answer that is not code for the cursor
is no suggestion, or is cut where it stops being one. Small chat models answer a hole with their
own instructions, or copy the file they were shown; a tool that is unsure says nothing.

- **instructions**: the answer repeats Margin's own prompt text — a run of `ECHO_WORDS` words of
  the instructions the model was sent, the hole's marker, or a chat template's turn header
  (`<|im_start|>user`) — so it is no suggestion; the next-edit and selection-edit answers go by
  the same rule with their own instructions, the code they rewrite allowed (services/next_edit.py,
  services/selection_edit.py);
- **file copy**: from the line where the answer starts writing one of the file's top-level
  definitions again at the top level (its first line and the next, whitespace normalised), it
  is cut; nothing is left when that is its first line (a repeat of the lines right above the
  cursor, and of the text after it, already go by postprocess's rules);
- **misplaced**: a definition written for column 0 (its body indented one level from there)
  where the cursor is inside an indented body: it cannot stand at the cursor, so it is dropped.

Each gives the reason a suggestion was not shown (`Silence`), logged as metadata and counted by
the evaluations."""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass

from margin.core.completion.code_shape import line_width

ECHO_WORDS = 8
"""words in a row from the instructions that make an answer an echo of them (a docstring may
share a few words with them by chance; eight in a row it does not)"""
MARKERS = ("{{FILL_HERE}}", "FILL_HERE")
"""the hole's marker in the chat route's prompt (core/completion/formats.py HOLE_MARKER)"""
RUN_CHARS = 16
"""the characters a definition's first two lines must hold to count as a copy of it"""
_WORD = re.compile(r"[a-z0-9']+")
_TURN = re.compile(r"\s*(?:<\|im_start\|>|<start_of_turn>|<\|start_header_id\|>)\s*(?:user|assistant|system|model)\b")
"""a chat template's turn header: the model went on writing the conversation, not code"""
_DEFINITION = re.compile(r"^(?:async\s+def|def|class|function|func|fn)\s+\w+")
REASONS = ("empty", "instructions", "file copy", "misplaced", "nothing new")


@dataclass(frozen=True)
class Silence:
    """Why nothing is shown: one of REASONS."""

    reason: str


def normal(line: str) -> str:
    return " ".join(line.split())


@functools.lru_cache(maxsize=8)
def _grams(instructions: str) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(instructions.lower())
    return frozenset(tuple(words[i:i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1))


def echoes_instructions(text: str, instructions: str, raw: str = "", allowed: str = "") -> bool:
    """The answer holds the hole's marker, or `ECHO_WORDS` words in a row of `instructions`, or
    (`raw`, before its markup was taken off) starts with a chat template's turn header. A marker
    or a run of words that `allowed` holds too (the code a rewrite is of) does not count."""
    if any(marker in text and marker not in allowed for marker in MARKERS) or _TURN.match(raw):
        return True
    if not instructions:
        return False
    grams = _grams(instructions)
    words = _WORD.findall(text.lower())
    echoed = {tuple(words[i:i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1)} & grams
    if echoed and allowed:
        own = _WORD.findall(allowed.lower())
        echoed -= {tuple(own[i:i + ECHO_WORDS]) for i in range(len(own) - ECHO_WORDS + 1)}
    return bool(echoed)


def misplaced(lines: list[str], typed: str) -> bool:
    """A definition at column 0 whose body is indented no further than the cursor is, while the
    cursor is on an indented, otherwise empty line: written for the top level, not for here."""
    if typed.strip() or not typed:
        return False
    nonblank = [line for line in lines if line.strip()]
    if len(nonblank) < 2 or line_width(nonblank[0]) or not _DEFINITION.match(nonblank[0]):
        return False
    return 0 < line_width(nonblank[1]) <= line_width(typed)


def _whole_lines(prefix: str, suffix: str) -> tuple[list[str], list[str]]:
    """The file's nonblank whole lines above the cursor's line and below it, as they are."""
    above = prefix[-200_000:].replace("\r\n", "\n").split("\n")[:-1]
    below = suffix[:200_000].replace("\r\n", "\n").split("\n")[1:]
    return [line for line in above if line.strip()], [line for line in below if line.strip()]


def before_file_copy(lines: list[str], typed: str, prefix: str, suffix: str) -> list[str]:
    """`lines` up to the first that starts a copy of a top-level definition of the file, written
    at the top level again: its first line and the next, as the file has them (whitespace
    normalised). A repeat of the lines right above the cursor at the answer's start, and of the
    text after the cursor at its end, go by postprocess's own rules; other repeats are kept, since
    real code repeats lines (`state = "mixed"` / `break` twice in one function) and whole methods
    (httpx's `_build_auth_header`, the same in two classes)."""
    whole = [typed + lines[0] if lines else "", *lines[1:]]
    if not any(not line_width(line) and _DEFINITION.match(line) for line in whole):
        return lines  # the file is read only for an answer that writes a top-level definition
    above, below = _whole_lines(prefix, suffix)
    known = above + below
    top = {(normal(a), normal(b)) for a, b in itertools.pairwise(known)
           if not line_width(a) and _DEFINITION.match(a) and len(normal(a)) + len(normal(b)) >= RUN_CHARS}
    nonblank = [i for i, line in enumerate(whole) if line.strip()]
    for k, i in enumerate(nonblank[:-1]):
        if not line_width(whole[i]) and (normal(whole[i]), normal(whole[nonblank[k + 1]])) in top:
            return lines[:i]
    return lines
