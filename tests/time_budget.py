"""Where a test run's time goes, and the limit on it.

Every test belongs to one tier, by where it lives and what it drives: its first marker among
TIERS' (a long session, the real model server, a real editor, a benchmark), else `e2e` for the
rest of tests/e2e/ (the real margin-lsp process against fakes), else `unit`. A test's time is its
setup, call and teardown together, so a fixture shared by a session counts once, with the test
that first needed it. At the end of the run the report gives each tier's time and count beside
pytest's own total (tests/conftest.py prints it).

The limit (`MARGIN_TEST_TIME_LIMIT`, seconds of pytest's wall time on a quiet machine and on a busy
one, `Limit`; scripts/test.sh sets it for a whole run) fails a run that took longer, even if every
test passed: CI's budget is 45 minutes end
to end on a quiet machine and 60 with its other core busy (docs/testing.md), and a run that drifts
towards the hard 90 must fail while it still lands, not after."""

from __future__ import annotations

import os
import resource
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


@dataclass(frozen=True)
class Cpu:
    """CPU seconds so far: the machine's busy time, all cores together (Linux's /proc/stat; None
    elsewhere), and this process's with its waited-for children (the servers, editors and model
    servers the tests started and stopped)."""

    machine: float | None
    ours: float

    @staticmethod
    def now(stat: str = "/proc/stat") -> Cpu:
        ours = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for field in ("ru_utime", "ru_stime"))
        try:
            with open(stat, encoding="ascii") as file:
                fields = [int(v) for v in file.readline().split()[1:]]
        except (OSError, ValueError):
            return Cpu(None, ours)
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        return Cpu((sum(fields[:8]) - idle) / ticks, ours)


def others_share(start: Cpu, end: Cpu, wall: float, cores: int) -> float | None:
    """The share of the machine's cores that work other than this run's took over `wall` seconds:
    what tells a quiet run from a busy one when their times are compared."""
    if start.machine is None or end.machine is None or wall <= 0 or cores <= 0:
        return None
    others = (end.machine - start.machine) - (end.ours - start.ours)
    return min(max(others / (wall * cores), 0.0), 1.0)


def clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


@dataclass(frozen=True)
class Limit:
    """Seconds pytest may take on a quiet machine and on a busy one (another program on one of its
    cores, as CI machines here may have). A run is allowed between the two in proportion to the
    share of the machine that other work took, up to one core's worth: CI's budget is 45 minutes
    end to end quiet and 60 busy, and the check must catch a quiet run drifting towards 45 without
    failing a busy one that is within its 60."""

    quiet: float
    busy: float

    def allowed(self, others: float | None, cores: int) -> float:
        """The limit for a run during which other work took `others` of the machine (None: not known,
        so the busy limit: a run is never failed on a guess)."""
        if others is None:
            return self.busy
        load = min(others * max(cores, 1), 1.0)  # in cores, up to one
        return self.quiet + (self.busy - self.quiet) * load


def limit(environ: Mapping[str, str] = os.environ) -> Limit | None:
    """The limit, or None when none is set: `QUIET,BUSY` seconds, or one number for both. A value
    that is not that is an error naming the variable (a mistyped limit must not pass as none)."""
    raw = environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return None
    try:
        values = [float(v) for v in raw.split(",")]
    except ValueError:
        values = []
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or min(values) <= 0 or values[0] > values[1]:
        raise ValueError(f"{LIMIT_ENV}={raw!r}: give the limit in seconds, QUIET,BUSY (QUIET at most BUSY) "
                         "or one positive number for both")
    return Limit(*values)


def verdict(total: float, allowed: float | None, others: float | None = None) -> str | None:
    """What to say when the run took longer than `allowed`; None when within it or unlimited."""
    if allowed is None or total <= allowed:
        return None
    load = "" if others is None else f" with {others:.0%} of the machine taken by other work"
    return (f"the tests took {clock(total)}, past their limit of {clock(allowed)}{load} ({LIMIT_ENV}): CI's "
            f"budget is 45 minutes end to end on a quiet machine and 60 on a busy one (docs/testing.md); see "
            f"where the time went above and make the slow part smaller")


class TimeBudget:
    """The pytest plugin (registered by tests/conftest.py): the ledger filled as tests report, the
    report and the verdict at the end. The limit fails only a run that otherwise passed; the
    report comes before conftest's short list of failures, which stays last."""

    def __init__(self, limit: Limit | None) -> None:
        self.limit = limit
        self.allowed: float | None = None
        self.ledger = Ledger()
        self.tiers: dict[str, str] = {}
        self.started = time.monotonic()
        self.cpu = Cpu.now()
        self.total: float | None = None
        self.others: float | None = None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.tiers[item.nodeid] = tier((m.name for m in item.iter_markers()), item.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.ledger.add(self.tiers.get(report.nodeid, "unit"), report.nodeid, report.duration)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.total = time.monotonic() - self.started
        cores = os.cpu_count() or 1
        self.others = others_share(self.cpu, Cpu.now(), self.total, cores)
        self.allowed = None if self.limit is None else self.limit.allowed(self.others, cores)
        if verdict(self.total, self.allowed, self.others) and session.exitstatus == 0:
            session.exitstatus = 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.total is None or not self.ledger.seconds:
            return
        terminalreporter.write_sep("=", "where the time went")
        for line in self.ledger.lines(self.total):
            terminalreporter.write_line(line)
        if self.others is not None:
            terminalreporter.write_line(f"work other than this run's took {self.others:.0%} of the machine's "
                                        f"{os.cpu_count()} cores meanwhile (a quiet machine: a few percent)")
        if self.limit is not None and self.allowed is not None:
            terminalreporter.write_line(f"this run's limit: {clock(self.allowed)} (quiet {clock(self.limit.quiet)}, "
                                        f"busy {clock(self.limit.busy)}; {LIMIT_ENV})")
        over = verdict(self.total, self.allowed, self.others)
        if over:
            terminalreporter.write_line(over, red=True)
