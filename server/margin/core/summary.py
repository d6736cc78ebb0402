"""The bounded summary of a long thread (SPEC K; ADR "bounded tail and optional bounded
summary"): when the history no longer fits even with pointers, its oldest turns are folded into
a summary that the chat model writes in the background after a turn — never on the request
path; until it is ready, plain truncation applies.

The summary is stored in the thread as a hidden message (kind `thread_summary`) with the turns it
covers (`to_turn`) and the id of the last message it folds (`upto_id`); a newer one covers more
and replaces the older in prompts (the older stays stored). It is made incrementally: the
previous summary and the turns folded since are summarised together. Its size is bounded by
`summary_tokens(window)`: about a sixteenth of the window, within 512–2048 tokens.

A prompt with a summary shows it first (after the system prompt), then the turns after it. The
turns folded are never shown again; their file snapshots stay stored, and pointers to them can
still be recalled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from margin.core.pointers import Shown, show
from margin.core.thread_facts import facts
from margin.core.threads import FILE_CONTEXT, SUMMARY, Message, NewMessage

SUMMARY_ROLE: Final = "user"
HEADER = "Summary of the conversation before turn {next} (turns {first}–{last}, written by Margin):"
FOLD_TRIGGER = 0.8
"""A summary is made after a turn whose history took more than this share of what it could hold
(or lost turns)."""
FOLD_TARGET = 0.5
"""Folding leaves the turns after the summary at about this share of that room."""
KEEP_TURNS = 2
"""The most recent turns are never folded (the latest request and reply among them)."""


def summary_tokens(window: int) -> int:
    """The summary's bound: about a sixteenth of the window, within 512–2048 tokens."""
    return max(512, min(2048, window // 16))


@dataclass(frozen=True)
class Summary:
    text: str
    first_turn: int
    to_turn: int
    upto_id: int
    """the id of the last stored message it folds"""

    def shown(self) -> str:
        """The summary as the prompt shows it."""
        return f"{HEADER.format(next=self.to_turn + 1, first=self.first_turn, last=self.to_turn)}\n{self.text}"

    def stored(self, tokens: dict[str, int] | None = None) -> NewMessage:
        return NewMessage(SUMMARY_ROLE, self.text, hidden=True, kind=SUMMARY, tokens=tokens or {},
                          meta={"first_turn": self.first_turn, "to_turn": self.to_turn, "upto_id": self.upto_id})


def latest_summary(history: Sequence[Message]) -> Summary | None:
    """The stored summary that covers the most turns."""
    best = facts(history).summary
    if best is None:
        return None
    return Summary(best.content, int(best.meta.get("first_turn", 1)), int(best.meta["to_turn"]),
                   int(best.meta["upto_id"]))


@dataclass(frozen=True)
class Fold:
    """The turns to fold into the next summary: after `previous` up to `to_turn`."""

    previous: Summary | None
    turns: tuple[tuple[int, tuple[Shown, ...]], ...]
    """(turn, its messages) oldest first"""

    @property
    def to_turn(self) -> int:
        return self.turns[-1][0]

    @property
    def upto_id(self) -> int:
        return self.turns[-1][1][-1].message.id


def turns_after(shown: Sequence[Shown], summary: Summary | None) -> list[tuple[int, tuple[Shown, ...]]]:
    """The turns a prompt shows after `summary`, oldest first, each with its messages."""
    grouped: dict[int, list[Shown]] = {}
    for entry in shown:
        if summary is not None and (entry.turn <= summary.to_turn or entry.message.id <= summary.upto_id):
            continue
        grouped.setdefault(entry.turn, []).append(entry)
    return [(turn, tuple(entries)) for turn, entries in sorted(grouped.items())]


def plan_fold(shown: Sequence[Shown], summary: Summary | None, room: int,
              tokens: Callable[[Shown], int]) -> Fold | None:
    """What to fold so that the turns after the summary take about FOLD_TARGET of `room` (the
    tokens the history may hold), never the last KEEP_TURNS turns; None when nothing need be."""
    turns = turns_after(shown, summary)
    sizes = [sum(tokens(entry) for entry in entries) for _, entries in turns]
    total = sum(sizes)
    if total <= FOLD_TRIGGER * room or len(turns) <= KEEP_TURNS:
        return None
    folded, left = 0, total
    while folded < len(turns) - KEEP_TURNS and left > FOLD_TARGET * room:
        left -= sizes[folded]
        folded += 1
    return Fold(summary, tuple(turns[:folded])) if folded else None


def render_turns(fold: Fold, line: int) -> str:
    """The folded turns as the summariser reads them: each message with its turn, file contexts
    as their pointers (the summary keeps names, not contents), masked parts as pointers."""
    out = []
    for turn, entries in fold.turns:
        for entry in entries:
            message = entry.message
            if message.kind == FILE_CONTEXT:
                out.append(f"(t{turn}) file shown: {entry.parts[0].pointer}")
                continue
            texts, _ = entry.view(line)
            who = "User" if message.role == "user" else "Assistant"
            out.append(f"(t{turn}) {who}: " + "\n\n".join(texts))
    return "\n\n".join(out)


def request_text(fold: Fold, line: int, bound: int) -> str:
    """The user message of the summarising request."""
    previous = (f"The summary so far (turns {fold.previous.first_turn}–{fold.previous.to_turn}):\n"
                f"{fold.previous.text}\n\n") if fold.previous else ""
    first = fold.previous.to_turn + 1 if fold.previous else fold.turns[0][0]
    return (f"{previous}The turns to fold in (t{first}–t{fold.to_turn}):\n\n{render_turns(fold, line)}\n\n"
            f"Write the updated summary of turns {fold.previous.first_turn if fold.previous else first}–"
            f"{fold.to_turn} in at most {bound * 3 // 4} words.")


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")


def identifiers(text: str) -> set[str]:
    """The names in `text` that look like code rather than prose: with an underscore, a digit, a
    capital inside (camelCase), or a dot (a file or a dotted name), at least 3 characters."""
    return {name for name in _IDENTIFIER.findall(text) if len(name) >= 3 and (
        "_" in name or "." in name or any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:]))}


@dataclass(frozen=True)
class Coverage:
    """How much of the folded turns a summary keeps: identifiers in those turns, those the
    summary names, and those still recallable (in content a pointer stands for)."""

    total: int
    in_summary: int
    kept: int
    """in the summary or recallable"""

    @property
    def share(self) -> float:
        return self.kept / self.total if self.total else 1.0


def coverage(folded: Sequence[str], recallable: Sequence[str], summary: str) -> Coverage:
    """`folded`: the texts of the folded turns as they were written (messages, replies, files);
    `recallable`: those of them a pointer can still bring back (file snapshots, edit-ops, long
    replies)."""
    wanted = set().union(*map(identifiers, folded)) if folded else set()
    named = {name for name in wanted if name in summary}
    still = set().union(*map(identifiers, recallable)) if recallable else set()
    return Coverage(len(wanted), len(named), len(named | (wanted & still)))


def thread_coverage(history: Sequence[Message], count: Callable[[str], int]) -> Coverage | None:
    """The coverage of the thread's latest summary (None without one): the folded turns' texts,
    and as recallable their file snapshots, edit-ops and long replies (what pointers stand for)."""
    summary = latest_summary(history)
    if summary is None:
        return None
    folded = [entry for entry in show(history, count) if entry.turn <= summary.to_turn]
    texts = [part.text for entry in folded for part in entry.parts]
    recallable = [part.text for entry in folded for part in entry.parts
                  if part.pointer is not None or entry.message.kind == FILE_CONTEXT]
    return coverage(texts, recallable, summary.text)
