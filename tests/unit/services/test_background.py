"""The order of work (services/background.py): completion, then requests, then summaries, then
indexing. Summaries wait for an idle pause and give way to any foreground work, and are run
again after the next pause; indexing waits between files."""

from __future__ import annotations

import asyncio
import threading

import pytest

from margin.services.background import COMPLETION, REQUEST, BackgroundQueue
from tests.conftest import until

PAUSE = 0.05


class Work:
    """A background job that runs until released, recording each start and stop."""

    def __init__(self) -> None:
        self.starts = 0
        self.stops = 0
        self.release = asyncio.Event()

    async def __call__(self) -> str:
        self.starts += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.stops += 1
            raise
        return f"done after {self.starts} starts"


async def test_a_summary_waits_for_foreground_work_and_an_idle_pause_after_it():
    queue = BackgroundQueue(PAUSE)
    work = Work()
    work.release.set()
    async with queue.foreground(COMPLETION):
        turn = asyncio.ensure_future(queue.in_turn(work))
        for _ in range(20):
            await asyncio.sleep(PAUSE)  # several idle pauses' worth, inside the foreground block
        assert work.starts == 0 and not turn.done()
    assert await turn == "done after 1 starts"


async def test_foreground_work_stops_a_running_summary_which_runs_again_after_the_next_pause():
    queue = BackgroundQueue(PAUSE)
    work = Work()
    turn = asyncio.ensure_future(queue.in_turn(work))
    await until(lambda: work.starts == 1)
    assert not queue.indexing_may_run.is_set()  # a summary outranks indexing
    async with queue.foreground(COMPLETION):
        assert work.stops == 1  # stopped (its model call closed) before the completion goes on
        assert queue.indexing_may_run.is_set() is False
    await until(lambda: work.starts == 2)  # again, from the start, after the pause
    work.release.set()
    assert await turn == "done after 2 starts"
    assert queue.stopped == 1 and queue.indexing_may_run.is_set()


async def test_a_person_typing_on_and_on_gets_their_summary_once_they_pause():
    queue = BackgroundQueue(PAUSE)
    work = Work()
    work.release.set()
    turn = asyncio.ensure_future(queue.in_turn(work))
    for _ in range(30):  # keystrokes closer together than the pause: the summary waits
        async with queue.foreground(COMPLETION):
            await asyncio.sleep(0)
        await asyncio.sleep(PAUSE / 5)
    assert work.starts == 0
    assert await turn == "done after 1 starts"  # the person paused


async def test_summaries_are_written_one_at_a_time():
    queue = BackgroundQueue(PAUSE)
    first, second = Work(), Work()
    turns = [asyncio.ensure_future(queue.in_turn(first)), asyncio.ensure_future(queue.in_turn(second))]
    await until(lambda: first.starts == 1)
    await asyncio.sleep(PAUSE * 4)
    assert second.starts == 0
    first.release.set()
    second.release.set()
    assert await asyncio.gather(*turns) == ["done after 1 starts", "done after 1 starts"]


async def test_cancelling_a_turn_cancels_its_work():
    queue = BackgroundQueue(PAUSE)
    work = Work()
    turn = asyncio.ensure_future(queue.in_turn(work))
    await until(lambda: work.starts == 1)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert work.stops == 1 and queue.indexing_may_run.is_set()


@pytest.mark.parametrize("priority", [COMPLETION, REQUEST])
async def test_indexing_waits_while_foreground_work_runs(priority):
    queue = BackgroundQueue(PAUSE)
    passed = threading.Event()

    def between_files() -> None:  # what the indexing thread does before each file
        queue.indexing_may_run.wait()
        passed.set()

    async with queue.foreground(priority):
        thread = threading.Thread(target=between_files)
        thread.start()
        await asyncio.sleep(PAUSE * 4)
        assert not passed.is_set()
    await until(passed.is_set)
    thread.join()


async def test_a_failing_summary_raises_to_its_turn_and_frees_the_queue():
    queue = BackgroundQueue(PAUSE)

    async def failing() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await queue.in_turn(failing)
    work = Work()
    work.release.set()
    assert await queue.in_turn(work) == "done after 1 starts"
    assert queue.indexing_may_run.is_set()


async def test_work_that_must_not_go_ahead_of_a_completion_waits_for_every_one_running():
    queue = BackgroundQueue(PAUSE)
    assert await asyncio.wait_for(queue.after_completions(), 1) is None  # none running: at once
    first, second, done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def completion(release: asyncio.Event) -> None:
        async with queue.foreground(COMPLETION):
            await release.wait()

    async def waiting() -> None:
        async with queue.foreground(REQUEST):  # a request running does not hold it back ...
            await queue.after_completions()
            done.set()

    running = [asyncio.ensure_future(completion(first)), asyncio.ensure_future(completion(second))]
    await asyncio.sleep(0)
    waiter, other = asyncio.ensure_future(waiting()), asyncio.ensure_future(queue.after_completions())
    await asyncio.sleep(0.05)
    first.set()
    await running[0]
    await asyncio.sleep(0.05)
    assert not done.is_set() and not other.done()  # ... a completion still running does
    second.set()
    await asyncio.wait_for(asyncio.gather(waiter, other, *running), 5)
    assert done.is_set()
