"""Chat: one turn of a conversation, from the user's message to the stored reply.

The thread is the one named, or the canonical thread of the file's workspace folder. One chat
or edit-ops request runs per thread at a time; a second gets `Busy` at once. The prompt is
assembled within the budget (core.assemble); if it cannot fit, nothing is sent and nothing is
stored. The reply streams to `on_delta`. Only when it has arrived whole are the user's message,
the newly sent file contexts and the reply stored, in one transaction; a failure, a timeout or
a cancellation leaves the thread exactly as it was.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from margin.core import pointers
from margin.core.assemble import ChatInput, FileRef, assemble_chat, counted, shown_history, texts_to_count
from margin.core.budget import BudgetReport, SystemPromptTooLarge, Window
from margin.core.llm import BackendHTTPError, ContextTooLarge, ProviderError, Usage, joined
from margin.core.settings import ProfileSettings
from margin.core.threads import NewMessage
from margin.core.tokens.counter import TokenCounter, fewest_tokens
from margin.services.app import MarginApp
from margin.services.background import REQUEST
from margin.services.chat_tools import Recalls, ToolsRefused, answer_calls, refuses_tools, stream_round
from margin.services.errors import RequestError
from margin.services.gather import Job, gather
from margin.services.instructions import InstructionFiles
from margin.services.memories import MemoriesService
from margin.services.profile import Profile, resolve_profile, snapshot
from margin.services.retrieval import Retrieval
from margin.services.structured import fit_prompt, framing_tokens
from margin.services.summaries import Summaries
from margin.services.threads import DISPLAY, ThreadsService
from margin.services.turn import Ask, Prepared, ThreadGuard

log = logging.getLogger(__name__)

PROFILE = "chat"

OnDelta = Callable[[str], Awaitable[None] | None]


@dataclass
class ChatOutcome:
    thread_id: str
    reply: str
    usage: Usage
    budget: BudgetReport
    over_budget: str | None = None
    upstream_error: str | None = None
    recalls: list[dict[str, Any]] = field(default_factory=list)
    """the recall tool's calls in this turn: pointer, status, tokens"""

    @property
    def not_sent(self) -> str | None:
        """Why there is no reply (over budget, or refused upstream as too large), or None."""
        return self.over_budget or self.upstream_error


@dataclass
class ChatService:
    app: MarginApp
    threads: ThreadsService
    guard: ThreadGuard = field(default_factory=ThreadGuard)
    masking: bool = True
    """old content shown as pointers (False: whole, or dropped with its turn)"""
    render_pointer: Callable[[int, str], str] = pointers.pointer
    summaries: Summaries | None = None
    """made in the background after a turn that needs one (None: never)"""
    recall_tool: bool = True
    """chat offers the `recall` tool when a pointer is shown and the backend takes tools"""
    instructions: InstructionFiles | None = None
    """the project's instruction files (None: none are shown)"""
    memories: MemoriesService | None = None
    """the facts the user pinned (None: none are shown)"""
    retrieval: Retrieval | None = None
    """snippets of workspace files relevant to the message (None: none are sent)"""

    # --- what the prompt holds -------------------------------------------------------------

    def candidate_files(self, ask: Ask) -> list[FileRef]:
        """Active file first, then the most recently edited, then the others (the files named
        in the request, or every open file)."""
        files, active = self.app.files, ask.where.text_document
        order: list[str] = []
        if active and active in files:
            order.append(active)
        others = list(ask.files) if ask.files is not None else [f.uri for f in files.files()]
        wanted = set(others)
        order += [f.uri for f in files.recently_edited() if f.uri in wanted]
        order += [uri for uri in others if uri in files]
        refs, seen = [], set()
        for uri in order:
            if uri not in seen and (file := files.get(uri)) is not None:
                seen.add(uri)
                refs.append(FileRef(file, self.app.workspace.file_id(uri)))
        return refs

    def newest_text(self, ask: Ask) -> str:
        """The user's message, with the selected code when there is a selection."""
        where = ask.where
        if not (where.text_document and where.selection):
            return ask.message
        file = self.app.files.get(where.text_document)
        if file is None:
            return ask.message
        encoding = self.app.files.encoding
        start = file.offset_at(where.selection.start, encoding)
        end = file.offset_at(where.selection.end, encoding)
        if end <= start:
            return ask.message
        first, last = where.selection.start.line + 1, where.selection.end.line + 1
        return (f"{ask.message}\n\nSelected in {self.app.workspace.file_id(file.uri)}, lines {first}-{last}:\n"
                f"```{file.language_id}\n{file.text[start:end]}\n```")

    # --- the turn --------------------------------------------------------------------------

    async def explain(self, ask: Ask, profile_name: str = PROFILE) -> Prepared:
        """What would be sent with `profile_name`, without calling a model."""
        return await self.prepare(ask, await resolve_profile(self.app, profile_name), tools=True)

    async def prepare(self, ask: Ask, profile: Profile, *, tools: bool = False) -> Prepared:
        """Everything up to the model call: thread, counts, the assembled prompt. `tools`: the
        request may offer the `recall` tool, where the backend takes tools (chat, to call it;
        edit-ops, not to: a thread's prompts then start the same, tools included)."""
        tokenizer = profile.counter.name  # before: a server found not to count renames its counter
        try:
            return await self._prepare(ask, profile, tools)
        except SystemPromptTooLarge as error:
            raise RequestError(str(error)) from None
        except ProviderError as error:  # only the tokenizer is asked anything before the model call
            raise RequestError(f"Could not count tokens with {tokenizer}: {error}") from None

    async def _prepare(self, ask: Ask, profile: Profile, tools: bool) -> Prepared:
        counter = profile.counter
        tokenizer = counter.name
        newest = self.newest_text(ask)
        async with self.threads.reading():  # one look for other writers, not one a read
            thread = await self.threads.thread_for(ask.where)
            if thread.context == "agent":
                raise RequestError(f"Thread {thread.id} is an agent thread: continue it with the agent "
                                   "(margin/agent), or chat in another thread.")
            history = tuple(await self.threads.timeline(thread.id))  # a tuple: its turns are numbered once
            job = Job(self, ask, profile, history, self.candidate_files(ask), newest, tools)
            chat = ChatInput(history, await gather(job))
        shown = shown_history(chat)  # not the turns folded into the summary: no prompt shows them
        known = {m.content: m.tokens[tokenizer] for m in shown if tokenizer in m.tokens}
        await self._count(texts_to_count(chat, shown), known, counter, profile.window)
        chat = counted(chat, known.__getitem__)  # e.g. the pointers the thread may show
        await self._count(texts_to_count(chat, ()), known, counter, profile.window)  # the sources' new texts
        framing = await framing_tokens(counter)
        assembly, counted_tokens = await fit_prompt(
            lambda room: assemble_chat(chat, known.__getitem__,
                                       Window(room, profile.max_output_tokens, tokenizer, counter.exact, framing)),
            counter, profile.window)
        if (fewest := fewest_tokens(newest)) > profile.window:  # it was never counted (_count)
            what = "your message and selection are" if newest != ask.message else "your message is"
            assembly.plan.over_budget = (
                f"Too large to send: {what} {len(newest):,} characters, at least {fewest:,} tokens with any "
                f"tokenizer, and the {profile.name} profile's context window is {profile.window:,} tokens.")
        return Prepared(profile, thread, assembly, job.newest, ask.message, counted_tokens, job.files, history, ask)

    @staticmethod
    async def _count(texts: Sequence[str], known: dict[str, int], counter: TokenCounter, window: int) -> None:
        """Count the texts not yet known, in one batch. A text that cannot fit the window with
        any tokenizer (a 20 MB file) is not counted: it is taken at that lower bound, and dropped."""
        for text in texts:
            if text not in known and (fewest := fewest_tokens(text)) > window:
                known[text] = fewest
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            known.update(zip(missing, await counter.count_texts(missing)))

    async def chat(self, ask: Ask, on_delta: OnDelta = lambda text: None) -> ChatOutcome:
        settings = snapshot(self.app, PROFILE)
        if not settings.enabled:
            raise RequestError(f"The {PROFILE} profile is disabled (set {PROFILE}.enabled to true).")
        async with self.turn(ask, PROFILE, settings, tools=True) as prepared:
            try:
                return await self._run(prepared, on_delta)
            except ToolsRefused:  # remembered: prepared again without the tool, and sent once more
                prepared = await self.prepare(ask, await resolve_profile(self.app, PROFILE, settings), tools=True)
                return await self._run(prepared, on_delta)

    @contextlib.asynccontextmanager
    async def turn(self, ask: Ask, profile_name: str, settings: ProfileSettings,
                   tools: bool = False) -> AsyncIterator[Prepared]:
        """A prepared prompt, with its thread held against other chat and edit-ops requests
        until the block ends. The thread is known only once it is looked up: its name (or its
        workspace's canonical slot) is held from the start, the thread as soon as it is known."""
        where = ask.where
        held = [where.thread_id or f"canonical:{self.app.workspace.folder_of(where.text_document)}"]
        self.guard.acquire(held[0])
        try:
            async with self.app.queue.foreground(REQUEST):  # before summaries and indexing
                prepared = await self.prepare(ask, await resolve_profile(self.app, profile_name, settings), tools=tools)
                if prepared.thread.id not in held:
                    self.guard.acquire(prepared.thread.id)
                    held.append(prepared.thread.id)
                yield prepared
        finally:
            for key in held:
                self.guard.release(key)

    async def _run(self, prepared: Prepared, on_delta: OnDelta) -> ChatOutcome:
        assembly, thread, profile = prepared.assembly, prepared.thread, prepared.profile
        budget = prepared.budget()
        if assembly.over_budget:
            message = (f"{assembly.over_budget} Shorten your message or selection, or use a model "
                       "with a larger context window.")
            return ChatOutcome(thread.id, "", Usage(), budget, over_budget=message)
        started = time.perf_counter()
        messages, tools, counted = list(assembly.messages), assembly.tools, prepared.counted
        recalls, parts = Recalls(), []
        usage, finish, closing, completion = Usage(), None, not tools, 0
        try:
            while True:  # one request, and one more after each answered round of recall calls
                done = await stream_round(profile, messages, tools, closing or recalls.full, on_delta)
                parts.append(done.text)
                usage, finish = done.usage, done.finish or finish
                completion += done.usage.completion_tokens or 0
                if not done.calls or closing or recalls.full:
                    break
                answered = await answer_calls(done.calls, done.text, messages, prepared.history,
                                              self.threads.open_fingerprint, profile.counter, tools,
                                              assembly.plan.limit, recalls)
                if answered is None:
                    closing = True  # not even short answers fit: the model answers with what it has
                else:
                    messages, counted = answered
        except ContextTooLarge as error:
            log.warning("chat refused upstream as too large thread=%s prompt_tokens=%s n_ctx=%s",
                        thread.id, error.prompt_tokens, error.context_window)
            return ChatOutcome(thread.id, "", Usage(), budget, upstream_error=str(error))
        except BackendHTTPError as error:
            if tools and not recalls.answers and not "".join(parts) and refuses_tools(error):
                log.info("chat tools refused thread=%s status=%d", thread.id, error.status)
                self.app.backends.refused_tools(profile.settings)
                raise ToolsRefused() from None
            log.warning("chat failed thread=%s error=%s", thread.id, error.kind)
            raise RequestError(str(error)) from None
        except ProviderError as error:
            log.warning("chat failed thread=%s error=%s", thread.id, error.kind)
            raise RequestError(str(error)) from None
        reply = joined(parts)  # pieces may split a surrogate pair
        usage = Usage(usage.prompt_tokens, completion or usage.completion_tokens)
        made = recalls.made()
        await self.store_turn(prepared, reply, {"recalls": made} if made else None)
        log.info("chat done thread=%s sent_tokens=%d prompt_tokens=%s chars_out=%d finish=%s recalls=%d ms=%.0f",
                 thread.id, assembly.plan.total, usage.prompt_tokens, len(reply), finish, len(made),
                 (time.perf_counter() - started) * 1000)
        return ChatOutcome(thread.id, reply, usage, recalls.report(budget, counted), recalls=made)

    async def store_turn(self, prepared: Prepared, reply: str, reply_meta: dict[str, Any] | None = None) -> None:
        """Store the user's message, the newly sent file contexts and the reply, together."""
        assembly, counter = prepared.assembly, prepared.profile.counter
        counts = await counter.count_texts([prepared.newest, reply])
        turn = [
            NewMessage("user", prepared.newest, meta={DISPLAY: prepared.display},
                       tokens={counter.name: counts[0]}),
            NewMessage("assistant", reply, meta=reply_meta or {}, tokens={counter.name: counts[1]}),
        ]
        await self.threads.save_turn(prepared.thread.id, assembly.new_contexts, turn)
        if self.summaries is not None:
            self.summaries.after_turn(prepared)
