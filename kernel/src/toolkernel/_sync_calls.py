"""Where a sync tool's calls run: a worker thread, or the event loop once the tool has shown itself short.

A worker thread keeps a call that waits (sleep, I/O, a lock, a future) or runs long from
stalling the server. A short call that never waits gains nothing from it: it holds the GIL
from its start to its end, so the event loop waits for it in a thread as well, and the
hand-off (a queue put, two thread wake-ups, a GIL hand-over) costs more CPU than the call.

So a sync tool starts in worker threads, where each call is timed. After
:data:`PROVING_CALLS` consecutive calls that each took under :data:`SHORT_S` of wall time,
and as much CPU time as wall time (within :data:`WAIT_S`: it never waited), its calls run on
the event loop, in a copy of the caller's context as in a thread. The first call there that
computes for over :data:`LONG_S`, or that takes over :data:`LONG_S` and waited (the thread
slept: a voluntary context switch), sends the tool back to threads for good, with a warning
in the log. A call that took long only because the OS ran something else meanwhile (a busy
machine), or because a garbage collection ran in it (which would hold the GIL in a thread
as well), leaves the tool where it is.

A tool that takes the :class:`~toolkernel.ToolContext` stays in threads: it may poll
``ctx.cancel_requested``, which changes only while the loop runs. ``blocking=True`` on a tool
keeps it in threads always (say, one whose time depends on its input); ``blocking=False``
runs it on the loop from its first call.
"""

from __future__ import annotations

import contextvars
import functools
import gc
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from toolkernel.threads import WorkerThreads

__all__ = ["LONG_S", "PROVING_CALLS", "SHORT_S", "WAIT_S", "SyncCalls"]

T = TypeVar("T")

if sys.platform == "linux":
    from resource import RUSAGE_THREAD, getrusage

    def _usage() -> tuple[float, int | None]:
        """This thread's CPU seconds and voluntary context switches (its waits): one system call."""
        usage = getrusage(RUSAGE_THREAD)
        return usage.ru_utime + usage.ru_stime, usage.ru_nvcsw

else:

    def _usage() -> tuple[float, int | None]:
        """This thread's CPU seconds; its waits are not counted here."""
        return time.thread_time(), None


PROVING_CALLS = 64
"""Consecutive short, non-waiting calls in threads before a tool's calls move to the event loop."""
SHORT_S = 0.0005
"""A call under this much wall time is short (0.5 ms, a tenth of the GIL's switch interval)."""
WAIT_S = 0.0001
"""Wall time beyond the call's own CPU time that still counts as not waiting (0.1 ms)."""
LONG_S = 0.002
"""A call on the event loop that takes longer than this (2 ms) sends its tool back to threads."""


@functools.cache
def sync_tool_threads() -> WorkerThreads:
    """The threads sync tools run in: at most 40 calls at once, as with ``anyio.to_thread``."""
    from toolkernel.threads import WorkerThreads

    return WorkerThreads(40, "toolkernel-tool")


class _Collections:
    """Seconds this process has spent in garbage collections, kept by a ``gc`` callback
    installed with the first :class:`SyncCalls` (two calls of it per collection)."""

    seconds = 0.0
    started = 0.0

    @classmethod
    def clock(cls, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            cls.started = time.perf_counter()
        else:
            cls.seconds += time.perf_counter() - cls.started


class SyncCalls:
    """The place of one sync callable's calls, learned from how they behave (see the module)."""

    __slots__ = ("_inline", "_name", "_settled", "_streak")

    def __init__(self, name: str, blocking: bool | None = None) -> None:
        """``blocking`` None: learn; True: always threads; False: always the event loop."""
        self._name = name
        self._inline = blocking is False
        self._settled = blocking is not None
        self._streak = 0
        if _Collections.clock not in gc.callbacks:
            gc.callbacks.append(_Collections.clock)

    @property
    def inline(self) -> bool:
        """Whether calls now run on the event loop."""
        return self._inline

    async def run(self, func: Callable[[], T]) -> T:
        """``func()`` where it belongs; a cancelled caller still waits for a call in a thread to end."""
        if self._inline:
            if self._settled:
                return contextvars.copy_context().run(func)
            start, used, collecting = time.perf_counter(), _usage(), _Collections.seconds
            try:
                return contextvars.copy_context().run(func)
            finally:
                if (elapsed := time.perf_counter() - start) > LONG_S:
                    self._check_long_call(elapsed, used, _Collections.seconds - collecting)
        if self._settled:
            return await sync_tool_threads().run(func, finish_on_cancel=True)
        return await sync_tool_threads().run(lambda: self._timed(func), finish_on_cancel=True)

    def _timed(self, func: Callable[[], T]) -> T:
        """Run ``func`` in its worker thread and count it toward the move to the loop.

        Worker threads update the streak without a lock: a lost update only delays the move.
        """
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return func()
        finally:
            elapsed = time.perf_counter() - wall
            if elapsed < SHORT_S and elapsed - (time.thread_time() - cpu) < WAIT_S:
                self._streak += 1
                if self._streak >= PROVING_CALLS and not self._settled:
                    self._inline = True
            else:
                self._streak = 0

    def _check_long_call(self, elapsed: float, before: tuple[float, int | None], collecting: float) -> None:
        """Send the tool back to threads if a call on the loop that took ``elapsed`` s, of which
        ``collecting`` s in garbage collections, computed that long or waited; not if the OS
        merely preempted it."""
        if elapsed - collecting <= LONG_S:
            return
        cpu, waits = _usage()
        computed = cpu - before[0] - collecting
        waited = elapsed - collecting - computed > LONG_S if waits is None else waits != before[1]
        if computed > LONG_S or waited:
            self._back_to_threads(elapsed)

    def _back_to_threads(self, elapsed: float) -> None:
        self._inline = False
        self._settled = True
        from toolkernel._logging import get_logger

        get_logger("toolkernel.tools").warning(
            "sync tool moved back to worker threads",
            tool=self._name,
            call_ms=round(elapsed * 1e3, 3),
            limit_ms=LONG_S * 1e3,
            hint="declare it with blocking=True to keep it in threads from its first call",
        )
