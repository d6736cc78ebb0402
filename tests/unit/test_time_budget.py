"""The run's time limit and its report (tests/time_budget.py): each test in its tier, and a run
that passes every test but takes longer than the limit fails, saying so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import time_budget
from tests.conftest import REPO, clean_env


def test_a_test_takes_the_tier_of_its_first_tier_marker_else_where_it_lives():
    assert time_budget.tier(["llama", "slow", "asyncio"], "tests/e2e/test_real_llama_session.py::t") == "slow"
    assert time_budget.tier(["llama"], "tests/e2e/test_real_llama.py::t") == "llama"
    assert time_budget.tier(["bench", "llama"], "tests/e2e/test_benchmarks.py::t") == "llama"
    assert time_budget.tier(["timeout"], "tests/e2e/test_faults.py::t") == "e2e"
    assert time_budget.tier([], "tests/unit/core/test_budget.py::t") == "unit"


def test_the_report_adds_each_phase_to_its_tier_and_names_the_time_outside_tests():
    ledger = time_budget.Ledger()
    for phase in (1.0, 100.0, 2.0):  # setup, call, teardown
        ledger.add("llama", "a", phase)
    ledger.add("unit", "b", 30.0)
    ledger.add("unit", "c", 30.0)
    lines = ledger.lines(200.0)
    assert lines[0] == "pytest took 3 min 20 s in all; by tier (setup, call and teardown of each test):"
    assert lines[1].split() == ["llama", "1", "min", "43", "s", "52%", "1", "tests"]
    assert lines[2].split() == ["unit", "1", "min", "00", "s", "30%", "2", "tests"]
    assert lines[3].split()[:4] == ["other", "37", "s", "(collection,"]


def test_a_limit_is_a_positive_number_of_seconds_or_unset():
    assert time_budget.limit({}) is None
    assert time_budget.limit({time_budget.LIMIT_ENV: " 2700 "}) == 2700.0
    for wrong in ("45m", "0", "-5"):
        with pytest.raises(ValueError, match="MARGIN_TEST_TIME_LIMIT=.*positive number"):
            time_budget.limit({time_budget.LIMIT_ENV: wrong})
    assert time_budget.verdict(2699.0, 2700.0) is None and time_budget.verdict(9e9, None) is None
    assert "past the limit of 45 min 00 s" in (time_budget.verdict(2701.0, 2700.0) or "")


def pytest_run(limit: str) -> subprocess.CompletedProcess[str]:
    """This file's first test run by pytest in a process of its own, under `limit`."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           f"{__file__}::test_a_test_takes_the_tier_of_its_first_tier_marker_else_where_it_lives"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=clean_env(**{time_budget.LIMIT_ENV: limit}))


def test_a_run_past_its_limit_fails_though_every_test_passed_and_one_within_it_passes():
    over = pytest_run("0.001")
    assert over.returncode == 1, over.stdout + over.stderr
    assert "1 passed" in over.stdout and "where the time went" in over.stdout
    assert "past the limit of 0 s (MARGIN_TEST_TIME_LIMIT)" in over.stdout
    within = pytest_run("3600")
    assert within.returncode == 0, within.stdout + within.stderr
    assert "unit " in within.stdout and "past the limit" not in within.stdout
    mistyped = pytest_run("forty")
    assert mistyped.returncode == 4 and "MARGIN_TEST_TIME_LIMIT='forty'" in mistyped.stderr
