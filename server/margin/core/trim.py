"""Line-aligned trimming of the text around the cursor: keep the lines nearest the cursor that
fit an allowance of tokens, counted exactly."""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate
from typing import Literal

from margin.core.budget import Trimmed, Trimmer


def line_trimmer(text: str, keep: Literal["start", "end"], count: Callable[[str], int]) -> Trimmer:
    """A Trimmer for `text`. `keep="end"` keeps the last lines (a prefix: the lines just above
    the cursor); `keep="start"` keeps the first lines (a suffix). Lines are estimated one by one
    (counts are cached), then the kept text is counted whole and moved a line at a time until it
    is the longest that fits: never over the allowance."""
    lines = text.splitlines(keepends=True)
    ordered = lines[::-1] if keep == "end" else lines
    running = list(accumulate(count(line) for line in ordered))

    def join(n: int) -> str:
        return "".join(lines[len(lines) - n :]) if keep == "end" else "".join(lines[:n])

    def trim(allowance: int) -> Trimmed:
        n = sum(1 for total in running if total <= allowance)
        kept = join(n)
        tokens = count(kept)
        while n and tokens > allowance:  # the whole counts more than its lines did
            n -= 1
            kept = join(n)
            tokens = count(kept)
        while n < len(lines) and count(longer := join(n + 1)) <= allowance:  # or less
            n += 1
            kept = longer
            tokens = count(kept)
        return Trimmed(kept, tokens, len(lines) - n)

    return trim
