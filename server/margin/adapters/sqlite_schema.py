"""The thread database's schema and how a connection is made ready for it: busy timeout,
foreign keys, the WAL journal (synced at checkpoints), the migrations the file lacks
(`PRAGMA user_version`), and a quick check. What SQLite says when it fails is put into words a
person can act on (`explain`)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import aiosqlite

log = logging.getLogger("margin.adapters.sqlite_store")  # one logger for the store

MIGRATIONS: list[str] = [
    # 1: threads, messages, token counts
    """
    CREATE TABLE threads (
        id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        context TEXT NOT NULL,
        title TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX threads_by_workspace ON threads (workspace, context, created_at);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at REAL NOT NULL,
        hidden INTEGER NOT NULL DEFAULT 0,
        kind TEXT,
        uri TEXT,
        fingerprint TEXT,
        meta TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX messages_by_thread ON messages (thread_id, id);
    CREATE TABLE token_counts (
        message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        tokenizer TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        PRIMARY KEY (message_id, tokenizer)
    );
    """,
    # 2: memories (AUTOINCREMENT: a forgotten memory's id is never given to another)
    """
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        text TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('workspace', 'global')),
        workspace TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX memories_by_workspace ON memories (workspace, created_at);
    """,
    # 3: a message's counts in its own row, and its thread's time kept by SQLite: a turn is
    # stored by one INSERT, one trip to the connection's thread (the request path's cost)
    """
    ALTER TABLE messages ADD COLUMN tokens TEXT NOT NULL DEFAULT '{}';
    UPDATE messages SET tokens = (
        SELECT json_group_object(token_counts.tokenizer, token_counts.tokens)
        FROM token_counts WHERE token_counts.message_id = messages.id)
    WHERE id IN (SELECT message_id FROM token_counts);
    DROP TABLE token_counts;
    CREATE TRIGGER messages_touch_thread AFTER INSERT ON messages BEGIN
        UPDATE threads SET updated_at = NEW.created_at WHERE id = NEW.thread_id;
    END;
    """,
]

BUSY_TIMEOUT_MS = 2000


async def prepare(db: aiosqlite.Connection) -> str:
    """The connection made ready for the store; its journal mode."""
    await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    await db.execute("PRAGMA foreign_keys = ON")
    mode = await _wal(db)
    if mode == "wal":
        # A commit is synced at checkpoints, not each time: a killed process loses nothing and
        # the file stays consistent whatever happens; a power cut may lose the last turns.
        await db.execute("PRAGMA synchronous = NORMAL")
    await _migrate(db)
    # Read to its end: a statement not run to its end holds a read snapshot, and the
    # connection's first write would then fail on any other connection's commit since.
    found = [row[0] for row in await db.execute_fetchall("PRAGMA quick_check")]
    if found != ["ok"]:
        raise sqlite3.DatabaseError(f"database disk image is malformed: {'; '.join(map(str, found[:3]))}")
    return mode


async def _wal(db: aiosqlite.Connection) -> str:
    """The WAL journal, asked for until it is granted: of connections opening one file at
    once (two servers starting), SQLite may refuse the change as locked to all but one,
    without waiting the busy timeout as it does for other locks."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            rows = await db.execute_fetchall("PRAGMA journal_mode = WAL")
            return str(next(iter(rows), ("?",))[0])
        except sqlite3.OperationalError as error:
            if error.sqlite_errorname != "SQLITE_BUSY" or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


async def _migrate(db: aiosqlite.Connection) -> None:
    """Each migration the file lacks, one transaction each. The version is read again once
    the write lock is held: two servers starting on one new file (two editor windows) would
    otherwise both create its tables, and the second fail."""
    while (version := await _schema_version(db)) < len(MIGRATIONS):
        await db.execute("BEGIN IMMEDIATE")
        try:
            if (version := await _schema_version(db)) < len(MIGRATIONS):
                for statement in statements(MIGRATIONS[version]):
                    await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {version + 1}")
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        if version < len(MIGRATIONS):
            log.info("thread store migrated to schema %d", version + 1)


def statements(script: str) -> list[str]:
    """The script's statements, one by one: split at each `;` that ends one (not those inside a
    trigger's body or a string)."""
    found, pending = [], ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        raise ValueError(f"an incomplete statement at the end of a migration: {pending.strip()[:60]}")
    return [statement for statement in found if statement != ";"]


async def _schema_version(db: aiosqlite.Connection) -> int:
    ((version,),) = await db.execute_fetchall("PRAGMA user_version")
    if version > len(MIGRATIONS):
        raise sqlite3.DatabaseError(
            f"the file's schema is version {version}, newer than this Margin knows "
            f"({len(MIGRATIONS)}); upgrade Margin")
    return int(version)


def explain(path: Path, error: Exception) -> str:
    text = str(error).lower()
    if "locked" in text or "busy" in text:
        why = "it is locked by another process"
        fix = "close the other program using it, or set a different database path"
    elif "readonly" in text or "read-only" in text or "permission" in text or "unable to open" in text:
        why = "it cannot be written"
        fix = "check the file's and its folder's permissions, or set a different database path"
    elif "full" in text:
        why = "the disk it is on is full (or the file has reached its size limit)"
        fix = "free some space on that disk, or set a different database path"
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        why = "it is not a valid SQLite database (damaged?)"
        fix = "move the file aside (Margin will start a new one), or set a different database path"
    else:
        why = f"{type(error).__name__}: {error}"
        fix = "set a different database path"
    return f"Margin cannot use its thread database {path}: {why}. To fix: {fix}."
