"""Chat: one turn of a conversation, from the user's message to the stored reply.

The thread is the one named, or the canonical thread of the file's workspace folder. One chat
or edit-ops request runs per thread at a time; a second gets `Busy` at once. The prompt is
assembled within the budget (core.assemble); if it cannot fit, nothing is sent and nothing is
stored. The reply streams to `on_delta`. Only when it has arrived whole are the user's message,
the newly sent file contexts and the reply stored, in one transaction; a failure, a timeout or
a cancellation leaves the thread exactly as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol, Sequence, TypeVar
from urllib.parse import unquote, urlsplit

from margin.core.assemble import ChatAssembly, ChatInput, FileRef, assemble_chat, envelope
from margin.core.budget import Plan, SystemPromptTooLarge
from margin.core.llm import ChatMessage, ChatRequest, ContextTooLarge, ProviderError, Usage
from margin.core.prompts import TemplateError
from margin.core.threads import NewMessage, Thread, ThreadStore
from margin.core.tokens.counter import LocalCounter, TokenCounter
from margin.core.vfs import Position, Range
from margin.services.app import MarginApp

log = logging.getLogger(__name__)

CONTEXT = "chat"


class ChatError(Exception):
    """A request that cannot be served; the message is for a person."""

    kind = "failed"


class Busy(ChatError):
    kind = "busy"


class NotFound(ChatError):
    kind = "not_found"


@dataclass(frozen=True)
class ChatParams:
    message: str
    text_document: str | None = None
    selection: Range | None = None
    position: Position | None = None
    files: Sequence[str] | None = None
    thread_id: str | None = None


@dataclass
class ChatOutcome:
    thread_id: str
    reply: str
    usage: Usage
    budget: dict[str, Any]
    over_budget: str | None = None
    upstream_error: str | None = None


@dataclass
class Prepared:
    thread: Thread
    assembly: ChatAssembly
    counter: TokenCounter
    tokenizer: str
    newest: str
    display: str
    counted: int = 0
    """the final prompt counted whole by the tokenizer (0 when nothing is sent)"""
    files: Sequence[FileRef] = ()
    """the files the prompt could include (snapshots, at the moment it was assembled)"""

    def seen_files(self) -> list[FileRef]:
        """The files whose content is in the prompt: retained or sent anew."""
        shown = set(self.assembly.retained) | set(self.assembly.resent)
        return [ref for ref in self.files if ref.file.uri in shown]

    def budget(self) -> dict[str, Any]:
        """The budget report, with `counted`: the exact count of the prompt as sent."""
        return {**self.assembly.plan.report(), "counted": self.counted}


class Assembled(Protocol):
    messages: list[ChatMessage]
    plan: Plan


A = TypeVar("A", bound=Assembled)


async def fit_prompt(assemble: Callable[[int], A], counter: TokenCounter, window: int) -> tuple[A, int]:
    """Assemble for the window, count the prompt whole, and if framing the estimate could not
    see makes it larger than the limit, assemble again with that much less room (a few rounds
    at most). The report keeps the real window and limit."""
    room = window
    for _ in range(4):
        assembly = assemble(room)
        if room == window:
            limit = assembly.plan.limit
        counted = await counter.count_chat(assembly.messages) if assembly.messages else 0
        if counted <= limit:
            break
        # The plan must hold `counted - limit` fewer tokens than it does now.
        room -= (assembly.plan.limit - assembly.plan.total) + (counted - limit)
    assembly.plan.context_window, assembly.plan.limit = window, limit
    return assembly, counted


class ThreadGuard:
    """One chat or edit-ops request per thread at a time."""

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def acquire(self, thread_id: str) -> None:
        if thread_id in self._busy:
            raise Busy("Margin is still answering the previous message in this thread. Wait for "
                       "it, or cancel it, then send again.")
        self._busy.add(thread_id)

    def release(self, thread_id: str) -> None:
        self._busy.discard(thread_id)


@dataclass
class ChatService:
    app: MarginApp
    workspace_folders: Callable[[], Sequence[str]] = lambda: ()
    guard: ThreadGuard = field(default_factory=ThreadGuard)

    # --- where things belong -------------------------------------------------------------

    def workspace_of(self, uri: str | None) -> str:
        """The workspace folder holding `uri` (the deepest one), else the first folder, else ''."""
        folders = sorted(self.workspace_folders(), key=len, reverse=True)
        for folder in folders:
            if uri and (uri == folder or uri.startswith(folder.rstrip("/") + "/")):
                return folder
        return folders[-1] if folders else ""

    def file_id(self, uri: str) -> str:
        folder = self.workspace_of(uri)
        if folder and uri.startswith(folder.rstrip("/") + "/"):
            return unquote(uri[len(folder.rstrip("/")) + 1 :])
        return uri

    def candidate_files(self, params: ChatParams) -> list[FileRef]:
        """Active file first, then the most recently edited, then the others (the files named
        in the request, or every open file)."""
        files = self.app.files
        order: list[str] = []
        if params.text_document and params.text_document in files:
            order.append(params.text_document)
        others = list(params.files) if params.files is not None else [f.uri for f in files.files()]
        wanted = set(others)
        order += [f.uri for f in files.recently_edited() if f.uri in wanted]
        order += [uri for uri in others if uri in files]
        refs, seen = [], set()
        for uri in order:
            if uri not in seen and (file := files.get(uri)) is not None:
                seen.add(uri)
                refs.append(FileRef(file, self.file_id(uri)))
        return refs

    def newest_text(self, params: ChatParams) -> str:
        """The user's message, with the selected code when there is a selection."""
        if not (params.text_document and params.selection):
            return params.message
        file = self.app.files.get(params.text_document)
        if file is None:
            return params.message
        encoding = self.app.files.encoding
        start = file.offset_at(params.selection.start, encoding)
        end = file.offset_at(params.selection.end, encoding)
        if end <= start:
            return params.message
        first, last = params.selection.start.line + 1, params.selection.end.line + 1
        return (f"{params.message}\n\nSelected in {self.file_id(file.uri)}, lines {first}-{last}:\n"
                f"```{file.language_id}\n{file.text[start:end]}\n```")

    async def thread_for(self, store: ThreadStore, params: ChatParams) -> Thread:
        if params.thread_id:
            thread = await store.get_thread(params.thread_id)
            if thread is None:
                raise NotFound(f"There is no thread {params.thread_id} (deleted, or expired after "
                               f"{self.app.settings.current.globals.thread_ttl_days} days).")
            return thread
        return await store.canonical_thread(self.workspace_of(params.text_document), CONTEXT)

    # --- the turn --------------------------------------------------------------------------

    async def prepare(self, params: ChatParams, profile_name: str = "chat") -> Prepared:
        """Everything up to the model call: thread, counts, the assembled prompt."""
        settings = self.app.settings.current
        profile = settings.profile(profile_name)
        try:
            template = self.app.templates.load(profile.template)
        except TemplateError as error:
            raise ChatError(str(error)) from None
        window, counter = await self.app.window_and_counter(profile_name)
        tokenizer = counter.name

        thread = await self.app.threads.run(lambda store: self.thread_for(store, params))
        history = await self.app.threads.run(lambda store: self.app.file_contexts(store).timeline(thread.id))
        files = self.candidate_files(params)
        newest = self.newest_text(params)
        system = "\n\n".join(f.text for f in template.required)
        optional = [(f.name, f.text) for f in template.optional]
        known = {m.content: m.tokens[tokenizer] for m in history if tokenizer in m.tokens}
        texts = [system, newest, *(t for _, t in optional), *(envelope(f) for f in files),
                 *(m.content for m in history)]
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        try:
            counts = await counter.count_texts(missing)
        except ProviderError as error:
            raise ChatError(f"Could not count tokens with {tokenizer}: {error}") from None
        known.update(zip(missing, counts))
        framing = await counter.count_chat([]) if isinstance(counter, LocalCounter) else 0

        chat = ChatInput(system, optional, history, newest, files)
        try:
            assembly, counted = await fit_prompt(
                lambda room: assemble_chat(chat, known.__getitem__, context_window=room,
                                           reserved_output=profile.max_output_tokens, tokenizer=counter.name,
                                           exact=counter.exact, framing_tokens=framing),
                counter, window)
        except SystemPromptTooLarge as error:
            raise ChatError(str(error)) from None
        except ProviderError as error:
            raise ChatError(f"Could not count tokens with {tokenizer}: {error}") from None
        return Prepared(thread, assembly, counter, tokenizer, newest, params.message, counted, files)

    async def chat(self, params: ChatParams, on_delta: Callable[[str], Awaitable[None] | None] = lambda t: None,
                   profile_name: str = "chat") -> ChatOutcome:
        profile = self.app.settings.current.profile(profile_name)
        if not profile.enabled:
            raise ChatError(f"The {profile_name} profile is disabled (set {profile_name}.enabled to true).")
        async with self.turn(params, profile_name) as prepared:
            return await self._run(prepared, profile_name, on_delta)

    @contextlib.asynccontextmanager
    async def turn(self, params: ChatParams, profile_name: str) -> AsyncIterator[Prepared]:
        """A prepared prompt, with its thread held against other chat and edit-ops requests
        until the block ends. The thread is known only once it is looked up: its name (or its
        workspace's canonical slot) is held from the start, the thread as soon as it is known."""
        held = [params.thread_id or f"canonical:{self.workspace_of(params.text_document)}"]
        self.guard.acquire(held[0])
        try:
            prepared = await self.prepare(params, profile_name)
            if prepared.thread.id not in held:
                self.guard.acquire(prepared.thread.id)
                held.append(prepared.thread.id)
            yield prepared
        finally:
            for key in held:
                self.guard.release(key)

    async def _run(self, prepared: Prepared, profile_name: str,
                   on_delta: Callable[[str], Awaitable[None] | None]) -> ChatOutcome:
        assembly, thread = prepared.assembly, prepared.thread
        budget = prepared.budget()
        if assembly.over_budget:
            message = (f"{assembly.over_budget} Shorten your message or selection, or use a model "
                       "with a larger context window.")
            return ChatOutcome(thread.id, "", Usage(), budget, over_budget=message)
        profile = self.app.settings.current.profile(profile_name)
        provider = self.app.backends.provider(profile_name, profile)
        request = ChatRequest(assembly.messages, profile.max_output_tokens, profile.temperature, profile.model)
        started = time.perf_counter()
        parts: list[str] = []
        usage = Usage()
        finish = None
        try:
            async for delta in provider.stream(request):
                if delta.text:
                    parts.append(delta.text)
                    result = on_delta(delta.text)
                    if asyncio.iscoroutine(result):
                        await result
                finish = delta.finish_reason or finish
                usage = delta.usage or usage
        except ContextTooLarge as error:
            log.warning("chat refused upstream as too large thread=%s prompt_tokens=%s n_ctx=%s",
                        thread.id, error.prompt_tokens, error.context_window)
            return ChatOutcome(thread.id, "", Usage(), budget, upstream_error=str(error))
        except ProviderError as error:
            log.warning("chat failed thread=%s error=%s", thread.id, error.kind)
            raise ChatError(str(error)) from None
        reply = "".join(parts)
        await self.store_turn(prepared, reply)
        log.info("chat done thread=%s sent_tokens=%d prompt_tokens=%s chars_out=%d finish=%s ms=%.0f",
                 thread.id, assembly.plan.total, usage.prompt_tokens, len(reply), finish,
                 (time.perf_counter() - started) * 1000)
        return ChatOutcome(thread.id, reply, usage, budget)

    async def store_turn(self, prepared: Prepared, reply: str, reply_meta: dict[str, Any] | None = None) -> None:
        """Store the user's message, the newly sent file contexts and the reply, together."""
        assembly, tokenizer = prepared.assembly, prepared.tokenizer
        counts = await prepared.counter.count_texts([prepared.newest, reply])
        turn = [
            NewMessage("user", prepared.newest, meta={"display": prepared.display},
                       tokens={tokenizer: counts[0]}),
            NewMessage("assistant", reply, meta=reply_meta or {}, tokens={tokenizer: counts[1]}),
        ]
        thread_id = prepared.thread.id
        await self.app.threads.run(lambda store: self.app.file_contexts(store).save_turn(
            thread_id, assembly.new_contexts, turn, assembly.superseded))
