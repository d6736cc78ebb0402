"""Where a test run's time goes, and the limit on it.

Every test belongs to one tier, by where it lives and what it drives: its first marker among
TIERS' (a long session, the real model server, a real editor, a benchmark), else `e2e` for the
rest of tests/e2e/ (the real margin-lsp process against fakes), else `unit`. A test's time is its
setup, call and teardown together, so a fixture shared by a session counts once, with the test
that first needed it. At the end of the run the report gives each tier's time and count beside
pytest's own total (tests/conftest.py prints it).

The limit (`MARGIN_TEST_TIME_LIMIT`, seconds of pytest's wall time; scripts/test.sh sets it for a
whole run) fails a run that took longer, even if every test passed: CI's budget is 45 minutes end
to end on a quiet machine and 60 with its other core busy (docs/testing.md), and a run that drifts
towards the hard 90 must fail while it still lands, not after."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest

TIERS = ("slow", "llama", "vscode", "neovim", "emacs", "bench")
"""the markers that name a tier, the first a test carries winning (a long session on the real
model server is `slow`, not `llama`)"""
LIMIT_ENV = "MARGIN_TEST_TIME_LIMIT"


def tier(markers: Iterable[str], path: str) -> str:
    """The tier of a test with these marker names, collected from `path` (relative to the repository)."""
    names = set(markers)
    for name in TIERS:
        if name in names:
            return name
    return "e2e" if path.replace("\\", "/").startswith("tests/e2e/") else "unit"


@dataclass
class Ledger:
    """Seconds and tests per tier, as the reports come in."""

    seconds: dict[str, float] = field(default_factory=dict)
    tests: dict[str, set[str]] = field(default_factory=dict)

    def add(self, name: str, nodeid: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.tests.setdefault(name, set()).add(nodeid)

    def lines(self, total: float) -> list[str]:
        """The report: each tier, slowest first, with its share of pytest's wall time `total`."""
        order = sorted(self.seconds, key=lambda name: -self.seconds[name])
        out = [f"pytest took {clock(total)} in all; by tier (setup, call and teardown of each test):"]
        for name in order:
            share = self.seconds[name] / total if total > 0 else 0.0
            out.append(f"  {name:<7} {clock(self.seconds[name]):>9}  {share:>4.0%}  {len(self.tests[name]):>5} tests")
        rest = total - sum(self.seconds.values())
        if rest > 1:
            out.append(f"  {'other':<7} {clock(rest):>9}  (collection, start-up, between tests)")
        return out


def clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def limit(environ: Mapping[str, str] = os.environ) -> float | None:
    """The limit in seconds, or None when none is set; a value that is not a positive number is an
    error that names the variable (a mistyped limit must not pass as no limit)."""
    raw = environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise ValueError(f"{LIMIT_ENV}={raw!r}: give the limit in seconds, a positive number")
    return value


def verdict(total: float, allowed: float | None) -> str | None:
    """What to say when the run took longer than `allowed`; None when within it or unlimited."""
    if allowed is None or total <= allowed:
        return None
    return (f"the tests took {clock(total)}, past the limit of {clock(allowed)} ({LIMIT_ENV}): CI's budget is "
            f"45 minutes end to end on a quiet machine and 60 on a busy one (docs/testing.md); see where the "
            f"time went above and make the slow part smaller")


class TimeBudget:
    """The pytest plugin (registered by tests/conftest.py): the ledger filled as tests report, the
    report and the verdict at the end. The limit fails only a run that otherwise passed; the
    report comes before conftest's short list of failures, which stays last."""

    def __init__(self, allowed: float | None) -> None:
        self.allowed = allowed
        self.ledger = Ledger()
        self.tiers: dict[str, str] = {}
        self.started = time.monotonic()
        self.total: float | None = None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.tiers[item.nodeid] = tier((m.name for m in item.iter_markers()), item.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.ledger.add(self.tiers.get(report.nodeid, "unit"), report.nodeid, report.duration)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.total = time.monotonic() - self.started
        if verdict(self.total, self.allowed) and session.exitstatus == 0:
            session.exitstatus = 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.total is None or not self.ledger.seconds:
            return
        terminalreporter.write_sep("=", "where the time went")
        for line in self.ledger.lines(self.total):
            terminalreporter.write_line(line)
        over = verdict(self.total, self.allowed)
        if over:
            terminalreporter.write_line(over, red=True)
