"""The facts a request reads off its thread's timeline (core.thread_facts), carried on from the
last timeline (core.growing): the same as read from the start, whatever was read before."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from margin.core import pointers
from margin.core.growing import Growing
from margin.core.summary import latest_summary
from margin.core.thread_facts import Facts, _step, after_turn, facts
from margin.core.threads import FILE_CONTEXT, SUMMARY, Message


def numbered(history: list[Message]) -> list[int]:
    """The rule (SPEC K): a user message starts the next turn; file contexts stored before it
    belong to it; contexts stored last belong to the turn to come."""
    turns, turn, waiting = [0] * len(history), 0, []
    for i, message in enumerate(history):
        if message.kind == FILE_CONTEXT:
            waiting.append(i)
            continue
        if message.role == "user" and not message.hidden:
            turn += 1
            for j in waiting:
                turns[j] = turn
            waiting.clear()
        turns[i] = max(turn, 1)
    for j in waiting:
        turns[j] = turn + 1
    return turns


def read_from_the_start(history: list[Message]) -> Facts:
    latest: dict[str, Message] = {}
    superseded = []
    for message in history:
        if message.kind == FILE_CONTEXT and message.uri:
            if message.uri in latest:
                superseded.append(latest[message.uri].id)
            latest[message.uri] = message
    summaries = [m for m in history if m.kind == SUMMARY]
    best = max(summaries, key=lambda m: (int(m.meta.get("to_turn", 0)), m.id)) if summaries else None
    turns = numbered(history)
    return Facts(tuple(turns), turns == sorted(turns), sum(m.role == "user" and not m.hidden and m.kind != FILE_CONTEXT
                                               for m in history), latest, tuple(superseded), best)


KINDS = st.sampled_from(["user", "hidden user", "assistant", "context a", "context b", "context", "summary"])


def thread(kinds: list[str], to_turns: list[int]) -> list[Message]:
    ids, folds = itertools.count(1), iter(to_turns)

    def message(kind: str) -> Message:
        id_ = next(ids)
        if kind.startswith("context"):
            uri = f"file:///ws/{kind[-1]}.py" if kind != "context" else None
            return Message("user", f"file {id_}", hidden=True, kind=FILE_CONTEXT, uri=uri, id=id_)
        if kind == "summary":
            return Message("user", f"summary {id_}", hidden=True, kind=SUMMARY,
                           meta={"to_turn": next(folds, 1), "first_turn": 1, "upto_id": id_ - 1}, id=id_)
        role = "assistant" if kind == "assistant" else "user"
        return Message(role, f"{kind} {id_}", hidden=kind == "hidden user", id=id_)

    return [message(kind) for kind in kinds]


@settings(max_examples=300, deadline=None)
@given(st.lists(KINDS, max_size=40), st.lists(st.integers(0, 9), max_size=8), st.lists(st.integers(0, 40), max_size=4))
def test_facts_carried_on_over_a_growing_timeline_are_those_read_from_the_start(kinds, to_turns, cuts):
    history = thread(kinds, to_turns)
    for cut in sorted(cuts):  # the timeline as earlier requests read it, then as it is now
        facts(history[:cut])
    assert facts(tuple(history)) == read_from_the_start(history)
    assert facts(list(history)) == read_from_the_start(history)  # a list: the same objects
    assert list(pointers.turn_numbers(history)) == numbered(history)
    summary = latest_summary(history)
    best = read_from_the_start(history).summary
    assert (summary.upto_id if summary else None) == (int(best.meta["upto_id"]) if best else None)
    for turn in range(6):
        assert list(after_turn(history, turn)) == [m for m, t in zip(history, numbered(history)) if t > turn]


def test_only_the_new_messages_are_read_when_the_timeline_grew():
    """What makes a long thread's request cheap: the last request's facts go on over the turn
    added since (the steps see the new messages alone), and a timeline of other objects — read
    afresh, or another thread's — is read from the start."""
    seen: list[int] = []

    def step(made: Facts, new: tuple[Message, ...]) -> Facts:
        seen.append(len(new))
        return _step(made, new)

    grown: Growing[Message, Facts] = Growing(Facts(), step)
    history = thread(["context a", "user", "assistant"] * 30, [])
    assert grown(tuple(history[:60])) == read_from_the_start(history[:60])
    assert grown(tuple(history)) == read_from_the_start(history) and seen == [60, 30]
    same = tuple(history)
    assert grown(same) is grown(same) and seen == [60, 30, 0]  # once more: no step at all
    afresh = thread(["context a", "user", "assistant"] * 30, [])  # equal, but other objects
    assert grown(afresh) == read_from_the_start(afresh) and seen[-1] == 90
    assert grown(afresh[:10]) == read_from_the_start(afresh[:10]) and seen[-1] == 10  # shorter: anew
