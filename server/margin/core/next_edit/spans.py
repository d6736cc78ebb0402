"""The one span where two texts (or two lists of lines) differ: what the edit history, the
decision on an answer and the prompt formats all need."""

from __future__ import annotations

from collections.abc import Sequence


def _common_prefix(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # the longest n with a[:n] == b[:n], by halving (each comparison runs in C)
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def changed_span(before: str, after: str) -> tuple[int, int, int]:
    """(start, end in `before`, end in `after`) of the one span that differs."""
    prefix = _common_prefix(before, after)
    suffix = _common_suffix(before, after, min(len(before), len(after)) - prefix)
    return prefix, len(before) - suffix, len(after) - suffix


def common_ends(old: Sequence[str], new: Sequence[str]) -> tuple[int, int]:
    """How many lines `old` and `new` share at the start, and then at the end (never counting a
    line twice)."""
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    tail = 0
    while tail < min(len(old), len(new)) - same and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return same, tail
