"""Noticing that a client went away while its request is served, at no cost to quick requests.

Where no one can ever receive a request's answer (a stateless request, a JSON body, an SSE
stream with no event store to resume from), a client that disconnects should stop the
tool. Watching for that takes a task reading ``receive``; a task per request would cost
the fast paths a tenth of their throughput, so the watch starts only when a request is
still running after :data:`WATCH_AFTER_S`: quick requests pay for one timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType

from starlette.types import Receive

WATCH_AFTER_S = 0.2
"""How long a request runs before a watcher task looks out for its client leaving."""


class DisconnectWatch:
    """``with DisconnectWatch(receive, on_disconnect):`` awaits ``on_disconnect()`` if the client leaves.

    Nothing is called once the block has exited. ``receive`` must have nothing left to
    deliver but the disconnect (the request body was read).
    """

    __slots__ = ("_done", "_on_disconnect", "_receive", "_task", "_timer")

    def __init__(self, receive: Receive, on_disconnect: Callable[[], Awaitable[None]]) -> None:
        self._receive = receive
        self._on_disconnect = on_disconnect
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._done = False

    def __enter__(self) -> DisconnectWatch:
        self._timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self._start)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()

    def _start(self) -> None:
        self._timer = None
        if not self._done:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if not self._done:
            await self._on_disconnect()
