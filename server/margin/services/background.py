"""One order for everything Margin does, so that work nobody is waiting for never slows what
somebody is: a keystroke's completion first, then a request the user is waiting for (chat,
edit-ops, a selection edit), then thread summaries, then the workspace index.

- Foreground work (`foreground(COMPLETION)`, `foreground(REQUEST)`) runs at once. Entering it
  stops the summaries being written (their streamed model calls are closed, so a local server
  stops generating for them and its slot and cores are the request's) and pauses indexing.
- A summary (`in_turn`) starts only after an idle pause — `idle_pause_s` with no foreground
  work — and one at a time. Stopped by foreground work, it is tried again after the next idle
  pause: a person who types for ten minutes gets their summary within moments of pausing,
  and never at a keystroke's cost.
- Indexing runs in a thread and waits at `indexing_may_run` between files: open while no
  foreground work runs and no summary is being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

log = logging.getLogger(__name__)

COMPLETION, REQUEST = 0, 1
"""the priorities of foreground work, highest first (summaries and indexing come after both)"""
IDLE_PAUSE_S = 2.0
"""how long no completion or request must have run before a summary starts"""
GIVE_WAY_S = 1.0
"""how long foreground work waits for the summaries it stopped to close their model calls"""

T = TypeVar("T")


class BackgroundQueue:
    def __init__(self, idle_pause_s: float = IDLE_PAUSE_S, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_pause_s = idle_pause_s
        self._clock = clock
        self._active = 0
        """foreground work running now"""
        self._last_foreground = float("-inf")
        self._turn = asyncio.Lock()
        """held by the summary being written (one at a time)"""
        self._yielding: set[asyncio.Task[object]] = set()
        """the summaries being written: stopped by foreground work"""
        self._woken: asyncio.Event | None = None
        self._completing = 0
        """inline completions running now"""
        self._completions_over: asyncio.Event | None = None
        self.indexing_may_run = threading.Event()
        """set while indexing may go on (a thread waits on it between files)"""
        self.indexing_may_run.set()
        self.stopped = 0
        """summaries stopped by foreground work, since start (metadata for status and benchmarks)"""

    # --- foreground ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def foreground(self, priority: int) -> AsyncIterator[None]:
        """Run the block as foreground work: summaries being written stop (and wait for the next
        idle pause), indexing pauses after its current file."""
        assert priority in (COMPLETION, REQUEST), priority
        self._active += 1
        self._completing += priority == COMPLETION
        self._update()
        running = [task for task in self._yielding if not task.done()]
        for task in running:
            task.cancel()
        if running:
            self.stopped += len(running)
            log.info("background gave way work=%d priority=%d", len(running), priority)
            await asyncio.wait(running, timeout=GIVE_WAY_S)
        try:
            yield
        finally:
            self._active -= 1
            self._completing -= priority == COMPLETION
            if not self._completing and self._completions_over is not None:
                self._completions_over.set()
            self._last_foreground = self._clock()
            self._update()

    async def after_completions(self) -> None:
        """Return once no inline completion runs: work that must never go ahead of one (a
        next-edit suggestion's model call) waits here."""
        while self._completing:
            if self._completions_over is None or self._completions_over.is_set():
                self._completions_over = asyncio.Event()
            await self._completions_over.wait()

    # --- background turns ------------------------------------------------------------------

    async def in_turn(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` run as a summary: after an idle pause, one at a time, stopped by foreground
        work and then run again from the start after the next idle pause. Cancelling this call
        (shutdown) cancels the work."""
        while True:
            async with self._turn:
                await self._idle()
                task = asyncio.ensure_future(work())
                self._yielding.add(task)
                self._update()
                try:
                    await asyncio.wait([task])
                except asyncio.CancelledError:
                    task.cancel()
                    raise
                finally:
                    self._yielding.discard(task)
                    self._update()
                if not task.cancelled():
                    return task.result()
            log.info("background turn stopped, waiting for an idle pause")

    async def _idle(self) -> None:
        """Until no foreground work has run for `idle_pause_s`."""
        while True:
            wait = self._last_foreground + self.idle_pause_s - self._clock()
            if self._active == 0 and wait <= 0:
                return
            woken = self._woken = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), timeout=max(wait, 0.05) if self._active == 0 else None)

    def _update(self) -> None:
        if self._active == 0 and not any(not task.done() for task in self._yielding):
            self.indexing_may_run.set()
        else:
            self.indexing_may_run.clear()
        if self._woken is not None:
            self._woken.set()
