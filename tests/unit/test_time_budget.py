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


def test_a_limit_is_quiet_and_busy_seconds_or_one_number_for_both_or_unset():
    assert time_budget.limit({}) is None
    assert time_budget.limit({time_budget.LIMIT_ENV: " 2500,3300 "}) == time_budget.Limit(2500.0, 3300.0)
    assert time_budget.limit({time_budget.LIMIT_ENV: "2700"}) == time_budget.Limit(2700.0, 2700.0)
    for wrong in ("45m", "0", "-5", "3300,2500", "1,2,3", "2500,"):
        with pytest.raises(ValueError, match="MARGIN_TEST_TIME_LIMIT=.*QUIET,BUSY"):
            time_budget.limit({time_budget.LIMIT_ENV: wrong})
    assert time_budget.verdict(2699.0, 2700.0) is None and time_budget.verdict(9e9, None) is None
    assert "past their limit of 45 min 00 s with 3% of the machine" in (time_budget.verdict(2701.0, 2700.0, 0.03) or "")


def test_the_limit_grows_from_quiet_to_busy_with_the_share_other_work_took_up_to_one_core():
    limit = time_budget.Limit(2500.0, 3300.0)
    assert limit.allowed(0.0, cores=2) == 2500.0
    assert limit.allowed(0.25, cores=2) == 2900.0  # half a core of other work on two cores
    assert limit.allowed(0.5, cores=2) == limit.allowed(0.9, cores=2) == 3300.0  # a whole core, or more
    assert limit.allowed(0.25, cores=4) == 3300.0
    assert limit.allowed(None, cores=2) == 3300.0  # not known: never failed on a guess


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
    assert "past their limit of 0 s with " in over.stdout and "(MARGIN_TEST_TIME_LIMIT)" in over.stdout
    within = pytest_run("3600")
    assert within.returncode == 0, within.stdout + within.stderr
    assert "unit " in within.stdout and "past their limit" not in within.stdout
    mistyped = pytest_run("forty")
    assert mistyped.returncode == 4 and "MARGIN_TEST_TIME_LIMIT='forty'" in mistyped.stderr


def test_the_report_says_how_much_of_the_machine_other_work_took(tmp_path):
    """A quiet run and a busy one are told apart by the CPU time the machine spent on other work."""
    stat = tmp_path / "stat"
    ticks = time_budget.os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal: 500 s busy of all cores, 300 s idle and iowait
    stat.write_text(" ".join(["cpu"] + [str(v * ticks) for v in (400, 0, 100, 250, 50, 0, 0, 0, 0, 0)]) + "\ncpu0 1\n")
    read = time_budget.Cpu.now(str(stat))
    assert read.machine == 500.0 and read.ours > 0
    start, end = time_budget.Cpu(1000.0, 10.0), time_budget.Cpu(1300.0, 160.0)  # 300 s busy, 150 of them ours
    assert time_budget.others_share(start, end, wall=100.0, cores=2) == 0.75
    assert time_budget.others_share(start, time_budget.Cpu(1150.0, 160.0), wall=100.0, cores=2) == 0.0
    assert time_budget.others_share(time_budget.Cpu(None, 0.0), end, wall=100.0, cores=2) is None
    assert time_budget.Cpu.now(str(tmp_path / "nothing")).machine is None
