"""The disconnect watch: quick requests arm no timer of their own; a request still running after
``WATCH_AFTER_S`` gets its watcher, and one that ended never does."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from toolkernel_http import _deadlines
from toolkernel_http._disconnect import WATCH_AFTER_S, DisconnectWatch

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _counting_timers(loop: asyncio.AbstractEventLoop) -> list[float]:
    """Record every timer the disconnect watches ask ``loop`` for (``call_later`` goes through
    ``call_at``; the test's own sleeps are not counted)."""
    made: list[float] = []
    call_at = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__module__", None) in (DisconnectWatch.__module__, _deadlines.__name__):
            made.append(when)
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counted  # type: ignore[method-assign]
    return made


async def _never_leaves() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def _leaves() -> dict[str, Any]:
    return {"type": "http.disconnect"}


async def test_quick_requests_share_one_timer() -> None:
    """A timer made and cancelled per request cost a few microseconds each: 200 quick requests, at
    most one timer (armed by the first, for all of them)."""
    loop = asyncio.get_running_loop()
    made = _counting_timers(loop)
    gone: list[int] = []

    async def request(index: int) -> None:
        async def leave() -> None:
            gone.append(index)

        with DisconnectWatch(_leaves, leave):
            await asyncio.sleep(0)

    for batch in range(4):
        await asyncio.gather(*(request(50 * batch + i) for i in range(50)))
    assert len(made) == 1
    await asyncio.sleep(WATCH_AFTER_S * 1.5)  # the shared timer fires and finds nothing to start
    assert gone == []
    assert len(made) == 1


async def test_a_request_still_running_is_watched_once_it_has_run_the_delay() -> None:
    """Two long requests begun apart: each one's watcher starts, not before the request has run
    ``WATCH_AFTER_S``; a quick one begun between them is never watched."""
    loop = asyncio.get_running_loop()
    began: dict[str, float] = {}
    noticed: dict[str, float] = {}

    async def request(name: str, receive: Any, hold: asyncio.Event) -> None:
        async def leave() -> None:
            noticed[name] = loop.time()
            hold.set()

        began[name] = loop.time()
        with DisconnectWatch(receive, leave):
            await hold.wait()

    first, second, quick = asyncio.Event(), asyncio.Event(), asyncio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(request, "first", _leaves, first)
            await asyncio.sleep(WATCH_AFTER_S / 2)
            quick.set()
            tg.start_soon(request, "quick", _leaves, quick)
            tg.start_soon(request, "second", _leaves, second)
            tg.start_soon(request, "stays", _never_leaves, asyncio.Event())
            await first.wait()
            await second.wait()
            tg.cancel_scope.cancel()
    assert set(noticed) == {"first", "second"}
    for name in noticed:
        assert noticed[name] - began[name] >= WATCH_AFTER_S - 0.002, (name, began, noticed)
