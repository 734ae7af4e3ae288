"""Deadlines that are usually met, kept by one timer per event loop and delay.

A timer made and cancelled per request or response costs a few microseconds on uvloop (a
libuv handle each), several per cent of a stateless call; what it guards (a client leaving
a long request, a keep-alive connection left idle) almost never happens. Here setting and
clearing a deadline is an entry in an ordered dict; one timer, running only while some
deadline is set, calls each callback whose delay has passed, once.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable

SLACK_S = 0.001
"""A timer may fire up to a millisecond early (uvloop rounds to milliseconds)."""


class Deadlines:
    """Callbacks due ``delay`` seconds after each was set, on one loop (:func:`deadlines`)."""

    __slots__ = ("_armed", "_delay", "_pending")

    def __init__(self, delay: float) -> None:
        self._delay = delay
        # Oldest first: a dict keeps insertion order, and an entry leaves in O(1). No reference
        # to the loop, which keys this object in a weak mapping.
        self._pending: dict[Hashable, tuple[float, Callable[[], object]]] = {}
        self._armed = False

    def set(self, key: Hashable, callback: Callable[[], object], loop: asyncio.AbstractEventLoop) -> None:
        """Call ``callback()`` ``delay`` seconds from now unless :meth:`clear` ``(key)`` comes first."""
        pending = self._pending
        pending.pop(key, None)  # re-set: to the end, where its new time belongs
        pending[key] = (loop.time(), callback)
        if not self._armed:
            self._armed = True
            loop.call_later(self._delay, self._sweep, loop)

    def clear(self, key: Hashable) -> None:
        """Forget ``key``'s deadline (nothing if none is set)."""
        self._pending.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._pending

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Call what is due; come back when the oldest other deadline is."""
        self._armed = False
        pending = self._pending
        due = loop.time() - self._delay + SLACK_S
        while pending:
            key, (since, callback) = next(iter(pending.items()))
            if since > due:
                self._armed = True
                loop.call_at(since + self._delay, self._sweep, loop)
                return
            del pending[key]
            callback()


_ALL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, Deadlines]] = (
    weakref.WeakKeyDictionary()
)


def deadlines(loop: asyncio.AbstractEventLoop, delay: float) -> Deadlines:
    """The deadlines of ``loop`` that fall ``delay`` seconds after they are set."""
    of_loop = _ALL.get(loop)
    if of_loop is None:
        of_loop = _ALL[loop] = {}
    found = of_loop.get(delay)
    if found is None:
        found = of_loop[delay] = Deadlines(delay)
    return found
