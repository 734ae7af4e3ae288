"""A response's head and its first body chunk leave in one write (``HeadWithBody``); nothing is
reordered or held back: a streamed response's head goes out before its body exists, ``100
Continue`` at once, a body-less answer on the loop's next turn.

The protocol under test is the real one ``toolkernel serve`` runs (uvicorn's httptools protocol
with the connection guard) driving real ASGI apps; only the transport under it records the
writes instead of making system calls, as the number of writes is what is checked.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.server import ServerState

from toolkernel import Kernel, MCPServer
from toolkernel_http import asgi_app
from toolkernel_http._connections import guarded_protocol

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recording(asyncio.Transport):
    """A transport that keeps what is written to it, one entry per write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True


def _connect(app: Any, **settings: Any) -> tuple[Any, Recording]:
    """A connection to ``app`` through the guarded protocol (uvicorn ``settings``), recorded."""
    cls = guarded_protocol(10.0, 100, 64 * 1024, 100)
    config = Config(app, http=cls, lifespan="off", log_level="warning", **settings)
    config.load()
    protocol = cls(config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop())
    transport = Recording()
    protocol.connection_made(transport)
    return protocol, transport


def _post(body: bytes, *extra: bytes) -> bytes:
    head = [
        b"POST /mcp HTTP/1.1",
        b"host: 127.0.0.1:8000",
        b"accept: application/json, text/event-stream",
        b"content-type: application/json",
        b"content-length: %d" % len(body),
        *extra,
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def _until(condition: Any) -> None:
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 - polling what the protocol wrote
            await asyncio.sleep(0.001)


async def test_a_stateless_json_answer_is_one_write() -> None:
    """uvicorn wrote the head on ``http.response.start`` and the body on the next message: two
    writes, two TCP segments and two wake-ups of the client for one small answer."""
    server = MCPServer("one-write", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    app = asgi_app(server, stateless=True, json_response=True)
    started = asyncio.Event()
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await messages.put({"type": "lifespan.startup"})

    async def lifespan_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    lifespan = asyncio.ensure_future(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, messages.get, lifespan_send)
    )
    try:
        async with asyncio.timeout(10):
            await started.wait()
        protocol, transport = _connect(app)
        for request_id in (1, 2):
            call = {"name": "echo", "arguments": {"text": f"hi {request_id}"}}
            body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call})
            before = len(transport.writes)
            protocol.data_received(_post(body.encode()))
            await _until(lambda before=before: len(transport.writes) > before)
            await asyncio.sleep(0.01)  # anything written after the answer would show now
            written = transport.writes[before:]
            assert len(written) == 1, written
            head, _, answer = written[0].partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert json.loads(answer)["result"]["content"][0]["text"] == f"hi {request_id}"
    finally:
        await messages.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(lifespan, 10)


async def test_a_streamed_head_goes_out_before_its_body_exists() -> None:
    """A head whose body comes later is not held until then: it leaves on the loop's next turn,
    and what follows is written after it, in order."""
    release = asyncio.Event()

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await release.wait()
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": False})

    protocol, transport = _connect(stream)
    protocol.data_received(_post(b"{}"))
    await _until(lambda: transport.writes)
    assert len(transport.writes) == 1
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.writes[0].endswith(b"\r\n\r\n")
    release.set()
    await _until(lambda: len(transport.writes) == 3)
    assert b"".join(transport.writes[1:]) == b"9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n"


async def test_100_continue_is_written_at_once() -> None:
    """A client that waits for ``100 Continue`` before sending its body gets it while the app waits."""
    got: list[bytes] = []

    async def echo_body(scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        got.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    protocol, transport = _connect(echo_body)
    head, _, body = _post(b"{}", b"expect: 100-continue").partition(b"\r\n\r\n")
    protocol.data_received(head + b"\r\n\r\n")
    await _until(lambda: transport.writes)
    assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    protocol.data_received(body)
    await _until(lambda: len(transport.writes) == 2)
    assert got == [b"{}"]
    assert transport.writes[1].startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.writes[1].endswith(b"\r\n\r\nok")


async def test_an_answer_without_body_bytes_is_written() -> None:
    """A HEAD answer has no body write at all: its head goes out on the loop's next turn."""

    async def head_only(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello"})

    protocol, transport = _connect(head_only)
    protocol.data_received(b"HEAD /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n\r\n")
    await _until(lambda: transport.writes)
    assert len(transport.writes) == 1
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.writes[0].endswith(b"\r\n\r\n")
