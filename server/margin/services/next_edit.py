"""Next-edit suggestions (SPEC M): from a document's recent edits, the edit the user will make
next in the window around the cursor — or silence.

The `nextEdit` profile (off until turned on) names the model. Its route follows the model: one
made for next edits by Sweep (a name with "sweep" in it) gets Sweep's own prompt as a raw
completion (`/completions`, greedy, stopped at `<|file_sep|>`); any other model gets the chat
route — the same parts in words under the `next_edit_v1` template, answering with the window
rewritten in a fenced block. The prompt is counted with the profile's tokenizer and cut by the
budget (core.next_edit.prompt); the answer is made into the smallest edits or silence
(core.next_edit.decide); and nothing is suggested for a document that changed while the model
answered. The edits are offsets into the text the model saw, named by its version and
fingerprint.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Literal

from margin import logs
from margin.core import budget
from margin.core.budget import BudgetReport
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
Route = Literal["sweep", "chat"]


def route_for(model: str | None) -> Route:
    """Sweep's own format for Sweep's next-edit models; the chat route for every other model."""
    return "sweep" if "sweep" in (model or "").lower() else "chat"


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


class NextEditService:
    def __init__(self, app: MarginApp, histories: EditHistories) -> None:
        self.app = app
        self.histories = histories

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
        history = history or self.histories.get(uri)
        outcome = NextEditOutcome(True, version=file.version, fingerprint=file.fingerprint, route=route_for(settings.model))
        if history is None or history.text != file.text:
            outcome.silence = "no recent edit"
            return outcome
        edits = history.edits()
        async with self.app.queue.foreground(REQUEST):  # after inline completion, always
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
            try:
                answer, finished = await self._ask(profile, route, prompt.text)
            except ProviderError as error:
                log.info("next edit failed uri=%s route=%s error=%s", logs.name(uri), route, error.kind)
                outcome.silence = str(error)
                return outcome
        if answer is None:  # a chat answer with no whole fenced block: prose, or cut off
            outcome.silence = "not a rewrite" if finished else "cut off"
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

    async def _ask(self, profile: Profile, route: Route, text: str) -> tuple[str | None, bool]:
        """The model's rewrite of the window, and whether it ended by itself."""
        s = profile.settings
        if route == "sweep":
            reply = await profile.provider.fill(FimRequest("raw_fim", text, "", s.max_output_tokens, s.temperature,
                                                           s.model, formats.SWEEP_STOP))
            return reply.text, reply.finish_reason != "length"
        chat = await profile.provider.complete(profile.request([ChatMessage("system", profile.system),
                                                                ChatMessage("user", text)]))
        return fenced_code(chat.content), chat.finish_reason != "length"
