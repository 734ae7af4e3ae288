"""Noticing that a client went away while its request is served, at no cost to quick requests.

Where no one can ever receive a request's answer (a stateless request, a JSON body, an SSE
stream with no event store to resume from), a client that disconnects should stop the
tool. Watching for that takes a task reading ``receive``; a task per request would cost
the fast paths a tenth of their throughput, so the watch starts only when a request is
still running after :data:`WATCH_AFTER_S`. Quick requests pay for no timer either: a timer
made and cancelled per request costs a few microseconds on uvloop (a libuv handle each), so
the watches of one event loop share one timer (:class:`_Sweeper`), which runs only while a
watch is pending and starts each watcher once its request has run :data:`WATCH_AFTER_S`.
The watch needs an asyncio loop (uvicorn, and ``toolkernel serve``); on another loop it is
skipped.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType

from starlette.types import Receive

WATCH_AFTER_S = 0.2
"""How long a request runs before a watcher task looks out for its client leaving."""


class DisconnectWatch:
    """``with DisconnectWatch(receive, on_disconnect):`` awaits ``on_disconnect()`` if the client leaves.

    Nothing is called once the block has exited. ``receive`` must have nothing left to
    deliver but the disconnect (the request body was read). ``loop``: the running loop when
    the caller has it at hand (looking it up costs a system call on Python 3.11).
    """

    __slots__ = ("_done", "_loop", "_on_disconnect", "_receive", "_sweeper", "_task")

    def __init__(
        self,
        receive: Receive,
        on_disconnect: Callable[[], Awaitable[None]],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._receive = receive
        self._on_disconnect = on_disconnect
        self._loop = loop
        self._sweeper: _Sweeper | None = None
        self._task: asyncio.Task[None] | None = None
        self._done = False

    def __enter__(self) -> DisconnectWatch:
        loop = self._loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not on asyncio (an ASGI server running trio): no watch
                return self
        sweeper = _SWEEPERS.get(loop)
        if sweeper is None:
            sweeper = _SWEEPERS[loop] = _Sweeper()
        sweeper.add(self, loop)
        self._sweeper = sweeper
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done = True
        if self._sweeper is not None:
            self._sweeper.pending.pop(self, None)
        if self._task is not None:
            self._task.cancel()

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._done:
            self._task = loop.create_task(self._watch())

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if not self._done:
            await self._on_disconnect()


class _Sweeper:
    """The one timer of a loop's pending watches: it starts the watchers of requests still running."""

    __slots__ = ("armed", "pending")

    def __init__(self) -> None:
        # No reference to the loop, which keys this sweeper in a weak mapping.
        self.pending: dict[DisconnectWatch, float] = {}
        """Watches not started yet and the loop time each began, oldest first (a dict: ordered, and
        an entry leaves in O(1))."""
        self.armed = False

    def add(self, watch: DisconnectWatch, loop: asyncio.AbstractEventLoop) -> None:
        self.pending[watch] = loop.time()
        if not self.armed:
            self.armed = True
            loop.call_later(WATCH_AFTER_S, self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the watches pending for ``WATCH_AFTER_S`` or more; come back for the oldest other one."""
        self.armed = False
        pending = self.pending
        due = loop.time() - WATCH_AFTER_S + _SLACK_S
        while pending:
            watch, since = next(iter(pending.items()))
            if since > due:
                self.armed = True
                loop.call_at(since + WATCH_AFTER_S, self._sweep, loop)
                return
            del pending[watch]
            watch._start(loop)


_SLACK_S = 0.001
"""A timer may fire up to a millisecond early (uvloop rounds to milliseconds)."""


_SWEEPERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweeper] = weakref.WeakKeyDictionary()
