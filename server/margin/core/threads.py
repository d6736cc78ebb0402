"""Conversation threads: what is stored, and the store's interface.

A thread belongs to a workspace folder and a context (`chat`); the newest thread of a
(workspace, context) pair is its canonical thread, which chat and edit-ops share unless a
request names another. Messages carry role, content, metadata and token counts by tokenizer.
Hidden messages (a file's content as the model was shown it) are part of the prompt but never
of the history a person sees.

The store also keeps the user's memories (`core.memories`), beside the threads.

`MemoryThreadStore` keeps threads and memories in memory: the store chat falls back to when the
database cannot be used, so chat goes on working without persistence.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from margin.core import memories
from margin.core.file_block import from_envelope
from margin.core.growing import Growing
from margin.core.llm import Role
from margin.core.memories import Memory

FILE_CONTEXT = "virtual_file_context"
SUMMARY = "thread_summary"
"""the kind of a stored summary's message (core.summary)"""


@dataclass(frozen=True)
class Thread:
    id: str
    workspace: str
    context: str
    created_at: float
    updated_at: float
    title: str | None = None


@dataclass(frozen=True)
class NewMessage:
    role: Role
    content: str
    hidden: bool = False
    kind: str | None = None
    uri: str | None = None
    fingerprint: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    tokens: Mapping[str, int] = field(default_factory=dict)
    """token counts by tokenizer name, stored so the thread is never re-tokenized"""


@dataclass(frozen=True)
class Message(NewMessage):
    id: int = 0
    thread_id: str = ""
    created_at: float = 0.0

    @classmethod
    def stored(cls, new: NewMessage, *, id: int, thread_id: str, created_at: float) -> Message:
        """`new` as it is once stored (with its own copies of meta and token counts)."""
        return cls(**{**new.__dict__, "meta": dict(new.meta), "tokens": dict(new.tokens)},
                   id=id, thread_id=thread_id, created_at=created_at)


@dataclass(frozen=True)
class StoreContents:
    """Everything a store holds: what the memory store takes over when the database fails."""

    threads: list[Thread]
    messages: dict[str, list[Message]]
    memories: list[Memory]


class StoreUnavailable(RuntimeError):
    """The store cannot be used (locked, read-only, corrupt, unreadable). The message says
    which file and why, for a person."""


class ThreadStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def reading(self) -> AbstractAsyncContextManager[None]:
        """A block of reads that may share one look for other writers to the same store (a
        request's thread, timeline and memories): what they find is at least as new as the
        store was when the block began."""

    async def canonical_thread(self, workspace: str, context: str) -> Thread:
        """The newest thread of (workspace, context), created if there is none."""

    async def new_thread(self, workspace: str, context: str, title: str | None = None) -> Thread: ...

    async def get_thread(self, thread_id: str) -> Thread | None: ...

    async def list_threads(self, workspace: str | None = None) -> list[Thread]:
        """Newest activity first."""

    async def delete_thread(self, thread_id: str) -> bool: ...

    async def messages(self, thread_id: str, *, include_hidden: bool = True) -> list[Message]:
        """In the order they were added."""

    async def append(self, thread_id: str, messages: Sequence[NewMessage]) -> list[Message]:
        """Adds all of `messages` or none of them."""

    async def delete_messages(self, message_ids: Sequence[int]) -> None: ...

    async def purge_inactive(self, older_than: float) -> int:
        """Removes threads with no activity since `older_than` (a time.time() value); returns
        how many."""

    async def add_memory(self, text: str, scope: str, workspace: str) -> Memory:
        """Stores a memory that follows `memories.checked` (else InvalidMemory, nothing stored)."""

    async def remove_memory(self, memory_id: str) -> bool:
        """False when there is no such memory."""

    async def list_memories(self, workspace: str) -> list[Memory]:
        """The memories of `workspace` and the global ones, newest first."""

    async def export(self) -> StoreContents:
        """Every thread with its messages, and every memory."""


class MemoryThreadStore:
    """A ThreadStore in memory."""

    def __init__(self) -> None:
        self._threads: dict[str, Thread] = {}
        self._messages: dict[str, list[Message]] = {}
        self._ids = itertools.count(1)
        self._memories: dict[str, Memory] = {}
        self._memory_ids = itertools.count(1)

    @classmethod
    def holding(cls, contents: StoreContents) -> MemoryThreadStore:
        """A memory store that starts with `contents` (ids kept; new ones follow them)."""
        store = cls()
        store._threads = {t.id: t for t in contents.threads}
        store._messages = {t.id: list(contents.messages.get(t.id, [])) for t in contents.threads}
        store._memories = {m.id: m for m in contents.memories}
        store._ids = itertools.count(1 + max((m.id for found in store._messages.values() for m in found), default=0))
        store._memory_ids = itertools.count(1 + max((int(m) for m in store._memories), default=0))
        return store

    async def export(self) -> StoreContents:
        return StoreContents(list(self._threads.values()), {k: list(v) for k, v in self._messages.items()},
                             list(self._memories.values()))

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        yield  # no other writer

    async def canonical_thread(self, workspace: str, context: str) -> Thread:
        mine = [t for t in self._threads.values() if (t.workspace, t.context) == (workspace, context)]
        if mine:
            return max(mine, key=lambda t: (t.created_at, t.id))
        return await self.new_thread(workspace, context)

    async def new_thread(self, workspace: str, context: str, title: str | None = None) -> Thread:
        now = time.time()
        thread = Thread(uuid.uuid4().hex, workspace, context, now, now, title)
        self._threads[thread.id] = thread
        self._messages[thread.id] = []
        return thread

    async def get_thread(self, thread_id: str) -> Thread | None:
        return self._threads.get(thread_id)

    async def list_threads(self, workspace: str | None = None) -> list[Thread]:
        threads = [t for t in self._threads.values() if workspace is None or t.workspace == workspace]
        return sorted(threads, key=lambda t: (t.updated_at, t.created_at), reverse=True)

    async def delete_thread(self, thread_id: str) -> bool:
        self._messages.pop(thread_id, None)
        return self._threads.pop(thread_id, None) is not None

    async def messages(self, thread_id: str, *, include_hidden: bool = True) -> list[Message]:
        found = self._messages.get(thread_id, [])
        return [m for m in found if include_hidden or not m.hidden]

    async def append(self, thread_id: str, messages: Sequence[NewMessage]) -> list[Message]:
        if thread_id not in self._threads:
            raise KeyError(thread_id)
        now = time.time()
        added = [Message.stored(m, id=next(self._ids), thread_id=thread_id, created_at=now)
                 for m in messages]
        self._messages[thread_id].extend(added)
        self._threads[thread_id] = replace(self._threads[thread_id], updated_at=now)
        return added

    async def delete_messages(self, message_ids: Sequence[int]) -> None:
        doomed = set(message_ids)
        for thread_id, found in self._messages.items():
            self._messages[thread_id] = [m for m in found if m.id not in doomed]

    async def purge_inactive(self, older_than: float) -> int:
        stale = [t.id for t in self._threads.values() if t.updated_at < older_than]
        for thread_id in stale:
            await self.delete_thread(thread_id)
        return len(stale)

    async def add_memory(self, text: str, scope: str, workspace: str) -> Memory:
        text, valid_scope, workspace = memories.checked(text, scope, workspace)
        memory = Memory(str(next(self._memory_ids)), text, valid_scope, workspace, time.time())
        self._memories[memory.id] = memory
        return memory

    async def remove_memory(self, memory_id: str) -> bool:
        return self._memories.pop(memory_id, None) is not None

    async def list_memories(self, workspace: str) -> list[Memory]:
        return memories.newest_first(m for m in self._memories.values() if m.applies_in(workspace))


class FileContextRepository(Protocol):
    """Where file contexts live. The chat service reads the thread's timeline with contexts in
    place and stores a turn through this interface only, so contexts could move to a separate
    blob store (deduplicated by fingerprint) without touching assembly or chat."""

    async def timeline(self, thread_id: str) -> Sequence[Message]:
        """The thread's messages, oldest first, with file contexts where they were sent."""

    async def save_turn(self, thread_id: str, contexts: Sequence[NewMessage],
                        turn: Sequence[NewMessage]) -> list[Message]:
        """Store new contexts and the turn together (older contexts stay, for pointers)."""


def current_form(message: Message) -> Message:
    """A stored file context as it is shown now: one stored as seed 000's JSON envelope (by an
    earlier release) is rendered as a file block. Storage is not rewritten; the stored count
    belongs to the old text, so the new one is counted afresh."""
    if message.kind != FILE_CONTEXT or (rendered := from_envelope(message.content)) is None:
        return message
    return replace(message, content=rendered, tokens={})


_current_forms: Growing[Message, tuple[Message, ...]] = Growing(
    (), lambda done, new: (*done, *(current_form(m) if m.kind == FILE_CONTEXT else m for m in new)))
"""A timeline in its current form: only the messages a request has not seen before are looked at."""


class MessageFileContexts:
    """File contexts as hidden messages of the thread (the seed's Option A)."""

    def __init__(self, store: ThreadStore) -> None:
        self.store = store

    async def timeline(self, thread_id: str) -> Sequence[Message]:
        return _current_forms(await self.store.messages(thread_id, include_hidden=True))

    async def save_turn(self, thread_id: str, contexts: Sequence[NewMessage],
                        turn: Sequence[NewMessage]) -> list[Message]:
        return await self.store.append(thread_id, [*contexts, *turn])
