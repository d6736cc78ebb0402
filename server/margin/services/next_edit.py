"""Next-edit suggestions (SPEC M): from a document's recent edits, the edit the user will make
next in the window around the cursor — or silence.

The `nextEdit` profile (off until turned on) names the model. Its route follows the model: one
made for next edits by Sweep (a name with "sweep" in it) gets Sweep's own prompt as a raw
completion (`/completions`, greedy, stopped at `<|file_sep|>`), one of Zed's Zeta models (a name
with "zeta" in it) Zeta's (stopped at the end of the editable region); any other model gets the
chat route — the same parts in words under the `next_edit_v1` template, answering with the window
rewritten in a fenced block. The prompt is counted with the profile's tokenizer and cut by the
budget (core.next_edit.prompt); the answer is made into the smallest edits or silence
(core.next_edit.decide); and nothing is suggested for a document that changed while the model
answered. The edits are offsets into the text the model saw, named by its version and
fingerprint.

Cost: one request in flight per document — a request for another place or version aborts the
older one's model call, and one for the same place and version shares it; an answer is kept for
the state it was made for (the last per document, and the model's answers by prompt), so asking
again costs nothing; the model is asked only when no inline completion is running; and after a
pause in typing (`nextEditPauseMs`) the next edit at the last change is asked for at once, so it
is ready when the editor asks.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

from margin import logs
from margin.core import budget
from margin.core.budget import BudgetReport
from margin.core.completion import junk
from margin.core.fim import FimRequest
from margin.core.llm import ChatMessage, ProviderError
from margin.core.next_edit import formats
from margin.core.next_edit.decide import Suggested, decide, fenced_code
from margin.core.next_edit.history import DocumentHistory, EditHistories
from margin.core.next_edit.prompt import next_edit_prompt, parts
from margin.services.app import MarginApp
from margin.services.background import REQUEST
from margin.services.errors import RequestError
from margin.services.profile import Profile, resolve_profile, snapshot

log = logging.getLogger(__name__)

PROFILE = "nextEdit"
Route = Literal["sweep", "zeta", "chat"]
ANSWERS_KEPT = 32
"""the model's answers kept, by prompt"""
REPLACED = "a newer request for this document replaced it"
Key = tuple[int, str, int]
"""what an answer is for: the document's version and fingerprint, and the cursor's line"""


def instructions_of(route: Route, system: str) -> str:
    """The fixed text of `route`'s prompt that an answer must not repeat (core.completion.junk):
    the chat route's system prompt, Zeta's instruction; Sweep's format has none."""
    return system if route == "chat" else formats.ZETA_INSTRUCTION if route == "zeta" else ""


def route_for(model: str | None) -> Route:
    """Sweep's own format for Sweep's next-edit models, Zeta's for Zed's; the chat route for every
    other model."""
    name = (model or "").lower()
    return "sweep" if "sweep" in name else "zeta" if "zeta" in name else "chat"


@dataclass
class NextEditOutcome:
    enabled: bool
    edits: tuple[Suggested, ...] = ()
    """offsets into the text the model saw (`version`, `fingerprint`)"""
    version: int | None = None
    fingerprint: str | None = None
    route: Route | None = None
    silence: str | None = None
    """why nothing is suggested"""
    budget: BudgetReport | None = None
    failed: bool = False
    """the model call failed (`silence` says how): asked again, not kept"""


class NextEditService:
    def __init__(self, app: MarginApp, histories: EditHistories) -> None:
        self.app = app
        self.histories = histories
        self._running: dict[str, tuple[Key, asyncio.Task[NextEditOutcome]]] = {}
        self._known: dict[str, tuple[Key, NextEditOutcome]] = {}
        self._answers: OrderedDict[str, tuple[str | None, bool]] = OrderedDict()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._started: set[asyncio.Task[NextEditOutcome]] = set()
        self.asking: dict[str, int] = {}
        """model calls in flight, by document"""
        self.most_asking = 0
        """the most model calls ever in flight for one document (metadata for tests and benchmarks)"""
        self.model_calls = 0

    def known(self, uri: str, line: int) -> NextEditOutcome | None:
        """The answer already made for the document as it is now and the cursor on `line`."""
        file, entry = self.app.files.get(uri), self._known.get(uri)
        if file is None or entry is None or entry[0] != (file.version, file.fingerprint, line):
            return None
        return entry[1]

    async def suggest(self, uri: str, line: int, context_files: tuple[tuple[str, str], ...] = (),
                      history: DocumentHistory | None = None) -> NextEditOutcome:
        """The next edit for the cursor on `line` of the open document `uri`, from its history
        (`history`, by default the one kept from the editor's changes)."""
        settings = snapshot(self.app, PROFILE)
        if not settings.enabled:
            return NextEditOutcome(False, silence="Next-edit suggestions are off: set nextEdit.enabled to true "
                                                  "(and nextEdit.model to the model that makes them).")
        file = self.app.files.get(uri)
        if file is None:
            raise RequestError(f"{uri} is not open: the editor must send didOpen first")
        if not 0 <= line < file.line_count:
            raise RequestError(f"line {line} is past the end of the document ({file.line_count} lines)")
        if history is not None or context_files:  # the terminal's own request: nothing to share
            return await self._suggest(uri, line, settings, context_files, history)
        if (known := self.known(uri, line)) is not None:
            return known
        key = (file.version, file.fingerprint, line)
        running = self._running.get(uri)
        if running is None or running[0] != key or running[1].done():
            if running is not None:
                running[1].cancel()  # another place or version: its model call is aborted
            task = asyncio.ensure_future(self._suggest(uri, line, settings))
            self._running[uri] = running = (key, task)
            task.add_done_callback(lambda done: self._finished(uri, key, done))
        try:
            return await asyncio.shield(running[1])  # a request given up leaves it to the others
        except asyncio.CancelledError:
            if (me := asyncio.current_task()) is not None and me.cancelling():
                raise
            return NextEditOutcome(True, version=file.version, fingerprint=file.fingerprint, silence=REPLACED)

    def _finished(self, uri: str, key: Key, task: asyncio.Task[NextEditOutcome]) -> None:
        if self._running.get(uri, (None, None))[1] is task:
            del self._running[uri]
        if not task.cancelled() and task.exception() is None and not task.result().failed:
            self._known[uri] = (key, task.result())

    def typed(self, uri: str, pause_s: float) -> None:
        """`uri` changed: after `pause_s` with no other change, the next edit at the last change is
        asked for (0: only when the editor asks)."""
        if (timer := self._timers.pop(uri, None)) is not None:
            timer.cancel()
        if pause_s > 0:
            self._timers[uri] = asyncio.get_running_loop().call_later(pause_s, self._pause_over, uri)

    def _pause_over(self, uri: str) -> None:
        self._timers.pop(uri, None)
        history, file = self.histories.get(uri), self.app.files.get(uri)
        if history is None or file is None or history.text != file.text or not (edits := history.edits()):
            return
        last = edits[-1]
        task = asyncio.ensure_future(self.suggest(uri, file.text.count("\n", 0, last.start + len(last.new))))
        self._started.add(task)
        task.add_done_callback(self._pause_done)

    def _pause_done(self, task: asyncio.Task[NextEditOutcome]) -> None:
        self._started.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("next edit after a pause failed: %s", type(error).__name__)

    def closed(self, uri: str) -> None:
        """`uri` was closed: its history, answers, timer and request go."""
        self.histories.closed(uri)
        self._known.pop(uri, None)
        if (timer := self._timers.pop(uri, None)) is not None:
            timer.cancel()
        if (running := self._running.pop(uri, None)) is not None:
            running[1].cancel()

    def stop(self) -> None:
        """Shutdown: every timer and request is stopped."""
        for timer in self._timers.values():
            timer.cancel()
        for _key, task in self._running.values():
            task.cancel()
        for task in self._started:
            task.cancel()
        self._timers.clear()

    async def _suggest(self, uri: str, line: int, settings: Any, context_files: tuple[tuple[str, str], ...] = (),
                       history: DocumentHistory | None = None) -> NextEditOutcome:
        file = self.app.files.get(uri)
        if file is None:
            raise RequestError(f"{uri} is not open: the editor must send didOpen first")
        history = history or self.histories.get(uri)
        outcome = NextEditOutcome(True, version=file.version, fingerprint=file.fingerprint, route=route_for(settings.model))
        if history is None or history.text != file.text:
            outcome.silence = "no recent edit"
            return outcome
        edits = history.edits()
        async with self.app.queue.foreground(REQUEST):
            profile = await resolve_profile(self.app, PROFILE, settings)
            route = outcome.route or "chat"
            path = self.app.workspace.file_id(uri)
            found = parts(route, path, file.text, line, edits, history.original, context_files)
            system = profile.system if route == "chat" else ""
            texts = list(dict.fromkeys([*found.files, *found.edits, found.frame, *([system] if system else [])]))
            counts = dict(zip(texts, await profile.counter.count_texts(texts), strict=True))
            limits = budget.Window(profile.window, settings.max_output_tokens, profile.counter.name, profile.counter.exact)
            prompt = next_edit_prompt(route, found, context_files, counts.__getitem__, limits, system)
            outcome.budget = prompt.plan.report() if prompt.plan is not None else None
            if prompt.text is None:
                outcome.silence = prompt.silence
                return outcome
            started = time.perf_counter()
            cache_key = hashlib.sha256("\0".join((route, settings.model or "", system, prompt.text)).encode()).hexdigest()
            if (kept := self._answers.get(cache_key)) is not None:
                self._answers.move_to_end(cache_key)
                answer, finished = kept
            else:
                try:
                    answer, finished = await self._asking(uri, profile, route, prompt.text)
                except ProviderError as error:
                    log.info("next edit failed uri=%s route=%s error=%s", logs.name(uri), route, error.kind)
                    outcome.silence, outcome.failed = str(error), True
                    return outcome
                self._answers[cache_key] = (answer, finished)
                while len(self._answers) > ANSWERS_KEPT:
                    self._answers.popitem(last=False)
        if answer is None:  # no whole fenced block (chat), no editable region (Zeta): prose, or cut off
            outcome.silence = "not a rewrite" if finished else "cut off"
            return outcome
        if junk.echoes_instructions(answer, instructions_of(route, system), allowed=file.text):
            outcome.silence = "instructions"  # the model's answer repeats its own instructions
            log.info("next edit uri=%s route=%s edits=0 silence=instructions", logs.name(uri), route)
            return outcome
        decision = decide(file.text, prompt.current, answer, edits[-1] if edits else None, finished)
        now = self.app.files.get(uri)
        if now is None or now.text != file.text:
            outcome.silence = "the document changed meanwhile"
        else:
            outcome.edits, outcome.silence = decision.edits, decision.silence
        log.info("next edit uri=%s route=%s edits=%d silence=%s ms=%.0f", logs.name(uri), route, len(outcome.edits),
                 outcome.silence or "-", (time.perf_counter() - started) * 1000)
        return outcome

    async def _asking(self, uri: str, profile: Profile, route: Route, text: str) -> tuple[str | None, bool]:
        """The model's answer, asked once no inline completion runs (counted while in flight)."""
        await self.app.queue.after_completions()  # never ahead of an inline completion
        self.asking[uri] = self.asking.get(uri, 0) + 1
        self.most_asking = max(self.most_asking, self.asking[uri])
        self.model_calls += 1
        try:
            return await self._ask(profile, route, text)
        finally:
            self.asking[uri] -= 1
            if not self.asking[uri]:
                del self.asking[uri]

    async def _ask(self, profile: Profile, route: Route, text: str) -> tuple[str | None, bool]:
        """The model's rewrite of the window, and whether it ended by itself."""
        s = profile.settings
        if route == "sweep":
            reply = await profile.provider.fill(FimRequest("raw_fim", text, "", s.max_output_tokens, s.temperature,
                                                           s.model, formats.SWEEP_STOP))
            return reply.text, reply.finish_reason != "length"
        if route == "zeta":
            reply = await profile.provider.fill(FimRequest("raw_fim", text, "", s.max_output_tokens, s.temperature,
                                                           s.model, (formats.REGION_END,)))
            return formats.zeta_rewrite(reply.text), reply.finish_reason != "length"
        chat = await profile.provider.complete(profile.request([ChatMessage("system", profile.system),
                                                                ChatMessage("user", text)]))
        return fenced_code(chat.content), chat.finish_reason != "length"
