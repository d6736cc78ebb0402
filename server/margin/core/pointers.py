"""Compact pointers (SPEC K, seed 003): in a long session, content the model saw turns ago is
shown in the prompt as a pointer of a few tokens — `[t42 parser.py]` — that it can recall. The
thread in storage never changes; only the prompt does.

What is masked:
- a superseded snapshot of a file (a newer one is in the prompt): wherever it is — the newest
  snapshot of each file is never masked, and an older one is never shown whole;
- the edit-ops payload of an assistant reply (`[t42 ops]`) and a long reply (`[t42 reply]`):
  in turns outside the hot window, where the pointer is shorter.

Pointers are shown only when they pay (`Economy`, used by core.assemble): when what they stand
for is larger than they are with the legend and recall tool they bring, or when the prompt
needs the room. Otherwise a prompt shows none, and a superseded snapshot is left out.

The hot window is the last `HOT_TURNS` turns at least; the line it leaves behind moves in steps
of `MASK_BATCH` turns, so for most turns the start of the prompt is what it was the turn before
and the backend's prompt cache still holds it. When the history does not fit, the line moves on
in the same steps (more is masked) before any turn is dropped. Never masked: the current
request, the latest reply, the system prompt.

A turn is numbered by its user message (the first is t1); the file contexts stored with a turn
belong to it. A pointer names the turn and what it stands for: the file's name (its folder too
when two files of one turn share a name), `ops`, or `reply`.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from margin.core.thread_facts import facts
from margin.core.threads import FILE_CONTEXT, Message

HOT_TURNS = 3
"""The most recent turns whose replies and edit-ops are always shown whole."""
MASK_BATCH = 8
"""The masking line moves this many turns at a time."""
LONG_REPLY_TOKENS = 160
"""A reply longer than this is masked outside the hot window."""

OPS, REPLY = "ops", "reply"
OPS_HEADER = "Edits proposed (edit-ops):"

LEGEND = ("Text like [t12 parser.py] stands for content of an earlier turn that is no longer "
          "shown: t12 is the turn, then a file's name (that file as it was then), `ops` (the edits "
          "proposed then) or `reply` (the reply then).")
"""What pointers mean: the code-owned `pointer_legend` fragment of the templates."""
RECALL_BY_TOOL = "To see such content again, call the `recall` tool with the pointer."
RECALL_BY_USER = ("If you need such content, say which pointer; the user can show it to you again "
                  "(Margin: Recall).")

_POINTER = re.compile(r"^\s*\[?\s*t(\d+)\s+([^\]\n]*?)\s*\]?\s*$")


def pointer(turn: int, label: str) -> str:
    return f"[t{turn} {label}]"


def parse_pointer(text: str) -> tuple[int, str] | None:
    """(turn, label) of `[t42 parser.py]`, `t42 parser.py` and the like; None if it is none."""
    match = _POINTER.match(text)
    if match is None or not match.group(2):
        return None
    return int(match.group(1)), match.group(2)


def ops_block(ops: Sequence[Mapping[str, Any]]) -> str:
    """An edit-ops reply's ops as the prompt shows them after its message."""
    return f"{OPS_HEADER}\n{json.dumps(list(ops), ensure_ascii=False, separators=(',', ':'))}"


@dataclass(frozen=True, slots=True)  # made for every message of a thread, every request
class Part:
    """A part of a stored message as the prompt shows it: `text` whole, or `pointer` instead."""

    text: str
    pointer: str | None = None
    """None: never masked"""


@dataclass(frozen=True, slots=True)  # made for every message of a thread, every request
class Shown:
    """A stored message and its parts, with the turn it belongs to. A file context has one part,
    masked when superseded (the assembler knows which are); the others' parts are masked when
    their turn is outside the hot window."""

    message: Message
    turn: int
    parts: tuple[Part, ...]

    def view(self, line: int, count: Callable[[str], int] | None = None) -> tuple[list[str], list[str]]:
        """The parts' texts as shown when the turns up to `line` are outside the hot window, and
        the pointers among them; with `count`, a part is masked only if its pointer is shorter."""
        texts, pointers = [], []
        for part in self.parts:
            if part.pointer is not None and self.turn <= line and (count is None or saves(part, count) > 0):
                texts.append(part.pointer)
                pointers.append(part.pointer)
            else:
                texts.append(part.text)
        return texts, pointers


def saves(part: Part, count: Callable[[str], int]) -> int:
    """The tokens showing `part` as its pointer saves (0 for a part never masked)."""
    return count(part.text) - count(part.pointer) if part.pointer is not None else 0


def turn_numbers(history: Sequence[Message]) -> Sequence[int]:
    """The turn of each message: a user message starts the next turn; the file contexts stored
    before it belong to it."""
    return facts(history).turns


def user_turns(history: Sequence[Message]) -> int:
    """The user messages that start a turn."""
    return facts(history).users


def file_labels(contexts: Sequence[Message]) -> dict[int, str]:
    """Each file context's label, by message id: its file's name, with as many folders in front
    as it takes to tell apart files of the same name in the same turn."""
    paths = {m.id: str(m.meta.get("file_id") or m.uri or "file").rstrip("/").split("/") for m in contexts}
    named: dict[str, list[list[str]]] = {}  # only files of the same name can share a tail
    for parts in paths.values():
        named.setdefault(parts[-1], []).append(parts)
    labels: dict[int, str] = {}
    for id_, parts in paths.items():
        others = [other for other in named[parts[-1]] if other is not parts]
        depth = 1
        while depth < len(parts) and any(other[-depth:] == parts[-depth:] for other in others):
            depth += 1
        labels[id_] = "/".join(parts[-depth:])
    return labels


_LABELS: dict[tuple[tuple[int, str], ...], dict[int, str]] = {}


def _turn_labels(contexts: Sequence[Message]) -> dict[int, str]:
    """`file_labels` of a turn's contexts, made once: a stored turn's contexts never change, and
    every request shows the turns before it again. Kept by what decides them (ids and paths)."""
    key = tuple((m.id, str(m.meta.get("file_id") or m.uri or "file")) for m in contexts)
    labels = _LABELS.get(key)
    if labels is None:
        if len(_LABELS) >= 4096:
            _LABELS.clear()
        labels = _LABELS[key] = file_labels(contexts)
    return labels


def show(history: Sequence[Message], count: Callable[[str], int],
         render: Callable[[int, str], str] = pointer, after: int = 0) -> list[Shown]:
    """The messages a prompt may show (visible messages and file contexts) with their parts and
    pointers (`render(turn, label)`), of the turns after `after` (those up to it are folded into
    a summary: no prompt shows them). The latest reply is never masked."""
    found = facts(history)
    if found.rising:
        start = bisect_right(found.turns, after)
        kept = list(zip(history[start:], found.turns[start:]))
    else:
        kept = [(message, turn) for message, turn in zip(history, found.turns) if turn > after]
    by_turn: dict[int, list[Message]] = {}
    for message, turn in kept:
        if message.kind == FILE_CONTEXT:
            by_turn.setdefault(turn, []).append(message)
    labels: dict[int, str] = {}
    for contexts in by_turn.values():
        labels.update(_turn_labels(contexts))
    last_reply = next((m.id for m in reversed(history) if m.role == "assistant" and not m.hidden), None)
    global _made
    before, _made = _made, {}
    shown: list[Shown] = []
    for message, turn in kept:
        if message.hidden and message.kind != FILE_CONTEXT:
            continue
        older = message.role == "assistant" and message.id != last_reply  # the latest reply is never masked
        how = (turn, render, labels.get(message.id), older, older and count(message.content) > LONG_REPLY_TOKENS)
        made = before.get(id(message))
        if made is None or made[0] is not message or made[1] != how:
            made = (message, how, _shown(message, *how))
        _made[id(message)] = made
        shown.append(made[2])
    return shown


def _shown(message: Message, turn: int, render: Callable[[int, str], str], label: str | None, older: bool,
           long: bool) -> Shown:
    if message.kind == FILE_CONTEXT:
        return Shown(message, turn, (Part(message.content, render(turn, label or "")),))
    if message.role == "assistant":
        parts = [Part(message.content, render(turn, REPLY) if long else None)]
        if ops := message.meta.get("ops"):
            parts.append(Part(ops_block(ops), render(turn, OPS) if older else None))
        return Shown(message, turn, tuple(parts))
    return Shown(message, turn, (Part(message.content),))


_made: dict[int, tuple[Message, tuple[Any, ...], Shown]] = {}
"""What the last `show` made for each message, by the message's id() (with the message, so that a
new object at a reused id is not taken for it) and what it was made from: a thread's messages are
shown request after request the same way, but for the newest turns'. Only the last call's are
kept: the thread's timeline, which the store keeps, holds the same messages."""


def texts(shown: Sequence[Shown]) -> list[str]:
    """Every text a prompt may show for these messages other than their stored content: rendered
    edit-ops and pointers (for a caller that counts everything first)."""
    found = []
    for entry in shown:
        for part in entry.parts:
            if part.text is not entry.message.content:
                found.append(part.text)
            if part.pointer is not None:
                found.append(part.pointer)
    return found


def first_mask_line(current_turn: int) -> int:
    """The turns up to this one are outside the hot window when `current_turn` is asked."""
    return max(0, (current_turn - 1 - HOT_TURNS) // MASK_BATCH * MASK_BATCH)


def mask_lines(current_turn: int) -> list[int]:
    """The lines a prompt may mask up to, least masking first: the hot window's, then in steps of
    MASK_BATCH up to every turn before the current one."""
    first, last = first_mask_line(current_turn), max(0, current_turn - 1)
    lines = list(range(first, last, MASK_BATCH))
    return [*lines, last] if not lines or lines[-1] != last else lines


class Economy:
    """What pointers save and cost in a prompt (core.assemble), in tokens; `overhead` is what a
    message costs besides its text. They pay when what they stand for — superseded
    file contexts, and the parts of turns up to the masking line — is larger than they are with
    the legend and tool (`fixed`) they bring. Against the prompt shown without them, where a
    superseded context is left out, they change the size by `gain`."""

    def __init__(self, shown: Sequence[Shown], skip_contexts: set[str], latest: dict[str, Message],
                 fixed: int, count: Callable[[str], int], overhead: int) -> None:
        saved: dict[int, int] = {}
        self.fixed, self.superseded_saved, self.cost = fixed, 0, fixed
        for entry in shown:
            message = entry.message
            if message.kind == FILE_CONTEXT:
                if message.uri in skip_contexts or latest.get(message.uri or "") is not message:
                    self.superseded_saved += max(0, saves(entry.parts[0], count))
                    self.cost += count(entry.parts[0].pointer or "") + overhead
                continue
            for part in entry.parts:
                if (gain := saves(part, count)) > 0:
                    saved[entry.turn] = saved.get(entry.turn, 0) + gain
        self.turns = sorted(saved)
        self.running = [0, *accumulate(saved[turn] for turn in self.turns)]

    def masked(self, line: int) -> int:
        return self.running[bisect_right(self.turns, line)]

    def pay(self, line: int) -> bool:
        """what pointers stand for at `line` is larger than they are, legend and tool included"""
        return self.superseded_saved + self.masked(line) > self.fixed

    def gain(self, line: int) -> int:
        """tokens saved against the prompt without pointers (negative: they add tokens)"""
        return self.masked(line) - self.cost

    def line_for(self, lines: Sequence[int], over: int) -> int | None:
        """The first of `lines` (least masking first) whose pointers save `over` tokens against
        none, else the last if they save anything there, else None (no pointers)."""
        gains = [self.gain(line) for line in lines]  # nondecreasing
        at = bisect_left(gains, over)
        if at < len(lines):
            return lines[at]
        return lines[-1] if gains[-1] > 0 else None


@dataclass(frozen=True)
class Recalled:
    pointer: str
    message: Message
    content: str
    """exactly what the pointer stood for"""
    fingerprint: str | None
    """the file's sha256 at that turn, for a file"""
    uri: str | None


def resolve(history: Sequence[Message], text: str) -> Recalled | None:
    """What a pointer stood for, from the stored thread; None if it names nothing there."""
    parsed = parse_pointer(text)
    if parsed is None:
        return None
    turn, label = parsed
    for shown in show(history, lambda _text: LONG_REPLY_TOKENS + 1):
        if shown.turn != turn:
            continue
        for part in shown.parts:
            if part.pointer == pointer(turn, label):
                message = shown.message
                return Recalled(part.pointer, message, part.text,
                                message.fingerprint if message.kind == FILE_CONTEXT else None, message.uri)
    return None


def changed_since(found: Recalled, history: Sequence[Message],
                  open_fingerprint: Callable[[str], str | None]) -> bool | None:
    """For a file: whether it has changed since the recalled snapshot (against the open file, else
    the newest stored snapshot); None for anything else."""
    if found.message.kind != FILE_CONTEXT or not found.uri:
        return None
    newest = open_fingerprint(found.uri) or next(
        m.fingerprint for m in reversed(history) if m.kind == FILE_CONTEXT and m.uri == found.uri)
    return newest != found.fingerprint
