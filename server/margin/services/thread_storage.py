"""The thread store in use (the thread use cases are in `services.threads`, the memory ones in
`services.memories`). Threads and memories live in SQLite; if the database cannot be used
(locked, read-only, corrupt, full), Margin says so once and keeps them in memory for the rest of
the session, so chat goes on working without persistence; a database that fails mid-session
hands over what it holds, so the session keeps its threads and memories."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import platformdirs

from margin.core.threads import MemoryThreadStore, StoreContents, StoreUnavailable, ThreadStore

log = logging.getLogger(__name__)
T = TypeVar("T")

DAY_S = 86_400


def default_database_path() -> Path:
    return Path(platformdirs.user_data_dir("margin")) / "threads.db"


class ThreadStorage:
    def __init__(
        self,
        make_store: Callable[[Path], ThreadStore],
        path: Path,
        *,
        ttl_days: int,
        tell_user: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.path = path
        self._make_store = make_store
        self._ttl_days = ttl_days
        self._tell_user = tell_user
        self._store: ThreadStore | None = None
        self._opening = asyncio.Lock()
        """one opening at a time: requests that come together at start-up all wait for it (two
        openings of one new file would both migrate it, and the second fail)"""
        self.problem: str | None = None
        """why threads are not being saved, or None"""

    @property
    def persistent(self) -> bool:
        return self.problem is None

    async def _open(self) -> ThreadStore:
        if self._store is not None:
            return self._store
        async with self._opening:
            if self._store is not None:
                return self._store
            return await self._open_now()

    async def _open_now(self) -> ThreadStore:
        store = self._make_store(self.path)
        try:
            await store.open()
            purged = await store.purge_inactive(time.time() - self._ttl_days * DAY_S)
            log.info("thread store ready purged=%d ttl_days=%d", purged, self._ttl_days)
        except StoreUnavailable as error:
            return self._fall_back(error)
        self._store = store
        return store

    def _fall_back(self, error: StoreUnavailable, contents: StoreContents | None = None) -> ThreadStore:
        self.problem = str(error)
        log.warning("thread store unavailable; keeping threads in memory for this session")
        self._tell_user(f"{error} Chat still works, but threads and memories are kept only until Margin stops.")
        self._store = MemoryThreadStore.holding(contents) if contents else MemoryThreadStore()
        return self._store

    @staticmethod
    async def _contents(store: ThreadStore) -> StoreContents | None:
        """What the failing database still lets us read (it stays as it was: the failed write
        was rolled back), so the session goes on with the threads and memories it had."""
        try:
            contents = await store.export()
        except StoreUnavailable:
            contents = None
        log.info("thread store taken over in memory threads=%d", len(contents.threads) if contents else 0)
        return contents

    async def run(self, operation: Callable[[ThreadStore], Awaitable[T]]) -> T:
        """`operation` on the store in use; if the database fails, once more on memory."""
        store = await self._open()
        try:
            return await operation(store)
        except StoreUnavailable as error:
            if isinstance(store, MemoryThreadStore):
                raise
            contents = await self._contents(store)
            await store.close()
            return await operation(self._fall_back(error, contents))

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """`ThreadStore.reading` on the store in use. A store that fails as the block begins is
        not read in it: the reads inside find the failure themselves, and `run` hands over."""
        store = await self._open()
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(store.reading())
            except StoreUnavailable:
                pass
            yield

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
