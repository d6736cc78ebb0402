"""Thread use cases: which thread a request belongs to, its history as a person sees it, and
listing, creating and deleting threads. The language server and the terminal call these and
never reach into the store."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from margin.core import pointers
from margin.core.agent import steps as agent_steps
from margin.core.pointers import Recalled
from margin.core.threads import FILE_CONTEXT, Message, NewMessage, Thread
from margin.core.where import NOWHERE, Where
from margin.services.app import MarginApp
from margin.services.errors import NotFound, RequestError

CHAT = "chat"
"""The context of chat and edit-ops threads."""


@dataclass(frozen=True)
class HistoryEntry:
    """A message as the user sees it: what they typed, not the prompt it became."""

    id: int
    role: str
    content: str
    created_at: float


@dataclass(frozen=True)
class History:
    thread: Thread
    messages: list[HistoryEntry]


@dataclass(frozen=True)
class ThreadList:
    threads: list[Thread]
    """newest activity first"""
    persistent: bool
    """False when the database could not be used and threads live only in memory"""
    problem: str | None = None
    """why they are not being saved"""


DISPLAY = "display"
"""A user message's metadata key for what the user typed (the content may hold more, such as
the selected code)."""


@dataclass(frozen=True)
class RecallOutcome:
    thread: Thread
    recalled: Recalled
    file_id: str | None
    changed_since: bool | None
    """for a file: whether it has changed since (the open file's text, else its newest snapshot
    in the thread, differs from the one pointed to)"""


class ThreadsService:
    def __init__(self, app: MarginApp) -> None:
        self.app = app

    async def thread_for(self, where: Where) -> Thread:
        """The thread named in `where`, else the canonical thread of its document's workspace."""
        storage = self.app.storage
        if where.thread_id:
            thread_id = where.thread_id
            thread = await storage.run(lambda store: store.get_thread(thread_id))
            if thread is None:
                raise NotFound(f"There is no thread {thread_id} (deleted, or expired after "
                               f"{self.app.settings.current.globals.thread_ttl_days} days).")
            return thread
        workspace = self.app.workspace.folder_of(where.text_document)
        return await storage.run(lambda store: store.canonical_thread(workspace, CHAT))

    async def history(self, where: Where = NOWHERE) -> History:
        """The thread's messages a person sees (never the hidden ones), oldest first."""
        thread = await self.thread_for(where)
        messages = await self.app.storage.run(lambda store: store.messages(thread.id, include_hidden=False))
        return History(thread, [HistoryEntry(m.id, m.role, m.meta.get(DISPLAY, m.content), m.created_at)
                                for m in messages])

    async def recall(self, where: Where, pointer: str) -> RecallOutcome:
        """What a pointer of the thread's prompts stood for, exactly as it was shown."""
        if pointers.parse_pointer(pointer) is None:
            raise RequestError(f"'{pointer[:80]}' is not a pointer: it looks like [t42 parser.py] (a turn, then a "
                               "file name, `ops` or `reply`).")
        thread = await self.thread_for(where)
        timeline = await self.timeline(thread.id)
        if thread.context == "agent":  # an agent step's result: [t3 read a.py] names step 3's
            return self._agent_result(thread, timeline, pointer)
        found = pointers.resolve(timeline, pointer)
        if found is None:
            raise NotFound(f"Nothing in this thread is {pointer.strip()}: check the turn number and the name.")
        file_id = found.message.meta.get("file_id") if found.message.kind == FILE_CONTEXT else None
        return RecallOutcome(thread, found, file_id, pointers.changed_since(found, timeline, self.open_fingerprint))

    @staticmethod
    def _agent_result(thread: Thread, timeline: Sequence[Message], pointer: str) -> RecallOutcome:
        wanted = " ".join(pointer.strip().strip("[]").split())
        for message in timeline:
            meta = message.meta.get(agent_steps.AGENT)
            if message.kind == agent_steps.RESULT and isinstance(meta, dict) \
                    and str(meta.get("pointer", "")).strip("[]") == wanted:
                return RecallOutcome(thread, Recalled(str(meta["pointer"]), message, message.content, None, None), None, None)
        raise NotFound(f"Nothing in this thread is {pointer.strip()}: check the step number and the name.")

    def open_fingerprint(self, uri: str) -> str | None:
        """The open file's fingerprint, None when it is not open."""
        found = self.app.files.get(uri)
        return found.fingerprint if found is not None else None

    async def list_threads(self, workspace: str | None = None) -> ThreadList:
        """The threads of `workspace` (every workspace's when None)."""
        storage = self.app.storage
        found = await storage.run(lambda store: store.list_threads(workspace))
        return ThreadList(found, storage.persistent, storage.problem)

    async def new(self, where: Where = NOWHERE, title: str | None = None) -> Thread:
        """A new thread for the workspace of `where`'s document: its canonical thread from now on."""
        workspace = self.app.workspace.folder_of(where.text_document)
        return await self.app.storage.run(lambda store: store.new_thread(workspace, CHAT, title))

    async def delete(self, thread_id: str) -> bool:
        return await self.app.storage.run(lambda store: store.delete_thread(thread_id))

    # --- for the chat use cases ------------------------------------------------------------

    def reading(self) -> contextlib.AbstractAsyncContextManager[None]:
        """A request's reads (its thread, timeline and memories) with one look for other writers
        to the database between them."""
        return self.app.storage.reading()

    async def timeline(self, thread_id: str) -> Sequence[Message]:
        """The thread as prompts are assembled from it: hidden file contexts included."""
        return await self.app.storage.run(lambda store: self.app.file_contexts(store).timeline(thread_id))

    async def save_turn(self, thread_id: str, contexts: Sequence[NewMessage], turn: Sequence[NewMessage]) -> None:
        """The newly sent file contexts and the turn, stored together. Superseded contexts stay:
        prompts show them as pointers, and they can be recalled."""
        try:
            await self.app.storage.run(lambda store: self.app.file_contexts(store).save_turn(thread_id, contexts, turn))
        except KeyError:  # deleted meanwhile (margin/deleteThread, or another database set)
            raise RequestError("The thread was deleted while Margin was answering, so this turn was not "
                               "stored. Send the message again to continue in a new thread.") from None
