"""Thread summaries, made in the background after a turn (core.summary): never on the request
path. After a chat or edit-ops turn is stored, if the thread's history took more than
FOLD_TRIGGER of the room it had (or lost turns), the chat profile's model folds the oldest turns
into the summary, with the `summary_v1` template, and the summary is stored in the thread. The
next prompts show it in place of those turns. One summary is made per thread at a time; a
failure leaves the thread as it was (the next turn tries again) and is logged, never shown.

The user comes first (services.background): a summary starts only after an idle pause, and a
completion, chat or edit-ops request that starts while it is being written stops it (its
streamed HTTP call is closed, so a local server stops generating and frees its slot, context and
cores for the request); it is made again after the next idle pause. A local model serving one
window to every request could otherwise refuse the user's prompt as too large, or make it wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from margin.core import pointers
from margin.core.assemble import PER_MESSAGE_OVERHEAD, current_turn
from margin.core.llm import ChatMessage, ChatRequest, ProviderError, joined
from margin.core.summary import FOLD_TRIGGER, Fold, Summary, latest_summary, plan_fold, request_text, summary_tokens
from margin.core.threads import FILE_CONTEXT, Message
from margin.services.app import MarginApp
from margin.services.profile import Profile, resolve_profile

if TYPE_CHECKING:
    from margin.services.threads import ThreadsService
    from margin.services.turn import Prepared

log = logging.getLogger(__name__)

TEMPLATE = "summary_v1"
PROFILE = "chat"
OVERSIZE = 2
"""A summary counted over this many times its bound is refused: the model was asked for at most
the bound (max_tokens), so its backend ignored the limit (an inexact count may exceed the bound
a little; never twice)."""


@dataclass
class Summaries:
    app: MarginApp
    threads: ThreadsService
    enabled: bool = True
    _running: dict[str, asyncio.Task[Summary | None]] = field(default_factory=dict)

    def after_turn(self, prepared: Prepared) -> None:
        """Start a summary of the thread if the turn's prompt shows it is due."""
        plan = prepared.assembly.plan
        if not self.enabled or plan.over_budget:
            return
        history = plan.section("history")
        others = sum(s.tokens for s in plan.sections if s.name not in ("history", "summary", "pointers"))
        room = plan.limit - others - plan.section("pointers").tokens
        lost = bool(history.dropped_items)
        thread_id = prepared.thread.id
        if (lost or history.tokens > FOLD_TRIGGER * room) and thread_id not in self._running:
            task = self.app.run_in_background(self.app.queue.in_turn(lambda: self.summarise(thread_id, room)),
                                              f"summary {thread_id}")
            self._running[thread_id] = task
            task.add_done_callback(lambda _: self._running.pop(thread_id, None))

    async def summarise(self, thread_id: str, room: int) -> Summary | None:
        """Fold what is due into the thread's summary and store it; the new summary, or None."""
        started = time.perf_counter()
        try:
            profile = await resolve_profile(self.app, PROFILE)
            template = self.app.templates.load(TEMPLATE)
        except Exception as error:  # noqa: BLE001 - a template or backend that cannot be used: try after the next turn
            log.info("summary skipped thread=%s error=%s", thread_id, type(error).__name__)
            return None
        history = await self.threads.timeline(thread_id)
        counter = profile.counter
        shown = pointers.show(history, await self._counts(profile, history))
        line = pointers.first_mask_line(current_turn(history))
        texts = _as_shown(shown, line)
        sizes = dict(zip(map(id, shown), await counter.count_texts(texts)))
        previous = latest_summary(history)
        fold = plan_fold(shown, previous, room, lambda entry: sizes[id(entry)] + PER_MESSAGE_OVERHEAD)
        if fold is None:
            return None
        bound = summary_tokens(profile.window)
        system = "\n\n".join(f.text for f in template.required)
        fold = await self._fitting(fold, profile, system, line, bound)
        if fold is None:
            return None
        messages = [ChatMessage("system", system), ChatMessage("user", request_text(fold, line, bound))]
        s = profile.settings
        parts = []
        try:  # streamed: if a request stops it, the server sees the connection close and stops too
            async for delta in profile.provider.stream(ChatRequest(messages, bound, s.temperature, s.model)):
                parts.append(delta.text)
        except ProviderError as error:
            log.info("summary failed thread=%s error=%s", thread_id, error.kind)
            return None
        text = joined(parts).strip()
        if not text:
            log.info("summary empty thread=%s", thread_id)
            return None
        first = previous.first_turn if previous else fold.turns[0][0]
        summary = Summary(text, first, fold.to_turn, fold.upto_id)
        tokens = (await counter.count_texts([summary.shown()]))[0]
        if tokens > OVERSIZE * bound:  # a backend that ignored max_tokens: not the bounded summary asked for
            log.info("summary too long thread=%s tokens=%d bound=%d", thread_id, tokens, bound)
            return None
        await self.app.storage.run(lambda store: store.append(thread_id, [summary.stored({counter.name: tokens})]))
        log.info("summary stored thread=%s turns=%d-%d tokens=%d ms=%.0f", thread_id, first, fold.to_turn, tokens,
                 (time.perf_counter() - started) * 1000)
        return summary

    async def _counts(self, profile: Profile, history: Sequence[Message]) -> Callable[[str], int]:
        known = {m.content: m.tokens[profile.counter.name] for m in history if profile.counter.name in m.tokens}
        missing = list(dict.fromkeys(m.content for m in history if m.content not in known))
        known.update(zip(missing, await profile.counter.count_texts(missing)))
        return known.__getitem__

    async def _fitting(self, fold: Fold, profile: Profile, system: str, line: int, bound: int) -> Fold | None:
        """The fold, with its newest turns left out until its request fits the window."""
        limit = profile.window - bound - 64
        while fold.turns:
            counted = await profile.counter.count_chat([ChatMessage("system", system),
                                                        ChatMessage("user", request_text(fold, line, bound))])
            if counted <= limit:
                return fold
            fold = Fold(fold.previous, fold.turns[:-1])
        return None


def _as_shown(shown: Sequence[pointers.Shown], line: int) -> list[str]:
    """Each message as the prompt shows it now: a file's newest snapshot whole and its older
    ones as pointers; other messages masked up to `line`."""
    newest = {entry.message.uri: entry for entry in shown if entry.message.kind == FILE_CONTEXT}
    texts = []
    for entry in shown:
        if entry.message.kind == FILE_CONTEXT:
            part = entry.parts[0]
            texts.append(part.text if newest[entry.message.uri] is entry else part.pointer or "")
        else:
            texts.append("\n\n".join(entry.view(line)[0]))
    return texts
