"""toolkernel.threads.WorkerThreads: results, errors, context, the bound, and both cancellation modes."""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time

import anyio
import pytest

from toolkernel.threads import WorkerThreads

pytestmark = pytest.mark.anyio
REQUEST = contextvars.ContextVar("REQUEST", default="none")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_runs_in_another_thread_and_returns_or_raises() -> None:
    pool = WorkerThreads(2, "t")
    caller = threading.get_ident()
    assert await pool.run(threading.get_ident) != caller

    def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await pool.run(fail)
    pool.close()


async def test_the_call_sees_the_callers_context_variables() -> None:
    pool = WorkerThreads(1, "t")
    REQUEST.set("r-42")
    assert await pool.run(REQUEST.get) == "r-42"
    pool.close()


async def test_at_most_max_threads_calls_run_at_once() -> None:
    pool = WorkerThreads(3, "t")
    lock = threading.Lock()
    running = peak = 0

    def work() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(pool.run, work)
    assert peak == 3
    assert len({t.name for t in threading.enumerate() if t.name.startswith("t-")}) == 3
    pool.close()


async def test_cancel_waits_for_a_call_that_must_finish() -> None:
    pool = WorkerThreads(1, "t")
    finished = threading.Event()

    def write() -> None:
        time.sleep(0.3)
        finished.set()

    with anyio.move_on_after(0.05):
        await pool.run(write, finish_on_cancel=True)
    assert finished.is_set(), "the cancellation went through before the call ended"
    pool.close()


async def test_cancel_abandons_a_read() -> None:
    pool = WorkerThreads(1, "t")
    finished = threading.Event()

    def read() -> None:
        time.sleep(0.3)
        finished.set()

    with anyio.move_on_after(0.05):
        await pool.run(read)
    assert not finished.is_set(), "the caller waited for an abandoned call"
    assert finished.wait(5)
    pool.close()


async def test_after_close_calls_still_run() -> None:
    pool = WorkerThreads(1, "t")
    await pool.run(lambda: None)
    pool.close()
    assert await pool.run(lambda: 7) == 7


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_threads must be at least 1, got 0"):
        WorkerThreads(0, "t")


async def test_a_plain_task_cancel_also_waits_for_a_call_that_must_finish() -> None:
    import asyncio

    pool = WorkerThreads(1, "t")
    started, finished = threading.Event(), threading.Event()

    def write() -> None:
        started.set()
        time.sleep(0.3)
        finished.set()

    task = asyncio.ensure_future(pool.run(write, finish_on_cancel=True))
    await anyio.to_thread.run_sync(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set(), "the task ended before the call did"
    assert not pool._waiters
    assert not pool._ended
    pool.close()


async def test_a_call_ending_before_its_cancelled_task_resumes_is_not_waited_for_twice() -> None:
    import asyncio

    pool = WorkerThreads(1, "t")
    ended = threading.Event()

    def write() -> None:
        ended.set()

    for _ in range(50):  # the worker's settle and the task's resumption race: both orders occur
        ended.clear()
        task = asyncio.ensure_future(pool.run(write, finish_on_cancel=True))
        await asyncio.sleep(0)
        await anyio.to_thread.run_sync(ended.wait, 5)
        task.cancel()
        with anyio.fail_after(5), contextlib.suppress(asyncio.CancelledError):
            await task  # cancelled, or already done when the cancel came
    await pool.run(lambda: None)
    assert not pool._waiters
    assert not pool._ended
    assert pool._busy == 0
    pool.close()
