"""Noticing that a client went away while its request is served, at no cost to quick requests.

Where no one can ever receive a request's answer (a stateless request, a JSON body, an SSE
stream with no event store to resume from), a client that disconnects should stop the
tool. Watching for that takes a task reading ``receive``; a task per request would cost
the fast paths a tenth of their throughput, so the watch starts only when a request is
still running after :data:`WATCH_AFTER_S`. Quick requests pay for no timer of their own
either: the watches of a loop share one (:mod:`toolkernel_http._deadlines`). The watch needs
an asyncio loop (uvicorn, and ``toolkernel serve``); on another loop it is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType

from starlette.types import Receive

from toolkernel_http._deadlines import Deadlines, deadlines

WATCH_AFTER_S = 0.2
"""How long a request runs before a watcher task looks out for its client leaving."""


class DisconnectWatch:
    """``with DisconnectWatch(receive, on_disconnect):`` awaits ``on_disconnect()`` if the client leaves.

    Nothing is called once the block has exited. ``receive`` must have nothing left to
    deliver but the disconnect (the request body was read). ``loop``: the running loop when
    the caller has it at hand (looking it up costs a system call on Python 3.11).
    """

    __slots__ = ("_deadlines", "_done", "_loop", "_on_disconnect", "_receive", "_task")

    def __init__(
        self,
        receive: Receive,
        on_disconnect: Callable[[], Awaitable[None]],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._receive = receive
        self._on_disconnect = on_disconnect
        self._loop = loop
        self._deadlines: Deadlines | None = None
        self._task: asyncio.Task[None] | None = None
        self._done = False

    def __enter__(self) -> DisconnectWatch:
        loop = self._loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not on asyncio (an ASGI server running trio): no watch
                return self
        self._loop = loop
        self._deadlines = deadlines(loop, WATCH_AFTER_S)
        self._deadlines.set(self, self._start, loop)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done = True
        if self._deadlines is not None:
            self._deadlines.clear(self)
        if self._task is not None:
            self._task.cancel()

    def _start(self) -> None:
        if not self._done and self._loop is not None:
            self._task = self._loop.create_task(self._watch())

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        if not self._done:
            await self._on_disconnect()
