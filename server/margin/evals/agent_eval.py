"""`margin eval agent`: the agent evaluation's tasks (margin.evals.agent_tasks) done by agent mode
— one turn of Margin's real agent core, the task's description as the person would type it,
confirmations answered by the evaluation's policy (edits and test commands approved, anything
else refused and counted) — and, beside it, by the same model one-shot: one edit-ops answer with
the task's files open, applied as `margin/applyOps` applies it (as `margin eval edits` does).
Each side works on a fresh copy; the task's hidden tests, never shown to the model, judge both,
in the sandbox.

Per side: pass rate, median steps, tokens sent and received, confirmations asked and refused,
well-formed answers, calls described instead of made, turns stopped by the stuck rules, and hung
turns (a turn not ended by its own deadline: must be 0); then the paired difference with its
interval."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from margin.core.editops import apply_edits
from margin.core.where import Where
from margin.evals import agent_tasks, stats
from margin.evals.agent_tasks import PolicyDoor, Task
from margin.evals.edits_eval import ASK
from margin.evals.exercism import Exercise
from margin.services.agent_turn import AgentAsk
from margin.services.app import MarginApp
from margin.services.editops import ApplyRequest
from margin.services.registry import Services

HANG_GRACE_S = 60.0
"""past the turn's own deadline, a turn still running is counted as hung (and abandoned)"""


@dataclass
class Side:
    passed: bool = False
    well_formed: bool = False
    """agent: every step's answer was read as calls or a final answer (no rejection told back);
    one-shot: its ops validated and applied"""
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    asked: int = 0
    refused: int = 0
    described: int = 0
    rejected: int = 0
    """answers told back to the model (described calls, malformed or unknown actions)"""
    stopped: str = ""
    hung: bool = False
    seconds: float = 0.0
    error: str = ""


@dataclass
class Row:
    task: str
    kind: str
    agent: Side = field(default_factory=Side)
    oneshot: Side = field(default_factory=Side)


class AgentEval:
    def __init__(self, app: MarginApp, folder: Path, turn_timeout_s: float) -> None:
        self.app = app
        self.services = Services.over(app)
        self.folder = folder
        self.turn_timeout_s = turn_timeout_s
        assert app.hands is not None
        self.hands = app.hands

    async def run(self, tasks: Sequence[Task], progress: Callable[[int, int], None] = lambda done, total: None,
                  checked: Callable[[Row], None] = lambda row: None) -> list[Row]:
        rows = []
        for number, task in enumerate(tasks):
            row = Row(task.id, task.kind, await self.agent(task), await self.oneshot(task))
            rows.append(row)
            checked(row)
            progress(number + 1, len(tasks))
        return rows

    def _copy(self, task: Task, side: str) -> Path:
        root = agent_tasks.prepare(task, self.folder / side / task.id)
        self.app.workspace.folders = lambda: [root.as_uri()]
        return root

    async def _judge(self, task: Task, root: Path, side: Side, edits: int) -> None:
        passed, output = await agent_tasks.hidden_tests(task, root, self.hands)
        side.passed = passed and not (task.kind == "nothing-to-change" and edits)
        if not side.passed and not side.error:
            last = output.strip().splitlines()
            side.error = last[-1][:300] if last else "the hidden tests failed"

    async def agent(self, task: Task, judge: bool = True) -> Side:
        root = self._copy(task, "agent")
        door = PolicyDoor(root, self.hands)
        side = Side()
        edits = 0
        started = time.perf_counter()
        try:
            outcome = await asyncio.wait_for(
                self.services.agent.run(AgentAsk(task.task, Where(), folder=root.as_uri()), door),
                self.turn_timeout_s + HANG_GRACE_S)
        except TimeoutError:
            side.hung, side.stopped, side.error = True, "hung", "the turn outlived its deadline"
        else:
            side.steps, side.stopped, edits = len(outcome.steps), outcome.stopped, len(outcome.edits)
            side.prompt_tokens = outcome.usage.prompt_tokens or sum(s.prompt_tokens for s in outcome.steps)
            side.completion_tokens = outcome.usage.completion_tokens or 0
            side.described, side.rejected = outcome.described, outcome.rejected
            side.well_formed = outcome.rejected == 0 and outcome.stopped != "model failed"
            if outcome.stopped != "finished":
                side.error = outcome.why[:300]
        side.seconds = time.perf_counter() - started
        side.asked, side.refused = door.asked, door.refused
        if judge:
            await self._judge(task, root, side, edits)
        return side

    async def exercises(self, exercises: Sequence[Exercise], progress: Callable[[int, int], None] = lambda d, t: None,
                        checked: Callable[[Row], None] = lambda row: None) -> list[Row]:
        """Exercism exercises through agent mode alone (their one-shot side is `margin eval
        edits`): the stubs in a fresh folder, the request as Aider's benchmark words it, the
        exercise's tests — never in the folder — judging the files as the turn left them."""
        rows = []
        for number, exercise in enumerate(exercises):
            task = Task(exercise.slug, "exercism", ASK.format(instructions=exercise.instructions,
                                                             files=", ".join(exercise.solution)),
                        dict(exercise.solution), {}, ())
            side = await self.agent(task, judge=False)
            root = self.folder / "agent" / task.id
            answer = {name: (root / name).read_text(encoding="utf-8") for name in exercise.solution
                      if (root / name).is_file()}
            verdict = await exercise.check(answer)
            side.passed = verdict.passed
            if not verdict.passed and not side.error:
                side.error = f"{verdict.outcome}: {verdict.detail}"[:300]
            row = Row(task.id, task.kind, side, Side(stopped="not run"))
            rows.append(row)
            checked(row)
            progress(number + 1, len(exercises))
        return rows

    async def oneshot(self, task: Task) -> Side:
        from margin.services.turn import Ask

        root = self._copy(task, "oneshot")
        uris = {}
        for name, text in task.files.items():
            uris[name] = (root / name).as_uri()
            self.app.files.open(uris[name], "python" if name.endswith(".py") else "plaintext", 1, text)
        side = Side(steps=1)
        started = time.perf_counter()
        first = next(iter(uris.values()))
        edits = 0
        try:
            thread = await self.services.threads.new(Where(text_document=first), title=task.id)
            where = Where(text_document=first, thread_id=thread.id)
            outcome = await self.services.editops.propose(Ask(task.task, where, list(uris.values())))
            if outcome.budget is not None:
                side.prompt_tokens = outcome.budget.counted or outcome.budget.total
            if outcome.ops:
                prepared = self.services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, where))
                if prepared.plan is not None and not prepared.failure:
                    side.well_formed = True
                    for name, uri in uris.items():
                        file = self.app.files.get(uri)
                        if file is not None and uri in prepared.plan.edits:
                            (root / name).write_text(apply_edits(file.text, prepared.plan.edits[uri]), encoding="utf-8")
                            edits += 1
                else:
                    side.error = (prepared.failure or "not applied")[:300]
            else:
                side.error = outcome.assistant_message.strip()[:300] or "no ops"
        except Exception as error:  # noqa: BLE001 — the request's failure is the row's, the run goes on
            side.error = f"{type(error).__name__}: {error}"[:300]
        finally:
            for uri in uris.values():
                self.app.files.close(uri)
        side.seconds = time.perf_counter() - started
        side.stopped = "answered" if side.well_formed else "not applied"
        await self._judge(task, root, side, edits)
        return side


# ---- the report -------------------------------------------------------------------------------

def report(rows: Sequence[Row], endpoint: str, model: str, total: int, what: str = "tasks") -> str:
    lines = [f"margin eval agent · {endpoint} · {model}", "", f"{len(rows)} of {total} {what}",
             (f"  {'':<24}{'pass':>12}{'median steps':>14}{'tokens in / out':>18}{'asked / refused':>17}"
             f"{'well-formed':>15}{'described':>11}{'stuck':>7}{'hung':>6}")]
    sides_shown = (("agent mode", "agent"),) if what == "exercises" else (("agent mode", "agent"),
                                                                          ("one-shot (edit-ops)", "oneshot"))
    for label, name in sides_shown:
        sides: list[Side] = [getattr(row, name) for row in rows]
        steps = statistics.median(s.steps for s in sides) if sides else 0
        lines.append(f"  {label:<24}{_rate(sum(s.passed for s in sides), len(rows)):>12}{steps:>14g}"
                     f"{f'{sum(s.prompt_tokens for s in sides):,} / {sum(s.completion_tokens for s in sides):,}':>18}"
                     f"{f'{sum(s.asked for s in sides)} / {sum(s.refused for s in sides)}':>17}"
                     f"{_formed(sides, name):>15}{sum(s.described for s in sides):>11}"
                     f"{sum(s.stopped == 'stuck' for s in sides):>7}{sum(s.hung for s in sides):>6}")
    if what == "exercises":
        return "\n".join(lines) + "\n  (the same exercises one-shot: margin eval edits)\n"
    paired = stats.paired([row.agent.passed for row in rows], [row.oneshot.passed for row in rows])
    lines.append(f"  {'difference, agent - one-shot':<24} {100 * paired.difference:+.1f} points, 95% interval "
                 f"[{100 * paired.low:+.1f}, {100 * paired.high:+.1f}]; only the agent passed {paired.only_first}, "
                 f"only one-shot {paired.only_second}")
    kinds = sorted({row.kind for row in rows})
    lines.append("  by kind (agent / one-shot): " + "; ".join(
        f"{kind} {sum(r.agent.passed for r in rows if r.kind == kind)}/{sum(r.oneshot.passed for r in rows if r.kind == kind)}"
        f" of {sum(r.kind == kind for r in rows)}" for kind in kinds))
    return "\n".join(lines) + "\n"


def _formed(sides: Sequence[Side], name: str) -> str:
    """The agent's steps whose answer was read as calls or an answer (none told back); one-shot's
    answers whose ops applied."""
    if name == "agent":
        steps = sum(s.steps for s in sides)
        return _rate(steps - sum(s.rejected for s in sides), steps)
    return _rate(sum(s.well_formed for s in sides), len(sides))


def _rate(count: int, total: int) -> str:
    return f"{count}/{total} {100 * count / total:3.0f}%" if total else "-"


def agent_worse(rows: Sequence[Row]) -> bool:
    return sum(r.agent.passed for r in rows) < sum(r.oneshot.passed for r in rows)


def append_result(path: Path, row: Row) -> None:
    """One line of JSON per task, written as it is judged (so `--resume` goes on after a stop)."""
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")


def read_results(path: Path) -> list[Row]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw: dict[str, Any] = json.loads(line)
            rows.append(Row(raw["task"], raw["kind"], Side(**raw["agent"]), Side(**raw["oneshot"])))
    return rows
