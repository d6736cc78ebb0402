"""A value made from a sequence that only grows, carried on over what was added.

A thread only grows: the timeline a request reads is the last one's — the same message
objects, which the store keeps — with a turn or two added. `Growing` keeps the last sequence it
was given and what was made of it; given a sequence that starts with exactly those objects, it
goes on over the new ones alone. Any other sequence (another thread, a timeline read afresh
after another server's write) is made from the start, so a result never depends on what came
before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import is_not
from typing import Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")


class Growing(Generic[T, S]):
    """`step(made, new items)` → what is made of the items so far, from `start`; `step` must
    not change what it is given (a caller may hold it)."""

    def __init__(self, start: S, step: Callable[[S, tuple[T, ...]], S]) -> None:
        self._start, self._step = start, step
        self._last: tuple[tuple[T, ...], S] | None = None

    def __call__(self, items: Sequence[T]) -> S:
        given = items if isinstance(items, tuple) else tuple(items)
        last = self._last
        if last is not None and last[0] is given:
            return last[1]
        if last is not None and len(given) >= len(last[0]) and not any(map(is_not, given, last[0])):
            made = self._step(last[1], given[len(last[0]):])
        else:
            made = self._step(self._start, given)
        self._last = (given, made)
        return made
