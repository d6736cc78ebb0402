"""What a request reads off its thread's whole timeline — each message's turn, the latest
context of each file, the summary that folds the most turns — carried on from the last
request's timeline rather than read again from the start.

A thread only grows: the timeline a request reads is the last one's, the same message objects
(the store keeps them), with a turn or two added (core.growing).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import le

from margin.core.growing import Growing
from margin.core.threads import FILE_CONTEXT, SUMMARY, Message


@dataclass(frozen=True)
class Facts:
    turns: tuple[int, ...] = ()
    """each message's turn: a user message starts the next one, and the file contexts stored
    before it belong to it"""
    rising: bool = True
    """the turns never decrease along the timeline (as the chat service stores a turn: its file
    contexts just before its user message)"""
    users: int = 0
    """the user messages that start a turn"""
    latest: Mapping[str, Message] = field(default_factory=dict)
    """the newest context of each file, by URI"""
    superseded: tuple[int, ...] = ()
    """the ids of the contexts a newer one of the same file replaced, oldest first"""
    summary: Message | None = None
    """the stored summary that folds the most turns (the newest of those)"""


def _step(facts: Facts, new: tuple[Message, ...]) -> Facts:
    turn, turns = facts.users, []
    latest, superseded, summary = dict(facts.latest), list(facts.superseded), facts.summary
    for message in new:
        kind = message.kind
        if kind == FILE_CONTEXT:
            turns.append(turn + 1)  # the turn of the next user message
            if message.uri:
                if (before := latest.get(message.uri)) is not None:
                    superseded.append(before.id)
                latest[message.uri] = message
            continue
        if message.role == "user" and not message.hidden:
            turn += 1
        turns.append(max(turn, 1))
        if kind == SUMMARY and (summary is None or _folds(message) > _folds(summary)):
            summary = message
    rising = facts.rising and all(map(le, [facts.turns[-1] if facts.turns else 0, *turns], turns))
    return Facts((*facts.turns, *turns), rising, turn, latest, (*superseded,), summary)


def _folds(message: Message) -> tuple[int, int]:
    return int(message.meta.get("to_turn", 0)), message.id


facts: Growing[Message, Facts] = Growing(Facts(), _step)
"""The facts of a timeline (one thread's at a time are kept)."""


def after_turn(history: Sequence[Message], turn: int) -> Sequence[Message]:
    """The messages of the turns after `turn`, oldest first."""
    found = facts(history)
    if found.rising:
        return history[bisect_right(found.turns, turn):]
    return [message for message, its in zip(history, found.turns) if its > turn]
