"""Threads and memories in one SQLite file, through aiosqlite: WAL journal, foreign keys, versioned schema
migrations (`PRAGMA user_version`), every write in one transaction so a process killed mid-write
leaves the file consistent. Any SQLite failure becomes `StoreUnavailable` with a message that
names the file and what to do.

A thread's messages are read whole for every chat and edit-ops request, so the last few threads
read are kept in memory (`Timelines`), and so are the canonical threads and the memories last
read: this store's own appends extend what is kept, its other writes drop it, and a commit by
any other connection to the file (`PRAGMA data_version`) has it read again. The version is asked
once per read, or once for a whole request inside `reading()`: a request's reads then cost one
trip to the connection's thread, not one each."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiosqlite

from margin.adapters import private_files, sqlite_schema
from margin.adapters.sqlite_schema import explain
from margin.core import memories
from margin.core.memories import Memory
from margin.core.threads import Message, NewMessage, StoreContents, StoreUnavailable, Thread

log = logging.getLogger(__name__)

TIMELINES_KEPT = 4
"""Threads whose messages are kept in memory, the most recently read."""


_PINNED: contextvars.ContextVar[tuple[SQLiteThreadStore, int] | None] = contextvars.ContextVar("pinned", default=None)
"""the store and the data_version its innermost `reading()` block asked, in this task"""


class Timelines:
    """The messages of the threads read last, each with the file's `data_version` when it was
    read (it changes when another connection commits)."""

    def __init__(self, kept: int = TIMELINES_KEPT) -> None:
        self._kept = kept
        self._threads: dict[str, tuple[int, list[Message]]] = {}

    def get(self, thread_id: str, version: int) -> list[Message] | None:
        found = self._threads.pop(thread_id, None)
        if found is None or found[0] != version:
            return None
        self._threads[thread_id] = found  # the most recently read last
        return found[1]

    def keep(self, thread_id: str, version: int, messages: list[Message]) -> None:
        self._threads.pop(thread_id, None)
        self._threads[thread_id] = (version, messages)
        while len(self._threads) > self._kept:
            del self._threads[next(iter(self._threads))]

    def pop(self, thread_id: str) -> tuple[int, list[Message]] | None:
        return self._threads.pop(thread_id, None)

    def clear(self) -> None:
        self._threads.clear()


class SQLiteThreadStore:
    """ThreadStore on one SQLite file. The connection opens lazily on first use."""

    def __init__(self, path: Path, *, own_folder: bool = False) -> None:
        self.path = path
        self.own_folder = own_folder  # Margin's data folder: kept 0700 (adapters.private_files)
        self._db: aiosqlite.Connection | None = None
        self._writing = asyncio.Lock()
        self._opening = asyncio.Lock()
        """first uses at once open one connection (each would start a thread that outlives it)"""
        self._timelines = Timelines()
        self._canonical: dict[tuple[str, str], tuple[int, Thread]] = {}
        """the newest thread of (workspace, context), with the data_version it was read at"""
        self._memories: dict[str, tuple[int, list[Memory]]] = {}
        """a workspace's memories (`list_memories`), with the data_version they were read at"""
        self._unsettled = False
        """a write transaction ended by an exception (see `_statement`)"""

    async def open(self) -> None:
        async with self._opening:
            if self._db is None:
                await self._open()

    async def _open(self) -> None:
        db = None
        try:
            private_files.folder(self.path.parent, own=self.own_folder)
            private_files.sqlite_file(self.path)
            db = await aiosqlite.connect(self.path, isolation_level=None)
            mode = await sqlite_schema.prepare(db)
        except (sqlite3.Error, OSError) as error:
            if db is not None:
                await db.close()
            raise StoreUnavailable(explain(self.path, error)) from None
        self._db = db
        log.info("thread store open journal=%s", mode)

    async def close(self) -> None:
        self._forget()  # data_version is the connection's
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            await self.open()
        assert self._db is not None
        return self._db

    async def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        db = await self._conn()
        try:
            return list(await db.execute_fetchall(sql, args))  # one trip to the connection's thread
        except sqlite3.Error as error:
            raise StoreUnavailable(explain(self.path, error)) from None

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """Reads that ask the file's `data_version` once between them: what was kept is used if
        no other connection has committed when the block starts (a commit during the block is
        seen by the next one). The version is the task's (a request's), so a block never uses
        one asked before it began; blocks may nest, and the outermost one asks."""
        pinned = _PINNED.get()
        if pinned is not None and pinned[0] is self:
            yield
            return
        token = _PINNED.set((self, await self._ask_version()))
        try:
            yield
        finally:
            _PINNED.reset(token)

    async def _ask_version(self) -> int:
        return int((await self._read("PRAGMA data_version"))[0][0])

    async def _version(self) -> int:
        return pinned[1] if (pinned := _PINNED.get()) and pinned[0] is self else await self._ask_version()

    def _keeping(self) -> bool:
        """What is read now may be kept: no transaction of this connection is open (a turn half
        written, or a cancelled writer's rows until the next write rolls them back)."""
        return self._db is not None and not self._db.in_transaction

    def _forget(self) -> None:
        """Drop everything kept: this connection wrote (data_version does not change for its own
        commits), or a write of it failed."""
        self._timelines.clear()
        self._canonical.clear()
        self._memories.clear()

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction: all of it lands, or none of it. Transactions take turns (one
        connection: a turn stored while a background summary is stored must wait, not nest).
        What is kept is dropped when it ends, landed or not: a read that came between the
        caller's start and the BEGIN may have kept what it changes (its own commit does not
        change data_version)."""
        db = await self._conn()
        async with self._writing:
            try:
                async with self._begun(db) as begun:
                    yield begun
            finally:
                self._forget()

    @contextlib.asynccontextmanager
    async def _begun(self, db: aiosqlite.Connection) -> AsyncIterator[aiosqlite.Connection]:
        try:
            await self._settle(db)
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                await db.execute("COMMIT")
            except BaseException:
                self._unsettled = True  # cancelled, its BEGIN may still be queued (`_statement`)
                if db.in_transaction:  # SQLite itself rolls back on SQLITE_FULL, IOERR, NOMEM
                    await db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise StoreUnavailable(explain(self.path, error)) from None

    async def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        async with self._transaction() as db:
            for sql, args in statements:
                await db.execute(sql, args)

    @staticmethod
    def _thread(row: Sequence[Any]) -> Thread:
        return Thread(id=row[0], workspace=row[1], context=row[2], title=row[3],
                      created_at=row[4], updated_at=row[5])

    _THREAD_COLUMNS = "id, workspace, context, title, created_at, updated_at"

    async def new_thread(self, workspace: str, context: str, title: str | None = None) -> Thread:
        now = time.time()
        thread = Thread(uuid.uuid4().hex, workspace, context, now, now, title)
        await self._write([(
            f"INSERT INTO threads ({self._THREAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (thread.id, workspace, context, title, now, now),
        )])
        return thread

    _CANONICAL = (f"SELECT {_THREAD_COLUMNS} FROM threads WHERE workspace = ? AND context = ? "
                  "ORDER BY created_at DESC, id DESC LIMIT 1")

    async def canonical_thread(self, workspace: str, context: str) -> Thread:
        """The newest thread of the workspace; the first one is made where no other writer can make
        one at the same time (two first requests at once, here or in another server, share it)."""
        version = await self._version()
        kept = self._canonical.get((workspace, context))
        if kept is not None and kept[0] == version:
            return kept[1]
        rows = await self._read(self._CANONICAL, (workspace, context))
        if rows:
            thread = self._thread(rows[0])
            if self._keeping():
                self._canonical[workspace, context] = (version, thread)
            return thread
        async with self._transaction() as db:
            rows = list(await db.execute_fetchall(self._CANONICAL, (workspace, context)))
            if rows:
                return self._thread(rows[0])
            now = time.time()
            thread = Thread(uuid.uuid4().hex, workspace, context, now, now)
            await db.execute(f"INSERT INTO threads ({self._THREAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                             (thread.id, workspace, context, None, now, now))
        return thread

    async def get_thread(self, thread_id: str) -> Thread | None:
        rows = await self._read(f"SELECT {self._THREAD_COLUMNS} FROM threads WHERE id = ?", (thread_id,))
        return self._thread(rows[0]) if rows else None

    async def list_threads(self, workspace: str | None = None) -> list[Thread]:
        where, args = ("WHERE workspace = ?", (workspace,)) if workspace is not None else ("", ())
        rows = await self._read(
            f"SELECT {self._THREAD_COLUMNS} FROM threads {where} ORDER BY updated_at DESC, created_at DESC",
            args)
        return [self._thread(row) for row in rows]

    async def delete_thread(self, thread_id: str) -> bool:
        existed = await self.get_thread(thread_id) is not None
        await self._write([("DELETE FROM threads WHERE id = ?", (thread_id,))])
        return existed

    async def messages(self, thread_id: str, *, include_hidden: bool = True) -> list[Message]:
        found = await self._timeline(thread_id)
        return list(found) if include_hidden else [m for m in found if not m.hidden]

    async def _timeline(self, thread_id: str) -> list[Message]:
        """Every message of the thread, oldest first: kept from the last read while no other
        connection has committed since. A read is kept only if no transaction is open when it
        ends (a turn half written, or a cancelled writer's rows until the next write rolls them
        back: this connection reads them). A write takes what is kept of its thread once its
        transaction has begun, and keeps it again with its messages added."""
        version = await self._version()
        found = self._timelines.get(thread_id, version)
        if found is not None:
            return found
        rows = await self._read(
            "SELECT id, role, content, created_at, hidden, kind, uri, fingerprint, meta, tokens "
            "FROM messages WHERE thread_id = ? ORDER BY id", (thread_id,))
        found = [self._message(thread_id, *row) for row in rows]
        if self._keeping():
            self._timelines.keep(thread_id, version, found)
        return found

    @staticmethod
    def _message(thread_id: str, id_: int, role: Any, content: str, created_at: float, hidden: int, kind: str | None,
                 uri: str | None, fingerprint: str | None, meta: str, tokens: str) -> Message:
        return Message(role=role, content=content, hidden=bool(hidden), kind=kind, uri=uri, fingerprint=fingerprint,
                       meta=json.loads(meta), tokens=json.loads(tokens), id=id_, thread_id=thread_id,
                       created_at=created_at)

    _INSERT = ("INSERT INTO messages (thread_id, role, content, created_at, hidden, kind, uri, fingerprint, meta, "
               "tokens) VALUES ")

    async def append(self, thread_id: str, messages: Sequence[NewMessage]) -> list[Message]:
        """The messages in one INSERT, with their counts, and the thread's time set by the
        schema's trigger: one statement, atomic by itself, and one trip to the connection's
        thread (what a turn stored costs). A thread that is gone is a KeyError (its foreign
        key), and nothing is written."""
        now = time.time()
        rows = [(thread_id, m.role, m.content, now, int(m.hidden), m.kind, m.uri, m.fingerprint,
                 json.dumps(dict(m.meta)), json.dumps(dict(m.tokens))) for m in messages]
        # One statement's rows take rising ids in the order given; RETURNING may list them in
        # any order, so they are sorted. No messages: the thread's time alone.
        sql, args = (self._INSERT + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(rows)) + " RETURNING id",
                     [value for row in rows for value in row]) if rows else \
            ("UPDATE threads SET updated_at = ? WHERE id = ? RETURNING NULL", [now, thread_id])
        async with self._writing:
            timeline = self._timelines.pop(thread_id)
            try:
                returned = await self._statement(sql, args)
            except sqlite3.IntegrityError as error:
                if "FOREIGN KEY" in str(error):
                    raise KeyError(thread_id) from None
                raise StoreUnavailable(explain(self.path, error)) from None
            if not returned:
                raise KeyError(thread_id)
            ids = sorted(row[0] for row in returned) if rows else []
            if timeline is not None:  # as a read after the commit would find it
                self._timelines.keep(thread_id, timeline[0], [
                    *timeline[1], *(self._message(thread_id, message_id, *row[1:])
                                    for message_id, row in zip(ids, rows, strict=True))])
            self._touched(thread_id, now)
        return [Message.stored(m, id=message_id, thread_id=thread_id, created_at=now)
                for message_id, m in zip(ids, messages, strict=True)]

    def _touched(self, thread_id: str, now: float) -> None:
        """A canonical thread kept with the time the schema's trigger gave it on an append (the
        order of `list_threads` and the purge of inactive threads read it)."""
        for key, (version, thread) in list(self._canonical.items()):
            if thread.id == thread_id:
                self._canonical[key] = (version, replace(thread, updated_at=now))

    async def _settle(self, db: aiosqlite.Connection) -> None:
        """Before a write: a writer cancelled mid-transaction (a summary giving way to the user)
        may have left its transaction open, or its BEGIN still queued. Once what it queued has
        run (a trip waits for it), that transaction is rolled back."""
        if self._unsettled or db.in_transaction:
            await db.execute("SELECT 1")
            if db.in_transaction:
                await db.execute("ROLLBACK")
            self._unsettled = False

    async def _statement(self, sql: str, args: Sequence[Any]) -> list[sqlite3.Row]:
        """One writing statement outside a transaction (SQLite makes it one), taken in turn with
        the other writes (`_writing`, held by the caller)."""
        db = await self._conn()
        try:
            await self._settle(db)
            return list(await db.execute_fetchall(sql, args))
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as error:
            raise StoreUnavailable(explain(self.path, error)) from None

    async def delete_messages(self, message_ids: Sequence[int]) -> None:
        if message_ids:
            marks = ",".join("?" * len(message_ids))
            await self._write([(f"DELETE FROM messages WHERE id IN ({marks})", tuple(message_ids))])

    async def purge_inactive(self, older_than: float) -> int:
        stale = await self._read("SELECT id FROM threads WHERE updated_at < ?", (older_than,))
        if stale:
            await self._write([("DELETE FROM threads WHERE updated_at < ?", (older_than,))])
        return len(stale)

    _MEMORY_COLUMNS = "id, text, scope, workspace, created_at"

    async def export(self) -> StoreContents:
        threads = [self._thread(row) for row in await self._read(f"SELECT {self._THREAD_COLUMNS} FROM threads")]
        rows = await self._read(f"SELECT {self._MEMORY_COLUMNS} FROM memories ORDER BY id")
        return StoreContents(threads, {t.id: await self.messages(t.id) for t in threads},
                             [Memory(str(row[0]), row[1], row[2], row[3], row[4]) for row in rows])

    async def add_memory(self, text: str, scope: str, workspace: str) -> Memory:
        text, valid_scope, workspace = memories.checked(text, scope, workspace)
        now = time.time()
        async with self._transaction() as db:
            cursor = await db.execute(
                "INSERT INTO memories (text, scope, workspace, created_at) VALUES (?, ?, ?, ?)",
                (text, valid_scope, workspace, now))
            memory_id = cursor.lastrowid or 0
        return Memory(str(memory_id), text, valid_scope, workspace, now)

    async def remove_memory(self, memory_id: str) -> bool:
        if not (memory_id.isascii() and memory_id.isdigit() and len(memory_id) <= 18):
            return False  # not an id this store gives (nor one SQLite could hold)
        async with self._transaction() as db:
            cursor = await db.execute("DELETE FROM memories WHERE id = ?", (int(memory_id),))
            return cursor.rowcount > 0

    async def list_memories(self, workspace: str) -> list[Memory]:
        version = await self._version()
        kept = self._memories.get(workspace)
        if kept is not None and kept[0] == version:
            return list(kept[1])
        rows = await self._read(
            f"SELECT {self._MEMORY_COLUMNS} FROM memories WHERE scope = 'global' OR workspace = ? "
            "ORDER BY created_at DESC, id DESC", (workspace,))
        found = [Memory(str(row[0]), row[1], row[2], row[3], row[4]) for row in rows]
        if self._keeping():
            self._memories[workspace] = (version, found)
        return list(found)
