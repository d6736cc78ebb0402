"""Timing helpers: interleaved rounds and medians, so two things are measured under the same
load."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def interleaved(rounds: int, **runs: Callable[[], object]) -> dict[str, float]:
    """Median seconds of each run, alternating them round by round."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"
