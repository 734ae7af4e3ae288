"""The store's own worker threads for queries: results, errors, cancellation, a free event loop, close."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from toolkernel_qdrant._threads import WorkerThreads


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_runs_calls_in_worker_threads_and_returns_or_raises() -> None:
    threads = WorkerThreads(2, "t")
    try:
        assert await threads.run(threading.current_thread) is not threading.current_thread()
        assert (await threads.run(threading.current_thread)).name.startswith("t-")

        def boom() -> None:
            raise KeyError("k")

        with pytest.raises(KeyError):
            await threads.run(boom)
    finally:
        threads.close()


@pytest.mark.anyio
async def test_event_loop_stays_free_and_calls_run_concurrently() -> None:
    threads = WorkerThreads(2, "t")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.005)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            start = time.perf_counter()
            async with anyio.create_task_group() as calls:
                calls.start_soon(threads.run, lambda: time.sleep(0.2))
                calls.start_soon(threads.run, lambda: time.sleep(0.2))
            elapsed = time.perf_counter() - start
            tg.cancel_scope.cancel()
        assert elapsed < 0.35  # two threads: side by side, not one after the other
        assert ticks >= 10  # the loop kept running meanwhile
    finally:
        threads.close()


@pytest.mark.anyio
async def test_a_cancelled_call_is_abandoned_and_the_threads_keep_working() -> None:
    threads = WorkerThreads(1, "t")
    try:
        with anyio.move_on_after(0.05):
            await threads.run(lambda: time.sleep(0.2))
        assert await threads.run(lambda: 42) == 42
    finally:
        threads.close()


@pytest.mark.anyio
async def test_after_close_calls_still_run() -> None:
    threads = WorkerThreads(1, "t")
    assert await threads.run(lambda: 1) == 1
    threads.close()
    assert await threads.run(lambda: 2) == 2


@pytest.mark.anyio
async def test_finish_on_cancel_waits_for_the_call_before_cancelling() -> None:
    threads = WorkerThreads(1, "t")
    finished = threading.Event()

    def write() -> None:
        time.sleep(0.15)
        finished.set()

    try:
        with anyio.move_on_after(0.02):
            await threads.run(write, finish_on_cancel=True)
            assert finished.is_set()  # the timeout did not cut the call short
        assert finished.is_set()
    finally:
        threads.close()
