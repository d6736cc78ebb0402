"""Timing helpers: interleaved rounds and medians, so two things are measured under the same
load; and the verdict on each target, kept so the benchmark exits non-zero when one is missed.

On a loaded machine (`MARGIN_BENCH_LOADED=1`: CI, where the benchmarks share two cores with
whatever else runs) only what load cannot move is held to its target exactly: counts, sizes and
quality. Ratios measured side by side are held to their target with a margin (LOADED_MARGIN), and
absolute times are printed but not judged.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Literal

LOADED = os.environ.get("MARGIN_BENCH_LOADED") == "1"
LOADED_MARGIN = 1.5
"""How much worse a side-by-side ratio may be on a loaded machine."""
MISSED: list[str] = []


def interleaved(rounds: int, **runs: Callable[[], object]) -> dict[str, float]:
    """Median seconds of each run, alternating them round by round."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def verdict(value: float, target: float, *, at_least: bool = False,
            kind: Literal["ratio", "time", "exact"] = "ratio", what: str = "") -> str:
    """Whether `value` meets `target` (at most, or `at_least`), as the benchmark prints it; a miss
    is remembered for `finish`. `kind`: a ratio measured side by side, an absolute time, or a
    figure load does not change (a count, a size, a score)."""
    if LOADED and kind == "time":
        return "(a time: not judged on a loaded machine)"
    limit = target
    if LOADED and kind == "ratio":
        limit = target / LOADED_MARGIN if at_least else target * LOADED_MARGIN
    ok = value >= limit if at_least else value <= limit
    if not ok:
        MISSED.append(f"{what or 'a target'}: {value:g} against {'>=' if at_least else '<='} {limit:g}")
    shown = "met" if ok else "MISSED"
    return shown + (f" (loaded machine: {'>=' if at_least else '<='} {limit:g})" if limit != target else "")


def finish() -> int:
    """The exit status: 1 when any target was missed, each named."""
    for miss in MISSED:
        print(f"MISSED {miss}")
    return 1 if MISSED else 0
