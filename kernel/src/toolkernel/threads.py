"""Worker threads for blocking calls, reached more cheaply than ``anyio.to_thread``.

Sync tools and the sync client libraries of store plugins run here so the event loop
stays free. Measured on a 2-core VM, a round trip to a thread and back costs 170-230 µs
with ``anyio.to_thread.run_sync`` (capacity limiter, future handed back through a
portal), about 165 µs with ``loop.run_in_executor``, and about 110 µs here: one put on a
queue that warm threads wait on, one ``call_soon_threadsafe`` back. Like
``anyio.to_thread``, the call runs in a copy of the caller's context variables, and at
most ``max_threads`` calls run at once (threads start as they are needed).

Cancelling the awaiting task either waits for the call to end first
(``finish_on_cancel=True``, what ``anyio.to_thread`` does by default, for calls with
effects) or abandons it (the thread finishes, the result is dropped: for reads). A call
that must finish pays for its shield only when it is cancelled, not on every call (about
10 µs a call on a 2-core VM); any cancellation, an anyio cancel scope's or a plain
``Task.cancel``, then waits for the call's end, shielded from cancel scopes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

__all__ = [
    "WorkerThreads",
]

T = TypeVar("T")

_Job = tuple[
    "WorkerThreads",
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[[], Any],
    bool,
]


class WorkerThreads:
    """Up to ``max_threads`` daemon threads, started as calls need them, running what :meth:`run` gets."""

    def __init__(self, max_threads: int, name: str) -> None:
        """Remember the bound and the threads' name; nothing starts yet."""
        if max_threads < 1:
            raise ValueError(f"WorkerThreads {name!r}: max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._closed = False
        # Calls cancelled before their end that must be waited for: a waiter per awaited call,
        # or the call's future once the call ended before anybody waited.
        self._waiters: dict[asyncio.Future[Any], asyncio.Future[None]] = {}
        self._ended: set[asyncio.Future[Any]] = set()

    async def run(self, func: Callable[[], T], *, finish_on_cancel: bool = False) -> T:
        """``func()`` in a worker thread, in a copy of the caller's context; the event loop stays free."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): anyio's own threads
            return await anyio.to_thread.run_sync(func, abandon_on_cancel=not finish_on_cancel)
        if self._closed:
            return await anyio.to_thread.run_sync(func, abandon_on_cancel=not finish_on_cancel)
        if self._busy >= len(self._threads) and len(self._threads) < self.max_threads:
            self._start_one()
        future: asyncio.Future[T] = loop.create_future()
        self._busy += 1
        self._jobs.put((self, loop, future, contextvars.copy_context(), func, finish_on_cancel))
        if not finish_on_cancel:
            return await future
        # No shield is paid for up front: only a call actually cancelled waits for its end.
        try:
            return await future
        except asyncio.CancelledError:
            if future.cancelled():  # not yet settled: the call may still be running
                await self._call_end(loop, future)
            raise

    async def _call_end(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        """Wait, shielded from cancel scopes, until the worker is done with the call ``future`` was for."""
        if future in self._ended:
            self._ended.discard(future)
            return
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters[future] = waiter
        with anyio.CancelScope(shield=True):  # what anyio.to_thread does for a call it must not abandon
            await waiter

    def _start_one(self) -> None:
        index = len(self._threads)
        thread = threading.Thread(target=_work, args=(self._jobs,), name=f"{self.name}-{index}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """Let the threads finish what they run and exit; later calls use ``anyio.to_thread``."""
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)
        self._threads.clear()


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """A worker: run each job and settle its future on the job's event loop, until told to stop."""
    while (job := jobs.get()) is not None:
        pool, loop, future, context, func, finish = job
        del job
        try:
            result, error = context.run(func), None
        except BaseException as exc:  # handed to the awaiting task
            result, error = None, exc
        # RuntimeError: the loop was closed meanwhile, so nobody waits for this result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, pool, future, result, error, finish)
        del pool, loop, future, context, func, result, error  # hold nothing while idle


def _settle(
    pool: WorkerThreads, future: asyncio.Future[Any], result: Any, error: BaseException | None, finish: bool
) -> None:
    """Complete ``future`` on its loop; if its task was cancelled meanwhile, tell whoever awaits the end."""
    pool._busy -= 1
    if future.cancelled():
        if finish:
            waiter = pool._waiters.pop(future, None)
            if waiter is None:
                pool._ended.add(future)
            elif not waiter.done():
                waiter.set_result(None)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
