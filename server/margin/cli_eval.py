"""`margin eval completion` and `margin eval edits`: how good Margin's inline completions and
edit-ops are on the endpoint a user has, against the same model called directly
(margin.evals.completion_eval, margin.evals.edits_eval). The endpoint and model are the profile's
(completion, chatOps: settings, environment), or `--endpoint` and `--model`; both sides run at
`--temperature` (0: greedy, so a run can be repeated) with the profile's output limit. Margin's
threads, memories and workspace are not touched: the run has a database and a workspace folder
of its own, which go when it ends."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from margin.cli_app import CliError
from margin.evals import exercism, infilling, sandbox
from margin.evals.direct import ROUTES

if TYPE_CHECKING:
    from margin.core.settings import ProfileSettings
    from margin.evals.agent_eval import AgentEval, Row
    from margin.services.app import MarginApp

T = TypeVar("T")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = commands.add_parser("eval", help="score Margin against the same model called directly")
    kinds = evaluate.add_subparsers(dest="eval_kind", metavar="KIND", required=True)
    completion = kinds.add_parser(
        "completion", help="HumanEval infilling through Margin's inline completion and a direct call",
        description=(__doc__ or "").split("\n\n")[0])
    completion.add_argument("--set", default="single",
                            help=f"comma-separated sets: {', '.join(infilling.SETS)} (1,033, 5,815 and 164 "
                                 "problems; default single)")
    completion.add_argument("--limit", type=_positive, default=None,
                            help="problems a set, chosen with --seed (default: all)")
    completion.add_argument("--seed", type=int, default=1, help="which problems --limit chooses (default 1)")
    _endpoint_options(completion, "completion")
    completion.add_argument("--direct-route", choices=ROUTES,
                            help="how the direct call asks (default: the route Margin chose)")
    completion.add_argument("--check-time", type=float, default=sandbox.TIME_LIMIT_S, metavar="S",
                            help=f"seconds an answer's tests may run (default {sandbox.TIME_LIMIT_S:g})")
    completion.add_argument("--results", type=Path, metavar="FILE",
                            help="write every answer and verdict, a JSON line a problem as it is checked")
    completion.add_argument("--resume", action="store_true",
                            help="go on with the interrupted run whose --results FILE exists: its problems are "
                                 "not asked again, and count in the report")
    completion.add_argument("--data", type=Path, default=infilling.DATA, help=argparse.SUPPRESS)
    completion.set_defaults(run=_completion)

    edits = kinds.add_parser(
        "edits", help="Exercism exercises by Margin's edit-ops and by a direct whole-file answer",
        description="Exercism Python exercises (Aider's edit benchmark) solved through Margin's edit-ops "
                    "(chat-ops, applied as margin/applyOps applies them) and by the same model asked directly "
                    "for the whole file; each answer judged by the exercise's tests in the sandbox.")
    edits.add_argument("--limit", type=_positive, default=None, help="exercises, chosen with --seed (default: all)")
    edits.add_argument("--seed", type=int, default=1, help="which exercises --limit chooses (default 1)")
    edits.add_argument("--exercise", action="append", metavar="SLUG", help="this exercise (repeatable)")
    _endpoint_options(edits, "chatOps")
    edits.add_argument("--tries", type=int, choices=(1, 2), default=2,
                       help="2 (default): a failed answer gets one more try, with the test report")
    edits.add_argument("--check-time", type=float, default=exercism.TIME_LIMIT_S, metavar="S",
                       help=f"seconds an exercise's tests may run (default {exercism.TIME_LIMIT_S:g})")
    edits.add_argument("--results", type=Path, metavar="FILE", help="write every answer and verdict (JSON)")
    edits.add_argument("--data", type=Path, default=exercism.DATA, help=argparse.SUPPRESS)
    edits.set_defaults(run=_edits)

    agent = kinds.add_parser(
        "agent", help="the agent's tasks by agent mode and by one edit-ops answer on the same model",
        description="Margin's agent evaluation tasks (small repositories with hidden tests) done by agent mode, "
                    "its confirmations answered by a policy (edits and test commands approved, anything else "
                    "refused), and by the same model one-shot through edit-ops with the files open; both judged "
                    "by the hidden tests in the sandbox. --oracle plays each task's known-good trajectory "
                    "through the real agent core instead (the ceiling of Margin's own path; no model).")
    agent.add_argument("--limit", type=_positive, default=None, help="tasks, chosen with --seed (default: all)")
    agent.add_argument("--seed", type=int, default=1, help="which tasks --limit chooses (default 1)")
    agent.add_argument("--task", action="append", metavar="ID", help="this task (repeatable)")
    agent.add_argument("--oracle", action="store_true", help="play the known-good trajectories (no model)")
    agent.add_argument("--exercism", action="store_true",
                       help="the 133 Exercism exercises of `margin eval edits` through agent mode instead (--limit, "
                            "--seed choose among them)")
    _endpoint_options(agent, "agent")
    agent.add_argument("--turn-timeout", type=float, default=600.0, metavar="S",
                       help="seconds an agent turn may take (agentTurnTimeoutS; default 600)")
    agent.add_argument("--results", type=Path, metavar="FILE",
                       help="write every task's verdicts, a JSON line a task as it is judged")
    agent.add_argument("--resume", action="store_true",
                       help="go on with the interrupted run whose --results FILE exists")
    agent.set_defaults(run=_agent)


def _endpoint_options(parser: argparse.ArgumentParser, profile: str) -> None:
    parser.add_argument("--endpoint", metavar="URL", help="the OpenAI-style base URL, with its /v1 "
                        f"(default: the {profile} profile's)")
    parser.add_argument("--model", help=f"the model name (default: the {profile} profile's)")
    parser.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the endpoint's API key")
    parser.add_argument("--temperature", type=float, default=0.0, help="both sides' (default 0)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="seconds a model request may take (default 300: quality, not speed)")
    parser.add_argument("--max-tokens", type=_positive, metavar="N",
                        help=f"the output limit of both sides' answers (default: the {profile} profile's)")


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


def _sandbox() -> str:
    """The protection model-written code runs under (margin.adapters.sandbox), said before any
    runs; an error when MARGIN_SANDBOX asks for one that cannot run here."""
    from margin.adapters import sandbox as sandboxed

    try:
        return sandboxed.protection().describe()
    except sandboxed.SandboxError as error:
        raise CliError(str(error)) from None


@asynccontextmanager
async def _eval_app(args: argparse.Namespace, *profiles: str,
                    **more: str) -> AsyncIterator[tuple[MarginApp, Path]]:
    """Margin for the run: the profiles (`COMPLETION`, `CHAT_OPS`, `AGENT`) on the endpoint asked
    for, at the temperature asked for, with a thread database and a workspace folder of its own."""
    from margin.wiring import build_app

    with tempfile.TemporaryDirectory(prefix="margin-eval-") as scratch:
        folder = Path(scratch) / "workspace"
        folder.mkdir()
        overrides = {"MARGIN_DATABASE": str(Path(scratch) / "threads.db"), **more}
        for profile in profiles:
            overrides.update({f"MARGIN_{profile}_TEMPERATURE": repr(args.temperature),
                              f"MARGIN_{profile}_TIMEOUT_S": repr(args.timeout),
                              f"MARGIN_{profile}_ENABLED": "true"})
            for option, variable in ((args.endpoint, "BASE_URL"), (args.model, "MODEL"),
                                     (args.api_key_env, "API_KEY_ENV"),
                                     (args.max_tokens and str(args.max_tokens), "MAX_OUTPUT_TOKENS")):
                if option:
                    overrides[f"MARGIN_{profile}_{variable}"] = option
        app = build_app({**os.environ, **overrides})
        app.settings_path = args.settings
        if app.settings.startup_problems:
            raise CliError("invalid settings: " + "; ".join(map(str, app.settings.startup_problems)))
        try:
            yield app, folder
        finally:
            await app.aclose()


def _previous(args: argparse.Namespace, read: Callable[[Path], list[T]]) -> list[T]:
    """The rows of the run `--resume` goes on with; an existing results file is never overwritten."""
    if args.results is None:
        if args.resume:
            raise CliError("--resume goes on with the run in --results FILE: name the file")
        return []
    if not args.results.exists():
        return []
    if not args.resume:
        raise CliError(f"{args.results} exists: --resume goes on with the run it holds, or name another file")
    return read(args.results)


def _progress(every: int) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        if done % every == 0 or done == total:
            print(f"  {done}/{total} answered", file=sys.stderr, flush=True)
    return progress


async def _completion(args: argparse.Namespace) -> int:
    from margin.evals import completion_eval

    names = [name.strip() for name in args.set.split(",") if name.strip()]
    try:
        sets = {name: infilling.load(name, args.data) for name in names}
    except infilling.ProblemsError as error:
        raise CliError(str(error)) from None
    chosen = [(name, problem) for name, problems in sets.items()
              for problem in infilling.sample(problems, args.limit, args.seed)]
    previous = _previous(args, completion_eval.read_results)
    done = {(row.set, row.task_id): row for row in previous}
    remaining = [(name, problem) for name, problem in chosen if (name, problem.task_id) not in done]
    direct_route = args.direct_route or next((r.direct.route for r in previous if r.margin.route), None)
    protection = _sandbox()
    async with _eval_app(args, "COMPLETION") as (app, folder):
        run = completion_eval.CompletionEval(app, folder, direct_route, args.check_time)
        print(f"{len(remaining)} problems · {run.endpoint.base_url} · Margin's route, then the direct call"
              + (f" ({len(chosen) - len(remaining)} done before, in {args.results})" if previous else "")
              + f"\n{protection}", file=sys.stderr)
        def checked(row: completion_eval.Row) -> None:
            if args.results:
                completion_eval.append_result(args.results, row)
        new = {(row.set, row.task_id): row for row in await run.run(remaining, _progress(10), checked)}
    rows = [done.get((name, problem.task_id)) or new[name, problem.task_id] for name, problem in chosen]
    return _verdict(completion_eval.report(rows, run.endpoint, args.seed, {name: len(p) for name, p in sets.items()}),
                    args.results, completion_eval.margin_worse(rows), "problems")


async def _edits(args: argparse.Namespace) -> int:
    from margin.evals import edits_eval

    try:
        exercises = exercism.load(args.data)
    except infilling.ProblemsError as error:
        raise CliError(str(error)) from None
    if args.exercise:
        known = {e.slug: e for e in exercises}
        unknown = [slug for slug in args.exercise if slug not in known]
        if unknown:
            raise CliError(f"no exercise {', '.join(map(repr, unknown))}: see {args.data.parent / 'SOURCE.md'}")
        chosen = [known[slug] for slug in dict.fromkeys(args.exercise)]
    else:
        chosen = exercism.sample(exercises, args.limit, args.seed)
    protection = _sandbox()
    async with _eval_app(args, "CHAT_OPS") as (app, folder):
        run = edits_eval.EditsEval(app, folder, args.tries, args.check_time)
        print(f"{len(chosen)} exercises · {run.endpoint.base_url} · Margin's edit-ops, then the direct call"
              f"\n{protection}", file=sys.stderr)
        rows = await run.run(chosen, _progress(5))
    if args.results:
        edits_eval.write_results(args.results, rows)
    return _verdict(edits_eval.report(rows, run.endpoint, args.seed, len(exercises), args.tries), args.results,
                    edits_eval.margin_worse(rows), "exercises")


async def _agent(args: argparse.Namespace) -> int:
    import random

    from margin.evals import agent_eval, agent_tasks

    tasks = agent_tasks.load()
    if args.task:
        known = {t.id: t for t in tasks}
        unknown = [task for task in args.task if task not in known]
        if unknown:
            raise CliError(f"no task {', '.join(map(repr, unknown))}: see {agent_tasks.DATA / 'SOURCE.md'}")
        chosen = [known[task] for task in dict.fromkeys(args.task)]
    elif args.limit is not None and args.limit < len(tasks):
        picked = sorted(random.Random(args.seed).sample(range(len(tasks)), args.limit))
        chosen = [tasks[i] for i in picked]
    else:
        chosen = tasks
    protection = _sandbox()
    if args.oracle:
        with tempfile.TemporaryDirectory(prefix="margin-eval-") as scratch:
            print(f"{len(chosen)} tasks · the oracle through Margin's agent core\n{protection}", file=sys.stderr)
            played = await agent_tasks.oracle(chosen, Path(scratch))
        for one in played:
            print(f"  {one.task:<32} {'pass' if one.passed else 'FAIL'}  {one.stopped}, {one.steps} steps, "
                  f"{one.edits} edits" + ("" if one.passed else f"\n    {one.tests.strip().splitlines()[-1:]}"))
        passed = sum(one.passed for one in played)
        print(f"the oracle passed {passed} of {len(played)} tasks")
        return 0 if passed == len(played) else 1
    previous = _previous(args, agent_eval.read_results)
    done = {row.task: row for row in previous}
    if args.exercism:
        return await _agent_exercism(args, previous, protection)
    remaining = [task for task in chosen if task.id not in done]
    async with _agent_eval(args, "CHAT_OPS") as (profile, run):
        print(f"{len(remaining)} tasks · {profile.base_url} · agent mode, then one edit-ops answer"
              + (f" ({len(previous)} done before, in {args.results})" if previous else "") + f"\n{protection}",
              file=sys.stderr)
        new = {row.task: row for row in await run.run(remaining, _progress(1), _written(args))}
    rows = [done.get(task.id) or new[task.id] for task in chosen]
    return _verdict(agent_eval.report(rows, profile.base_url, profile.model or "the server's model", len(tasks)),
                    args.results, agent_eval.agent_worse(rows), "tasks")


@asynccontextmanager
async def _agent_eval(args: argparse.Namespace, *profiles: str) -> AsyncIterator[tuple[ProfileSettings, AgentEval]]:
    """The agent profile and an evaluation over an app of the run's own (the agent profile and
    `profiles` pointed at the endpoint; the tasks' check command; no retrieval)."""
    from margin.evals import agent_eval, agent_tasks

    async with _eval_app(args, "AGENT", *profiles, MARGIN_AGENT_CHECK_COMMAND=agent_tasks.CHECK_COMMAND,
                         MARGIN_AGENT_TURN_TIMEOUT_S=repr(args.turn_timeout), MARGIN_RETRIEVAL="false") as (app, folder):
        yield app.settings.current.profile("agent"), agent_eval.AgentEval(app, folder, args.turn_timeout)


def _written(args: argparse.Namespace) -> Callable[[Row], None]:
    """Each judged row appended to --results, when given, as it is judged."""
    from margin.evals import agent_eval

    return lambda row: agent_eval.append_result(args.results, row) if args.results else None


async def _agent_exercism(args: argparse.Namespace, previous: list[Any], protection: str) -> int:
    from margin.evals import agent_eval

    exercises = exercism.load()
    chosen = exercism.sample(exercises, args.limit, args.seed)
    done = {row.task: row for row in previous}
    remaining = [e for e in chosen if e.slug not in done]
    async with _agent_eval(args) as (profile, run):
        print(f"{len(remaining)} exercises · {profile.base_url} · agent mode\n{protection}", file=sys.stderr)
        new = {row.task: row for row in await run.exercises(remaining, _progress(5), _written(args))}
    rows = [done.get(e.slug) or new[e.slug] for e in chosen]
    print(agent_eval.report(rows, profile.base_url, profile.model or "the server's model", len(exercises), "exercises"))
    if args.results:
        print(f"every answer: {args.results}", file=sys.stderr)
    return 0


def _verdict(report: str, results: Path | None, worse: bool, what: str) -> int:
    """The report printed, where every answer went, and the exit status: 1 when Margin passed
    fewer `what` than the direct call."""
    print(report)
    if results:
        print(f"every answer: {results}", file=sys.stderr)
    if worse:
        print(f"margin: Margin passed fewer {what} than the direct call (its target: at least as many)"
              if what != "tasks" else "margin: agent mode passed fewer tasks than one-shot edit-ops (its target: at "
              "least as many)", file=sys.stderr)
        return 1
    return 0
