"""uvicorn's keep-alive deadline, kept without a timer per response: an idle connection is closed
``timeout_keep_alive`` seconds after its last response, a connection that sends its next request
in time is not, and a pipelined request is served after the one before it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from toolkernel_http import _deadlines

from .test_http_one_write import _connect, _until

pytestmark = pytest.mark.anyio

KEEP_ALIVE_S = 0.1


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


GET = b"GET /ping HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n\r\n"


def _keep_alive_timers(loop: asyncio.AbstractEventLoop) -> list[str]:
    """Record the keep-alive timers asked of ``loop``: uvicorn's own, or the shared deadlines'."""
    made: list[str] = []
    call_at = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        name = getattr(callback, "__name__", "")
        if name == "timeout_keep_alive_handler" or getattr(callback, "__module__", "") == _deadlines.__name__:
            made.append(name)
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counted  # type: ignore[method-assign]
    return made


async def test_responses_make_no_keep_alive_timer_each() -> None:
    """uvicorn made a timer after every response and cancelled it when the next request came (a
    libuv handle each on uvloop, a few microseconds of every request): 50 requests on 5
    connections now arm at most one timer."""
    made = _keep_alive_timers(asyncio.get_running_loop())
    connections = [_connect(ok, timeout_keep_alive=5) for _ in range(5)]
    for _ in range(10):
        for protocol, transport in connections:
            before = len(transport.writes)
            protocol.data_received(GET)
            await _until(lambda transport=transport, before=before: len(transport.writes) > before)
    assert len(made) <= 1, made
    assert not any(transport.closed for _, transport in connections)


async def test_an_idle_connection_is_closed_after_timeout_keep_alive() -> None:
    loop = asyncio.get_running_loop()
    answered: list[float] = []

    async def timed(scope: Scope, receive: Receive, send: Send) -> None:
        await ok(scope, receive, send)
        answered.append(loop.time())  # the response is complete: the connection is idle from here

    protocol, transport = _connect(timed, timeout_keep_alive=KEEP_ALIVE_S)
    protocol.data_received(GET)
    await _until(lambda: transport.closed)
    assert loop.time() - answered[0] >= KEEP_ALIVE_S - 0.002


async def test_a_connection_that_comes_back_in_time_stays_open() -> None:
    """Requests every half deadline keep the connection open past several deadlines; once it falls
    silent, it is closed."""
    protocol, transport = _connect(ok, timeout_keep_alive=KEEP_ALIVE_S)
    for count in range(1, 7):
        protocol.data_received(GET)
        await _until(lambda count=count: len(transport.writes) == count)
        await asyncio.sleep(KEEP_ALIVE_S / 2)
        assert not transport.closed
    await _until(lambda: transport.closed)


async def test_pipelined_requests_are_answered_in_order() -> None:
    protocol, transport = _connect(ok, timeout_keep_alive=5)
    protocol.data_received(GET * 3)
    await _until(lambda: len(transport.writes) == 3)
    assert all(
        write.startswith(b"HTTP/1.1 200 OK\r\n") and write.endswith(b"ok") for write in transport.writes
    )
    assert not transport.closed
