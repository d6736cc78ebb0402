"""`margin eval completion`: how good Margin's inline completions are on the endpoint a user has,
against the same model called directly (margin.evals.completion_eval). The endpoint and model
are the completion profile's (settings, environment), or `--endpoint` and `--model`; both
sides run at `--temperature` (0: greedy, so a run can be repeated) with the profile's output
limit. Margin's threads, memories and workspace are not touched: the run has a database and an
empty workspace folder of its own, which go when it ends."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from margin.cli_app import CliError
from margin.evals import infilling, sandbox
from margin.evals.direct import ROUTES


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
    completion.add_argument("--endpoint", metavar="URL", help="the OpenAI-style base URL, with its /v1 "
                            "(default: the completion profile's)")
    completion.add_argument("--model", help="the model name (default: the completion profile's)")
    completion.add_argument("--api-key-env", metavar="VAR",
                            help="the environment variable holding the endpoint's API key")
    completion.add_argument("--temperature", type=float, default=0.0, help="both sides' (default 0)")
    completion.add_argument("--timeout", type=float, default=300.0, metavar="S",
                            help="seconds a model request may take (default 300: quality, not speed)")
    completion.add_argument("--direct-route", choices=ROUTES,
                            help="how the direct call asks (default: the route Margin chose)")
    completion.add_argument("--check-time", type=float, default=sandbox.TIME_LIMIT_S, metavar="S",
                            help=f"seconds an answer's tests may run (default {sandbox.TIME_LIMIT_S:g})")
    completion.add_argument("--results", type=Path, metavar="FILE", help="write every answer and verdict (JSON)")
    completion.add_argument("--data", type=Path, default=infilling.DATA, help=argparse.SUPPRESS)
    completion.set_defaults(run=_completion)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


async def _completion(args: argparse.Namespace) -> int:
    from margin.evals import completion_eval
    from margin.wiring import build_app

    names = [name.strip() for name in args.set.split(",") if name.strip()]
    try:
        sets = {name: infilling.load(name, args.data) for name in names}
    except infilling.ProblemsError as error:
        raise CliError(str(error)) from None
    chosen = [(name, problem) for name, problems in sets.items()
              for problem in infilling.sample(problems, args.limit, args.seed)]
    with tempfile.TemporaryDirectory(prefix="margin-eval-") as scratch:
        folder = Path(scratch) / "workspace"
        folder.mkdir()
        overrides = {"MARGIN_DATABASE": str(Path(scratch) / "threads.db"),
                     "MARGIN_COMPLETION_TEMPERATURE": repr(args.temperature),
                     "MARGIN_COMPLETION_TIMEOUT_S": repr(args.timeout),
                     "MARGIN_COMPLETION_ENABLED": "true"}
        for option, variable in ((args.endpoint, "BASE_URL"), (args.model, "MODEL"), (args.api_key_env, "API_KEY_ENV")):
            if option:
                overrides[f"MARGIN_COMPLETION_{variable}"] = option
        app = build_app({**os.environ, **overrides})
        app.settings_path = args.settings
        if app.settings.startup_problems:
            raise CliError("invalid settings: " + "; ".join(map(str, app.settings.startup_problems)))
        try:
            run = completion_eval.CompletionEval(app, folder, args.direct_route, args.check_time)
            print(f"{len(chosen)} problems · {run.endpoint.base_url} · Margin's route, then the direct call",
                  file=sys.stderr)

            def progress(done: int, total: int) -> None:
                if done % 10 == 0 or done == total:
                    print(f"  {done}/{total} answered", file=sys.stderr, flush=True)

            rows = await run.run(chosen, progress)
        finally:
            await app.aclose()
    print(completion_eval.report(rows, run.endpoint, args.seed, {name: len(p) for name, p in sets.items()}))
    if args.results:
        completion_eval.write_results(args.results, rows)
        print(f"every answer: {args.results}", file=sys.stderr)
    if completion_eval.margin_worse(rows):
        print("margin: Margin passed fewer problems than the direct call (its target: at least as many)",
              file=sys.stderr)
        return 1
    return 0
