"""`margin eval edits`: Exercism exercises (margin.evals.exercism) solved by edit-ops through
Margin's real path — the stub open in the editor, one chat-ops request (the chatOps profile:
its prompt, budget and edit schema), the proposed ops applied as `margin/applyOps` applies them
(re-validated against the text the model saw, fingerprint-guarded) — and by the same model asked
directly for the whole file in a fenced block, with plain HTTP. The exercise's tests judge both.

As in Aider's benchmark, the instructions and the stub are shown, never the tests; when the
tests fail, one more try (`tries` 2) gives the model the test report and asks for a fix: Margin
in the same thread, with the file as it now is; the direct call in the same conversation.

"Well-formed" is, for Margin, a first answer whose ops validate and apply; for the direct call,
a first answer with a fenced block in it. Requests go one at a time; tests run beside them.
"""

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
from margin.evals import exercism, stats
from margin.evals.direct import DirectClient, Endpoint, fenced_blocks
from margin.evals.exercism import Exercise
from margin.services.app import MarginApp
from margin.services.editops import ApplyRequest
from margin.services.registry import Services

ASK = """{instructions}
####

Use the above instructions to modify the supplied files: {files}
Don't change the names of existing functions or classes, as they may be referenced from other code like unit tests, etc.
Only use standard python libraries, don't suggest installing any packages."""
"""the request, as Aider's benchmark words it (both sides)"""
WHOLE_FILE = """

{name}
```python
{text}```

Reply with the whole new content of {name}, in one ```python fenced block."""
"""what the direct call adds: the file, and the answer's shape (Aider's "whole" format)"""
RETRY = """{report}
####

See the testing errors above.
The tests are correct, don't try and change them.
Fix the code in {files} to resolve the errors."""
AGAIN = """{request}

(An earlier answer to this could not be applied: {error})"""
"""Margin's second try after an answer that did not apply: the thread has no trace of it"""
NO_BLOCK = "Your answer has no whole file in a fenced block. Reply with the whole new content of {names}, " \
           "in one ```python fenced block."
REPORT_LINES = 50
"""of the test report given back on a retry (Aider's limit)"""
CHECKS_AT_ONCE = 2


@dataclass
class Try:
    well_formed: bool
    passed: bool = False
    seconds: float = 0.0
    prompt_tokens: int | None = None
    error: str = ""
    """why the answer was not applied, or the tests' last line"""
    answer: dict[str, str] = field(default_factory=dict)
    """the files as answered"""


@dataclass
class Attempts:
    tries: list[Try] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return any(t.passed for t in self.tries)

    @property
    def passed_first(self) -> bool:
        return bool(self.tries) and self.tries[0].passed

    @property
    def well_formed(self) -> bool:
        return bool(self.tries) and self.tries[0].well_formed


@dataclass
class Row:
    slug: str
    margin: Attempts
    direct: Attempts


class EditsEval:
    """Runs exercises through Margin (`app`, its chatOps profile) and the direct call."""

    def __init__(self, app: MarginApp, folder: Path, tries: int = 2,
                 check_time_s: float = exercism.TIME_LIMIT_S) -> None:
        self.app = app
        self.services = Services.over(app)
        self.folder = folder
        self.tries = tries
        self.check_time_s = check_time_s
        self.room = asyncio.Semaphore(CHECKS_AT_ONCE)
        profile = app.settings.current.profile("chatOps")
        self.endpoint = Endpoint(profile.base_url, profile.model, app.backends.key_for(profile),
                                 profile.temperature, profile.max_output_tokens, profile.timeout_s)

    async def run(self, exercises: Sequence[Exercise],
                  progress: Callable[[int, int], None] = lambda done, total: None) -> list[Row]:
        rows = []
        client = DirectClient(self.endpoint)
        try:
            for number, exercise in enumerate(exercises):
                rows.append(Row(exercise.slug, await self.margin(exercise), await self.direct(client, exercise)))
                progress(number + 1, len(exercises))
        finally:
            await client.aclose()
        return rows

    async def _check(self, exercise: Exercise, attempt: Try) -> str:
        """Run the tests on `attempt`'s files; the report to give back if they failed."""
        async with self.room:
            verdict = await exercise.check(attempt.answer, self.check_time_s)
        attempt.passed = verdict.passed
        if not verdict.passed:
            attempt.error = attempt.error or f"{verdict.outcome}: {verdict.detail}"
        return "\n".join(verdict.output.splitlines()[:REPORT_LINES])

    # ---- through Margin ---------------------------------------------------------------------

    async def margin(self, exercise: Exercise) -> Attempts:
        """The stubs open in a workspace of their own, a new thread, chat-ops and applyOps."""
        workspace = self.folder / exercise.slug
        workspace.mkdir(parents=True, exist_ok=True)
        uris = {}
        for name, text in exercise.solution.items():
            (workspace / name).write_text(text, encoding="utf-8")
            uris[name] = (workspace / name).as_uri()
            self.app.files.open(uris[name], "python", 1, text)
        self.app.workspace.folders = lambda: [workspace.as_uri()]
        first = next(iter(uris.values()))
        thread = await self.services.threads.new(Where(text_document=first), title=exercise.slug)
        where = Where(text_document=first, thread_id=thread.id)
        request = ASK.format(instructions=exercise.instructions, files=", ".join(exercise.solution))
        message = request
        attempts = Attempts()
        try:
            for _ in range(self.tries):
                attempt = await self._margin_try(message, where, uris)
                attempts.tries.append(attempt)
                if not attempt.well_formed:
                    message = AGAIN.format(request=request, error=attempt.error)
                    continue
                report = await self._check(exercise, attempt)
                if attempt.passed:
                    break
                message = RETRY.format(report=report, files=", ".join(exercise.solution))
        finally:
            for uri in uris.values():
                self.app.files.close(uri)
        return attempts

    async def _margin_try(self, message: str, where: Where, uris: dict[str, str]) -> Try:
        from margin.services.turn import Ask

        started = time.perf_counter()
        outcome = await self.services.editops.propose(Ask(message, where, list(uris.values())))
        seconds = time.perf_counter() - started
        tokens = (outcome.budget.counted or outcome.budget.total) if outcome.budget else None
        current = {name: file.text for name, uri in uris.items() if (file := self.app.files.get(uri)) is not None}
        if not outcome.ops:
            return Try(False, seconds=seconds, prompt_tokens=tokens, error=outcome.assistant_message[:300],
                       answer=current)
        prepared = self.services.editops.prepare_apply(ApplyRequest(outcome.ops, outcome.base_fingerprints, where))
        if prepared.plan is None or prepared.failure:
            return Try(False, seconds=seconds, prompt_tokens=tokens, error=(prepared.failure or "not applied")[:300],
                       answer=current)
        for name, uri in uris.items():  # applied, as the editor applies the WorkspaceEdit and reports the change
            file = self.app.files.get(uri)
            if file is not None and uri in prepared.plan.edits:
                current[name] = apply_edits(file.text, prepared.plan.edits[uri])
                self.app.files.close(uri)
                self.app.files.open(uri, "python", file.version + 1, current[name])
        return Try(True, seconds=seconds, prompt_tokens=tokens, answer=current)

    # ---- directly, the whole file -----------------------------------------------------------

    async def direct(self, client: DirectClient, exercise: Exercise) -> Attempts:
        files = ", ".join(exercise.solution)
        shown = "".join(WHOLE_FILE.format(name=name, text=text if text.endswith("\n") else text + "\n")
                        for name, text in exercise.solution.items())
        messages = [{"role": "user", "content": ASK.format(instructions=exercise.instructions, files=files) + shown}]
        attempts = Attempts()
        current = dict(exercise.solution)
        for _ in range(self.tries):
            answer = await client.chat(messages)
            blocks = fenced_blocks(answer.text or "")
            attempt = Try(bool(blocks), seconds=answer.seconds, prompt_tokens=answer.prompt_tokens,
                          error=answer.error or ("" if blocks else "no fenced block in the answer"))
            if blocks and len(exercise.solution) == 1:
                current = {next(iter(exercise.solution)): blocks[-1]}
            attempt.answer = dict(current)
            attempts.tries.append(attempt)
            if answer.text is None:
                break  # the request failed: the endpoint's fault, not the model's
            if not blocks:
                messages += [{"role": "assistant", "content": answer.text},
                             {"role": "user", "content": NO_BLOCK.format(names=files)}]
                continue
            report = await self._check(exercise, attempt)
            if attempt.passed:
                break
            messages += [{"role": "assistant", "content": answer.text},
                         {"role": "user", "content": RETRY.format(report=report, files=files)}]
        return attempts


# ---- the report -------------------------------------------------------------------------------

def report(rows: Sequence[Row], endpoint: Endpoint, seed: int, total: int, tries: int) -> str:
    model = endpoint.model or "the server's model"
    lines = [f"margin eval edits · {endpoint.base_url} · {model} · temperature {endpoint.temperature:g} · seed {seed}",
             "", f"{len(rows)} of {total} exercises, {tries} {'try' if tries == 1 else 'tries'} each",
             (f"  {'':<28}{'well-formed':>14}{'pass, 1st try':>16}{'pass':>14}{'retried':>9}{'median s':>10}"
              f"{'prompt tokens':>15}")]
    for label, side in (("Margin (edit-ops)", "margin"), ("direct (whole file)", "direct")):
        attempts: list[Attempts] = [getattr(row, side) for row in rows]
        lines.append(f"  {label:<28}{_rate(sum(a.well_formed for a in attempts), len(rows)):>14}"
                     f"{_rate(sum(a.passed_first for a in attempts), len(rows)):>16}"
                     f"{_rate(sum(a.passed for a in attempts), len(rows)):>14}"
                     f"{sum(len(a.tries) > 1 for a in attempts):>9}" + _times(attempts))
    paired = stats.paired([row.margin.passed for row in rows], [row.direct.passed for row in rows])
    lines.append(f"  {'difference, Margin - direct':<28}{'':>14}{'':>16}{100 * paired.difference:>+13.1f}%  "
                 f"95% interval [{100 * paired.low:+.1f}, {100 * paired.high:+.1f}] points; "
                 f"only Margin passed {paired.only_first}, only direct {paired.only_second}")
    return "\n".join(lines) + "\n"


def _rate(count: int, total: int) -> str:
    return f"{count}/{total} {100 * count / total:3.0f}%" if total else "-"


def _times(attempts: Sequence[Attempts]) -> str:
    tries = [t for a in attempts for t in a.tries]
    seconds = statistics.median(t.seconds for t in tries) if tries else 0.0
    tokens = [t.prompt_tokens for t in tries if t.prompt_tokens is not None]
    return f"{seconds:>10.2f}{(f'{statistics.median(tokens):.0f}' if tokens else '-'):>15}"


def margin_worse(rows: Sequence[Row]) -> bool:
    return sum(r.margin.passed for r in rows) < sum(r.direct.passed for r in rows)


def write_results(path: Path, rows: Sequence[Row]) -> None:
    data: list[dict[str, Any]] = [{"slug": r.slug, "margin": asdict(r.margin), "direct": asdict(r.direct)} for r in rows]
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
