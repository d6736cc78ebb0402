"""`margin eval completion`: HumanEval infilling problems answered through Margin's real inline
completion path (the route Margin chooses for the endpoint, the completion budget, the
post-processing an editor's suggestion gets) and by the same model called directly
(margin.evals.direct), each answer's tests run in the sandbox (margin.evals.sandbox), pass@1
reported side by side per set and per route with the paired difference and its 95% interval
(margin.evals.stats).

Model requests go one at a time (one model server; Margin's, then the direct call's, a problem
after another); the tests of answers already in run beside them.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from margin.core.llm import ProviderError
from margin.core.vfs import Position, PositionEncoding
from margin.evals import sandbox, stats
from margin.evals.direct import DirectAnswer, DirectClient, Endpoint
from margin.evals.infilling import Problem
from margin.services.app import MarginApp
from margin.services.completion import CompletionRequest, CompletionService
from margin.services.errors import RequestError

CHECKS_AT_ONCE = 2


@dataclass
class Attempt:
    answer: str | None
    """what was inserted ("" for no suggestion; None when the request failed)"""
    route: str | None
    seconds: float
    prompt_tokens: int | None
    error: str | None = None
    replaces: int = 0
    """characters after the cursor the answer replaces (auto-closed ones it holds)"""
    outcome: str = "not run"
    """the sandbox's: passed, failed, exited, timed out, crashed"""
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


@dataclass
class Row:
    set: str
    task_id: str
    margin: Attempt
    direct: Attempt
    expected: str = field(repr=False, default="")


class CompletionEval:
    """Runs problems through Margin (`app`, its completion profile) and the direct call."""

    def __init__(self, app: MarginApp, folder: Path, direct_route: str | None = None,
                 check_time_s: float = sandbox.TIME_LIMIT_S) -> None:
        self.app = app
        self.folder = folder
        self.service = CompletionService(app)
        self.direct_route = direct_route
        self.check_time_s = check_time_s
        app.files.encoding = PositionEncoding.UTF32  # the problems' columns are characters
        app.workspace.folders = lambda: [folder.as_uri()]  # an empty folder: no other file is context
        profile = app.settings.current.profile("completion")
        self.endpoint = Endpoint(profile.base_url, profile.model, app.backends.key_for(profile),
                                 profile.temperature, profile.max_output_tokens, profile.timeout_s)

    async def run(self, problems: Sequence[tuple[str, Problem]],
                  progress: Callable[[int, int], None] = lambda done, total: None,
                  checked: Callable[[Row], None] = lambda row: None) -> list[Row]:
        """Each problem answered by Margin, then directly; `checked` gets each row once both
        answers' tests have run (in the order they finish)."""
        rows: list[Row] = []
        checks: list[asyncio.Task[None]] = []
        room = asyncio.Semaphore(CHECKS_AT_ONCE)
        client = DirectClient(self.endpoint)
        try:
            for number, (name, problem) in enumerate(problems):
                mine = await self.margin(problem, number)
                if self.direct_route is None and mine.route:
                    self.direct_route = mine.route  # the first route Margin reports: one route throughout
                route = self.direct_route or "chat"  # until Margin has answered by some route
                theirs = _attempt(await self._direct(client, route, problem), route)
                row = Row(name, problem.task_id, mine, theirs, problem.solution)
                rows.append(row)
                checks.append(asyncio.ensure_future(self._check_row(problem, row, room, checked)))
                progress(number + 1, len(problems))
            await asyncio.gather(*checks)
        finally:
            for task in checks:
                task.cancel()
            await client.aclose()
        return rows

    async def margin(self, problem: Problem, number: int) -> Attempt:
        """Margin's suggestion at the hole, as an editor would ask for it."""
        text, line, column = problem.document()
        uri = (self.folder / f"problem_{number}.py").as_uri()
        self.app.files.open(uri, "python", 1, text)
        started = time.perf_counter()
        try:
            outcome = await self.service.complete(CompletionRequest(uri, Position(line, column), 1))
        except (RequestError, ProviderError) as error:  # a failed request scores as no answer, and says why
            return Attempt(None, None, time.perf_counter() - started, None, f"{type(error).__name__}: {error}"[:300])
        finally:
            self.app.files.close(uri)
        seconds = time.perf_counter() - started
        tokens = (outcome.budget.counted or outcome.budget.total) if outcome.budget else None
        suggestion = outcome.suggestion
        if suggestion is None:
            return Attempt("", outcome.route, seconds, tokens, outcome.reason)
        replaces = suggestion.replaces if not problem.whole_lines else 0  # the cursor's line is empty there
        return Attempt(suggestion.text, outcome.route, seconds, tokens, replaces=replaces)

    async def _direct(self, client: DirectClient, route: str, problem: Problem) -> DirectAnswer:
        text, _line, _column = problem.document()
        return await client.fill(route, problem.prompt, problem.suffix, (text, problem.cursor))

    async def _check_row(self, problem: Problem, row: Row, room: asyncio.Semaphore,
                         checked: Callable[[Row], None]) -> None:
        for attempt in (row.margin, row.direct):
            async with room:
                verdict = await sandbox.check(problem.program(attempt.answer or "", attempt.replaces), self.check_time_s)
            attempt.outcome, attempt.detail = verdict.outcome, verdict.detail
        checked(row)


def _attempt(answer: DirectAnswer, route: str) -> Attempt:
    return Attempt(answer.text, route, answer.seconds, answer.prompt_tokens, answer.error)


# ---- the report -------------------------------------------------------------------------------

def report(rows: Sequence[Row], endpoint: Endpoint, seed: int, sizes: dict[str, int]) -> str:
    """pass@1 of Margin and of the direct call per set (and per Margin route when it used more
    than one), the paired difference with its interval, time and prompt tokens."""
    model = endpoint.model or "the server's model"
    lines = [f"margin eval completion · {endpoint.base_url} · {model} · temperature {endpoint.temperature:g} · seed {seed}",
             ""]
    header = f"  {'':<28}{'pass@1':>16}{'median s':>10}{'prompt tokens':>15}{'no answer':>11}"
    for name in dict.fromkeys(row.set for row in rows):
        mine = [row for row in rows if row.set == name]
        lines.append(f"{name}: {len(mine)} of {sizes.get(name, len(mine))} problems")
        lines.append(header)
        groups = {"": mine}
        routes = sorted({row.margin.route or "none" for row in mine})
        if len(routes) > 1:
            groups |= {route: [row for row in mine if (row.margin.route or "none") == route] for route in routes}
        for route, group in groups.items():
            label = f" (route {route})" if route else f" (route {routes[0]})"
            lines.append(_line("Margin" + label, [row.margin for row in group]))
            lines.append(_line(f"direct ({group[0].direct.route})" + (" same problems" if route else ""),
                               [row.direct for row in group]))
            paired = stats.paired([row.margin.passed for row in group], [row.direct.passed for row in group])
            lines.append(f"  {'difference, Margin - direct':<28}{100 * paired.difference:>+15.1f}%  "
                         f"95% interval [{100 * paired.low:+.1f}, {100 * paired.high:+.1f}] points; "
                         f"only Margin passed {paired.only_first}, only direct {paired.only_second}")
        silent = Counter((row.margin.error or "").removeprefix(SILENCE) for row in mine
                         if not row.margin.answer and (row.margin.error or "").startswith(SILENCE))
        if silent:  # the model answered, and post-processing showed nothing (core/completion/junk.py)
            lines.append(f"  {'why Margin showed nothing':<28}" + ", ".join(f"{k} {v}" for k, v in sorted(silent.items())))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


SILENCE = "nothing useful: "
"""how an outcome's reason begins when the model answered and nothing was worth showing"""


def _line(label: str, attempts: Sequence[Attempt]) -> str:
    passed = sum(a.passed for a in attempts)
    rate = f"{passed}/{len(attempts)} {100 * passed / len(attempts):5.1f}%" if attempts else "-"
    seconds = statistics.median(a.seconds for a in attempts) if attempts else 0.0
    tokens = [a.prompt_tokens for a in attempts if a.prompt_tokens is not None]
    shown = f"{statistics.median(tokens):.0f}" if tokens else "-"
    empty = sum(not a.answer for a in attempts)
    return f"  {label:<28}{rate:>16}{seconds:>10.2f}{shown:>15}{empty:>11}"


def margin_worse(rows: Sequence[Row]) -> bool:
    """Margin passed fewer of these problems than the direct call (its target: never)."""
    return sum(r.margin.passed for r in rows) < sum(r.direct.passed for r in rows)


# ---- the results file: a JSON line a problem, written as each is checked ----------------------

def result_line(row: Row) -> str:
    return json.dumps({"set": row.set, "task_id": row.task_id, "margin": asdict(row.margin),
                       "direct": asdict(row.direct), "expected": row.expected}, ensure_ascii=False) + "\n"


def append_result(path: Path, row: Row) -> None:
    """Add `row` to the results file, whole: an interrupted run loses at most the line being
    written, and the next line starts afresh after such a cut one."""
    with path.open("a+b") as out:
        cut = out.tell() > 0 and (out.seek(out.tell() - 1), out.read(1))[1] != b"\n"
        out.write((b"\n" if cut else b"") + result_line(row).encode("utf-8"))


def read_results(path: Path) -> list[Row]:
    """The rows of a results file, to go on with an interrupted run (a line cut off by the
    interruption is dropped: that problem is asked again)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            rows.append(Row(data["set"], data["task_id"], Attempt(**data["margin"]), Attempt(**data["direct"]),
                            data.get("expected", "")))
        except (ValueError, KeyError, TypeError):
            continue
    return rows
