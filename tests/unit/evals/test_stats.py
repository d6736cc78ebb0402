"""The paired difference of two pass rates and its 95% interval (Newcombe's method 10)."""

from __future__ import annotations

import random

import pytest

from margin.evals.stats import paired, wilson


def table(both: int, only_first: int, only_second: int, neither: int) -> tuple[list[bool], list[bool]]:
    first = [True] * both + [True] * only_first + [False] * only_second + [False] * neither
    second = [True] * both + [False] * only_first + [True] * only_second + [False] * neither
    return first, second


def test_a_worked_example():
    """Altman et al., Statistics with Confidence (2000), table 6.2: 14 pairs both positive, 5 the
    first only, none the second only, 22 neither. Worked by hand from Newcombe's formulas:
    Wilson intervals 0.3206–0.6125 and 0.2156–0.4945, the pairs' correlation (308 − 20.5) /
    √158004 = 0.7233, and the difference 0.1220 from 0.0115 to 0.2265."""
    found = paired(*table(14, 5, 0, 22))
    assert (found.problems, found.first, found.second, found.only_first, found.only_second) == (41, 19, 14, 5, 0)
    assert found.difference == pytest.approx(5 / 41)
    assert (found.low, found.high) == (pytest.approx(0.0115, abs=1e-4), pytest.approx(0.2265, abs=1e-4))
    assert wilson(19, 41) == (pytest.approx(0.3206, abs=1e-4), pytest.approx(0.6125, abs=1e-4))


def test_no_problem_that_differs_still_gives_an_interval_of_some_width():
    """Where the plain normal interval of the differences is a point (every pair agrees)."""
    found = paired(*table(5, 0, 0, 45))
    assert found.difference == 0.0 and found.low < 0 < found.high


@pytest.mark.parametrize("seed", range(20))
def test_the_interval_holds_the_difference_stays_within_one_and_turns_round_with_the_order(seed):
    rng = random.Random(seed)
    counts = [rng.randint(0, 30) for _ in range(4)]
    if not sum(counts):
        counts[3] = 1
    first, second = table(*counts)
    forward, backward = paired(first, second), paired(second, first)
    assert -1.0 <= forward.low <= forward.difference <= forward.high <= 1.0
    assert backward.difference == pytest.approx(-forward.difference)
    assert (backward.low, backward.high) == (pytest.approx(-forward.high), pytest.approx(-forward.low))


def test_results_of_different_problems_are_refused():
    with pytest.raises(ValueError, match="must be the same"):
        paired([True], [True, False])
