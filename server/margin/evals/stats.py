"""Pass rates compared on the same problems: the paired difference of two pass@1 figures and its
95% interval, by Newcombe's hybrid score method for paired proportions (Newcombe 1998, "Improved
confidence intervals for the difference between binomial proportions based on paired data",
method 10): Wilson intervals for each rate, combined through the correlation of the pairs. It
stays inside [-1, 1] and is not degenerate when few problems differ, where the plain normal
interval of the differences collapses to a point."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Paired:
    problems: int
    first: int
    """problems the first passed"""
    second: int
    only_first: int
    only_second: int
    difference: float
    """first's pass@1 minus second's"""
    low: float
    high: float

    @property
    def first_rate(self) -> float:
        return self.first / self.problems if self.problems else 0.0

    @property
    def second_rate(self) -> float:
        return self.second / self.problems if self.problems else 0.0


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `passed` of `n`."""
    if n == 0:
        return 0.0, 1.0
    p = passed / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


def paired(first: Sequence[bool], second: Sequence[bool], z: float = Z95) -> Paired:
    """The difference of pass@1 between two answers to the same problems, with its interval."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} results against {len(second)}: the problems must be the same")
    n = len(first)
    both = sum(a and b for a, b in zip(first, second, strict=True))
    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    neither = n - both - only_first - only_second
    a, b = both + only_first, both + only_second
    if n == 0:
        return Paired(0, 0, 0, 0, 0, 0.0, -1.0, 1.0)
    p1, p2 = a / n, b / n
    l1, u1 = wilson(a, n, z)
    l2, u2 = wilson(b, n, z)
    # the pairs' correlation, its numerator corrected for continuity as Newcombe does: ad − bc
    # less n/2 when above it, 0 between 0 and n/2, itself when below 0
    margins = (both + only_first) * (only_second + neither) * (both + only_second) * (only_first + neither)
    cross = both * neither - only_first * only_second
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return Paired(n, a, b, only_first, only_second, d, max(-1.0, low), min(1.0, high))
