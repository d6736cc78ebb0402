"""Next-edit suggestions replayed on real history (issue #28): commits of httpx
(../shared/data/httpx.bundle). For each Python file a commit changes, the diff's hunks in file
order; having made hunks 1..k as the user's edits (each an edit of the document's history, after a
pause), with the cursor at the end of hunk k, the next hunk is what should be suggested. "Noise":
the cursor in code the commit does not touch, 30 lines or more from any hunk, after all its
hunks — the right answer is silence.

Each case goes through Margin's next-edit core: the edit history, the Sweep prompt under its
budget (counted with tiktoken o200k), an answer, and the decision (the smallest edits, or
silence). The answers come from scripted oracles that prove each filter:

- `next`: the window rewritten with the true next hunk (when it lies in the window; else the
  window unchanged — all a window-rewriting model can see);
- `no-op`: the window unchanged (must be silence, every time);
- `reversal`: the window with the user's last hunk undone (must never be shown);
- `garbage`: prose instead of code (must never be shown).

Printed per oracle: cases, exact match of the next edit (the document after the shown edits is
the document after the next hunk), location (the first shown edit within 3 lines of the next
hunk), silence on noise, reversals shown, malformed answers shown, prompt tokens (median) and
Margin's time per case (prompt and decision, median).

    .venv/bin/python benchmarks/eval_next_edit.py                  # 40 commits, seed 1
    .venv/bin/python benchmarks/eval_next_edit.py --commits 200
    .venv/bin/python benchmarks/eval_next_edit.py --endpoint http://127.0.0.1:8080/v1 --limit 60

With `--endpoint` (and `--model`), a model answers too, through Margin's whole next-edit service
(`NextEditService.suggest`: the nextEdit profile on that endpoint, its route — Sweep's prompt for
a Sweep model, else the chat route —, the budget counted with the model's tokenizer, the
decision), on the first `--limit` cases (noise among them in proportion).
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from margin.core import budget
from margin.core.next_edit.decide import Decision, Window, apply, decide
from margin.core.next_edit.history import DocumentHistory
from margin.core.next_edit.prompt import sweep_prompt
from margin.core.tokens.local import tiktoken_counter

if TYPE_CHECKING:
    from margin.services.next_edit import NextEditOutcome

BUNDLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "httpx.bundle"
NOISE_DISTANCE = 30
LIMITS = budget.Window(context_window=8192, reserved_output=512, tokenizer="tiktoken:o200k_base", exact=True)
ORACLES = ("next", "no-op", "reversal", "garbage")


@dataclass(frozen=True)
class Case:
    path: str
    steps: tuple[str, ...]
    """the document before the edits, then after each of the user's edits"""
    cursor_line: int
    expected: str | None
    """the document after the next hunk; None: noise (silence is right)"""
    next_line: int = -1


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, check=True).stdout


def hunks(before: str, after: str) -> list[tuple[int, int, list[str]]]:
    """(first line, end line in `before`, new lines) of each change, in file order."""
    old, new = before.split("\n"), after.split("\n")
    return [(i1, i2, new[j1:j2]) for tag, i1, i2, j1, j2 in
            difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if tag != "equal"]


def apply_hunks(before: str, changes: list[tuple[int, int, list[str]]]) -> str:
    lines = before.split("\n")
    for first, end, new in sorted(changes, reverse=True):
        lines[first:end] = new
    return "\n".join(lines)


def cases_of(before: str, after: str, path: str) -> list[Case]:
    changes = hunks(before, after)
    if len(changes) < 2 or len(changes) > 40:
        return []
    steps = [apply_hunks(before, changes[:k]) for k in range(len(changes) + 1)]
    found = []
    for k in range(1, len(changes)):
        shift = sum(len(new) - (end - first) for first, end, new in changes[:k])
        first, _end, new = changes[k - 1]
        cursor = first + sum(len(n) - (e - f) for f, e, n in changes[: k - 1]) + max(len(new) - 1, 0)
        found.append(Case(path, tuple(steps[: k + 1]), cursor, steps[k + 1], changes[k][0] + shift))
    lines = steps[-1].split("\n")
    touched = [first for first, _, _ in changes]
    far = [n for n in range(0, len(lines), 17) if all(abs(n - t) >= NOISE_DISTANCE for t in touched)]
    if far:
        found.append(Case(path, tuple(steps), far[len(far) // 2], None))
    return found


def collect(bundle: Path, commits: int, seed: int) -> list[Case]:
    folder = Path(tempfile.mkdtemp(prefix="margin-next-edit-"))
    subprocess.run(["git", "-c", "advice.detachedHead=false", "clone", "-q", str(bundle), str(folder / "httpx")],
                   check=True)
    repo = folder / "httpx"
    shas = git(repo, "log", "--no-merges", "--format=%H", "--", "*.py").split()
    chosen = random.Random(seed).sample(shas, min(commits, len(shas)))
    found: list[Case] = []
    for sha in chosen:
        for path in git(repo, "diff", "--name-only", "--diff-filter=M", f"{sha}^", sha, "--", "*.py").split():
            before, after = git(repo, "show", f"{sha}^:{path}"), git(repo, "show", f"{sha}:{path}")
            found.extend(cases_of(before, after, path))
    return found


def history_of(case: Case) -> DocumentHistory:
    history = DocumentHistory(case.steps[0], 1)
    for n, text in enumerate(case.steps[1:]):
        history.changed(text, n + 2, 10.0 * (n + 1))  # a pause between hunks: each its own edit
    return history


def answer(oracle: str, case: Case, current: Window) -> str:
    window_lines = current.text.split("\n")
    first, last = current.first_line, current.first_line + len(window_lines)
    if oracle == "garbage":
        return "The code above looks fine. Consider adding type hints and docstrings to every function."
    if oracle == "no-op" or case.expected is None:
        return current.text
    if oracle == "reversal":
        target = case.steps[-2]  # the document before the user's last edit
        delta = len(target.split("\n")) - len(case.steps[-1].split("\n"))
    else:
        target = case.expected
        delta = len(target.split("\n")) - len(case.steps[-1].split("\n"))
    target_lines = target.split("\n")
    if last + delta > len(target_lines) or delta < -len(window_lines) + 1:
        return current.text
    rewrite = "\n".join(target_lines[first : last + delta])
    before_window, after_window = case.steps[-1].split("\n")[:first], case.steps[-1].split("\n")[last:]
    if target_lines[:first] != before_window or target_lines[last + delta :] != after_window:
        return current.text  # the change reaches outside the window: the model cannot see it
    return rewrite


async def ask_model(cases: list[Case], endpoint: str, model: str | None) -> list[tuple[Case, NextEditOutcome, float]]:
    """Each case through NextEditService on the endpoint: (case, outcome, seconds)."""
    from margin.core.next_edit.history import EditHistories
    from margin.services.next_edit import NextEditService
    from margin.wiring import build_app

    scratch = Path(tempfile.mkdtemp(prefix="margin-next-edit-"))
    env = {**os.environ, "MARGIN_NEXT_EDIT_ENABLED": "true", "MARGIN_NEXT_EDIT_BASE_URL": endpoint,
           "MARGIN_NEXT_EDIT_TIMEOUT_S": "300", "MARGIN_DATABASE": str(scratch / "threads.db")}
    if model:
        env["MARGIN_NEXT_EDIT_MODEL"] = model
    app = build_app(env)
    app.workspace.folders = lambda: [scratch.as_uri()]
    service = NextEditService(app, EditHistories())
    answered = []
    try:
        for n, case in enumerate(cases):
            uri = (scratch / case.path).as_uri()
            app.files.open(uri, "python", 1, case.steps[-1])
            started = time.perf_counter()
            outcome = await service.suggest(uri, case.cursor_line, history=history_of(case))
            answered.append((case, outcome, time.perf_counter() - started))
            app.files.close(uri)
            if (n + 1) % 10 == 0:
                print(f"  {n + 1}/{len(cases)} answered", file=sys.stderr, flush=True)
    finally:
        await app.aclose()
    return answered


def model_row(answered: list[tuple[Case, NextEditOutcome, float]]) -> str:
    exact = near = silent = noise = reversals = shown_any = 0
    reasons: dict[str, int] = {}
    tokens, seconds = [], []
    for case, outcome, took in answered:
        edits, silence, report = outcome.edits, outcome.silence, outcome.budget
        if report is not None and report.total:
            tokens.append(report.total)
        seconds.append(took)
        if silence:
            reasons[silence[:40]] = reasons.get(silence[:40], 0) + 1
        document = case.steps[-1]
        shown = apply(document, edits) if edits else None
        shown_any += shown is not None
        if case.expected is None:
            noise += 1
            silent += shown is None
        elif shown == case.expected:
            exact += 1
        if shown is not None and case.expected is not None:
            near += abs(document.count("\n", 0, edits[0].start) - case.next_line) <= 3
        reversals += shown is not None and shown == case.steps[-2]
    positives = len(answered) - noise
    route = (answered[0][1].route or "?") if answered else "?"
    why = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
    return (f"| model ({route} route) | {len(answered)} | {shown_any} shown | {exact}/{positives} | {near}/{positives} | "
            f"{silent}/{noise} | {reversals} | - | {statistics.median(tokens) if tokens else 0:.0f} | "
            f"{statistics.median(seconds) * 1000:.0f} ms (with the model) | {why} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--endpoint", help="an OpenAI-style base URL (with /v1): a model answers too")
    parser.add_argument("--model", help="the model's name at the endpoint")
    parser.add_argument("--limit", type=int, default=60, help="cases the model answers (default 60)")
    args = parser.parse_args()
    cases = collect(args.bundle, args.commits, args.seed)
    count = tiktoken_counter("o200k_base").count
    print(f"{len(cases)} cases ({sum(c.expected is None for c in cases)} noise) from {args.commits} commits of httpx, "
          f"seed {args.seed}; Sweep's format, tiktoken o200k\n")
    print("| oracle | cases | answers that change the window | exact | location ≤ 3 lines | silent on noise "
          "| reversals shown | malformed shown | prompt tokens | Margin's time | silences, by reason |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    failed = False
    for oracle in ORACLES:
        exact = near = silent = noise = reversals = malformed = changing = 0
        tokens, seconds = [], []
        reasons: dict[str, int] = {}
        for case in cases:
            history = history_of(case)
            document = case.steps[-1]
            started = time.perf_counter()
            prompt = sweep_prompt(case.path, document, case.cursor_line, history.edits(), history.original, [],
                                  count, LIMITS)
            if prompt.text is None:
                continue
            edits = history.edits()
            said = answer(oracle, case, prompt.current)
            changing += said.strip("\n") != prompt.current.text.strip("\n")
            decision: Decision = decide(document, prompt.current, said, edits[-1] if edits else None)
            if decision.silence:
                reasons[decision.silence] = reasons.get(decision.silence, 0) + 1
            seconds.append(time.perf_counter() - started)
            tokens.append(count(prompt.text))
            shown = apply(document, decision.edits) if decision.edits else None
            if case.expected is None:
                noise += 1
                silent += shown is None
            elif shown is not None and shown == case.expected:
                exact += 1
            if shown is not None and case.expected is not None and decision.edits:
                line = document.count("\n", 0, decision.edits[0].start)
                near += abs(line - case.next_line) <= 3
            if shown is not None and shown == case.steps[-2]:
                reversals += 1
            if shown is not None and oracle == "garbage":
                malformed += 1
        positives = len(cases) - noise
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items()))
        print(f"| {oracle} | {len(tokens)} | {changing} | {exact}/{positives} | {near}/{positives} | {silent}/{noise} | "
              f"{reversals} | {malformed} | {statistics.median(tokens):.0f} | {statistics.median(seconds) * 1000:.2f} ms "
              f"| {why} |")
        failed |= reversals > 0 or malformed > 0 or (oracle == "no-op" and silent < noise)
        failed |= oracle == "no-op" and exact > 0
    if args.endpoint:
        chosen = random.Random(args.seed).sample(cases, min(args.limit, len(cases)))
        print(model_row(asyncio.run(ask_model(chosen, args.endpoint, args.model))))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
