"""What makes a stateless call cheap keeps what it answers: the front door answers every request as
the middleware stack does, no request leaves garbage cycles, and serving declares its event loop."""

from __future__ import annotations

import gc
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import sniffio
from starlette.types import Message, Receive, Scope, Send

import toolkernel_http.plugin
from toolkernel import Kernel, MCPServer, ToolContext
from toolkernel.transports import ServeOptions
from toolkernel_http import asgi_app
from toolkernel_http._front import FrontDoor

from .conftest import initialize, make_server

REPO = Path(__file__).resolve().parents[3]

JSON_HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
]


def _call(name: str, arguments: Any, request_id: Any = 7) -> bytes:
    params = {"name": name, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


Headers = list[tuple[bytes, bytes]]


def _replace(headers: Headers, name: bytes, value: bytes | None) -> Headers:
    kept = [(k, v) for k, v in headers if k != name]
    return kept if value is None else [*kept, (name, value)]


BODIES = {
    "tool call": _call("echo", {"text": "hi"}),
    "string id": _call("echo", {"text": "s"}, request_id="abc"),
    "bad arguments": _call("echo", {"text": 3}),
    "unknown tool": _call("nope", {}),
    "tools/list": b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    "ping": b'{"jsonrpc":"2.0","id":2,"method":"ping"}',
    "unknown method": b'{"jsonrpc":"2.0","id":3,"method":"no/such"}',
    "initialize": json.dumps(initialize()).encode(),
    "notification": b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    "batch": b"[" + _call("echo", {"text": "b"}) + b"]",
    "not json": b"{nope",
    "fractional id": b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
}
HEADER_CASES = {
    "plain": JSON_HEADERS,
    "protocol version": [*JSON_HEADERS, (b"mcp-protocol-version", b"2025-06-18")],
    "unsupported version": [*JSON_HEADERS, (b"mcp-protocol-version", b"1999-01-01")],
    "session id": [*JSON_HEADERS, (b"mcp-session-id", b"abc")],
    "foreign host": _replace(JSON_HEADERS, b"host", b"evil.example"),
    "allowed origin": [*JSON_HEADERS, (b"origin", b"http://localhost:3000")],
    "foreign origin": [*JSON_HEADERS, (b"origin", b"http://evil.example")],
    "text body": _replace(JSON_HEADERS, b"content-type", b"text/plain"),
    "json with charset": _replace(JSON_HEADERS, b"content-type", b"application/json; charset=utf-8"),
    "declared too large": [*JSON_HEADERS, (b"content-length", b"99999999")],
    "accepts JSON only": _replace(JSON_HEADERS, b"accept", b"application/json"),
    "accepts nothing": _replace(JSON_HEADERS, b"accept", None),
}


class _Counting:
    """A do-nothing middleware that counts the requests it sees."""

    seen = 0

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            _Counting.seen += 1
        await self.app(scope, receive, send)


async def _request(
    app: Any,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    *,
    method: str = "POST",
    path: str = "/mcp",
    chunks: int = 1,
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request straight through the ASGI interface: status, headers, body."""
    pieces = [body[i::chunks] for i in range(chunks)] if chunks > 1 else [body]
    incoming: list[Message] = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1} for i, p in enumerate(pieces)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        if incoming:
            return incoming.pop(0)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    with anyio.fail_after(30):
        await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], sorted(start.get("headers", [])), content


def _cases() -> Iterator[tuple[str, bytes, list[tuple[bytes, bytes]]]]:
    for name, body in BODIES.items():
        yield name, body, JSON_HEADERS
    for name, headers in HEADER_CASES.items():
        yield name, BODIES["tool call"], headers


@pytest.mark.anyio
@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
async def test_the_door_answers_as_the_middleware_stack(json_response: bool) -> None:
    """Status, headers and body match the stack's for results, errors, refusals and fall-backs alike."""
    door_app = asgi_app(make_server(), stateless=True, json_response=json_response, max_body_bytes=4096)
    stack_app = asgi_app(make_server(), stateless=True, json_response=json_response, max_body_bytes=4096)
    stack_app.add_middleware(_Counting)
    _Counting.seen = 0
    async with door_app.lifespan(), stack_app.lifespan():
        calls = 0
        for name, body, headers in _cases():
            ours = await _request(door_app, body, headers)
            theirs = await _request(stack_app, body, headers)
            calls += 1
            assert ours == theirs, name
        big = _call("echo", {"text": "x" * 5000})
        for chunks in (1, 3):  # over the limit with no Content-Length, in one read and in several
            ours = await _request(door_app, big, JSON_HEADERS, chunks=chunks)
            assert ours == await _request(stack_app, big, JSON_HEADERS, chunks=chunks)
            assert ours[0] == 413
            calls += 1
        for method, path in (("GET", "/mcp"), ("DELETE", "/mcp"), ("POST", "/mcp/"), ("POST", "/other")):
            ours = await _request(door_app, BODIES["tool call"], JSON_HEADERS, method=method, path=path)
            theirs = await _request(stack_app, BODIES["tool call"], JSON_HEADERS, method=method, path=path)
            assert ours == theirs, (method, path)
            calls += 1
    assert isinstance(door_app.middleware_stack, FrontDoor)
    # Middleware added to the app sees every request: the door stays shut for it.
    assert not isinstance(stack_app.middleware_stack, FrontDoor)
    assert _Counting.seen == calls


@pytest.mark.anyio
async def test_the_door_adds_what_the_stack_adds() -> None:
    """A tool call through the door carries ``Vary: Origin`` (CORS on) and the router's scope keys."""
    server = make_server()
    seen: dict[str, Any] = {}

    @server.tool
    def scope_keys(ctx: ToolContext) -> str:
        """Report what the router put in the request's scope."""
        scope = ctx._request.request.scope  # the HTTP request behind the call, as the SDK holds it
        seen.update(endpoint=scope.get("endpoint"), router=scope.get("router"))
        seen["params"] = scope.get("path_params")
        return "ok"

    app = asgi_app(server, stateless=True, json_response=True)
    async with app.lifespan():
        status, headers, body = await _request(app, _call("scope_keys", {}), JSON_HEADERS)
        quiet = asgi_app(make_server(), stateless=True, json_response=True, cors=False)
        async with quiet.lifespan():
            _, quiet_headers, _ = await _request(quiet, _call("echo", {"text": "q"}), JSON_HEADERS)
    assert status == 200
    assert json.loads(body)["result"]["content"][0]["text"] == "ok"
    assert isinstance(app.middleware_stack, FrontDoor)
    assert (b"vary", b"Origin") in headers
    assert (b"vary", b"Origin") not in quiet_headers
    assert seen["router"] is app.router
    assert seen["params"] == {}
    assert seen["endpoint"] is app.router.routes[0].endpoint


def test_the_door_opens_only_for_stateless_streamable_apps_without_auth() -> None:
    assert asgi_app(make_server(), stateless=True).door is not None
    assert asgi_app(make_server()).door is None
    assert asgi_app(make_server(), stateless=True, streamable=False).door is None

    class Auth:
        def protect(self, routes: list[Any], *, path: str, serving: Any) -> list[Any]:
            return routes

    assert asgi_app(make_server(), stateless=True, auth=Auth()).door is None


_GARBAGE_PROBE = """
import asyncio, gc, json, sys
from toolkernel import Kernel, MCPServer
from toolkernel_http import asgi_app

server = MCPServer("probe", "1.0.0", kernel=Kernel(load_entry_points=False))

@server.tool
def echo(text: str) -> str:
    return text

HEADERS = [(b"host", b"127.0.0.1:8000"), (b"accept", b"application/json, text/event-stream"),
           (b"content-type", b"application/json")]

async def call(app, i):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": str(i)}}}).encode()
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent = []
    async def receive():
        if incoming:
            return incoming.pop()
        await asyncio.sleep(3600)
    async def send(message):
        sent.append(message)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "root_path": "",
             "headers": HEADERS, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000), "state": {}}
    await asyncio.get_running_loop().create_task(app(scope, receive, send))
    assert sent[0]["status"] == 200, sent

async def main(json_response):
    app = asgi_app(server, stateless=True, json_response=json_response)
    async with app.lifespan():
        for i in range(20):  # warm: first-use caches, lazily built models
            await call(app, i)
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        for i in range(50):
            await call(app, i)
        gc.collect()
        garbage = [type(o).__qualname__ for o in gc.garbage]
        gc.set_debug(0)
        gc.garbage.clear()
    return garbage

print(json.dumps(asyncio.run(main(sys.argv[1] == "json"))))
"""


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
def test_a_stateless_request_leaves_no_garbage_cycles(json_response: bool) -> None:
    """Every object a stateless call makes is freed when the call ends, not by the cycle collector.

    The SDK's ``serve_one`` caches a bound method on its runner, tying the runner, its
    connection, events and exit stack into a cycle on every request; collecting those cost
    a stateless call more than a tenth of its time. Measured in a fresh interpreter, where
    no earlier test's objects can turn into garbage meanwhile.
    """
    mode = "json" if json_response else "sse"
    done = subprocess.run(
        [sys.executable, "-c", _GARBAGE_PROBE, mode], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.anyio
async def test_serving_declares_its_event_loop_and_freezes_what_start_up_built() -> None:
    """While ``toolkernel serve`` runs the HTTP transport, sniffio knows the loop's library without
    looking up the current task (anyio asks it several times a request), and the objects start-up
    built are frozen out of later collections; the declaration is undone when serving stops."""
    kernel = Kernel(load_entry_points=False, plugins=[toolkernel_http.plugin])
    server = MCPServer("declared", "1.0.0", kernel=kernel)

    @server.tool
    async def library() -> str:
        """The async library sniffio was told runs this thread's loop."""
        return str(sniffio.thread_local.name)

    before = sniffio.thread_local.name
    gc.unfreeze()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    extra = {"stateless": True, "json_response": True}
    async with anyio.create_task_group() as tg:
        tg.start_soon(kernel.serve, server, "http", ServeOptions(port=port, extra=extra))
        async with httpx.AsyncClient(timeout=10) as client:
            with anyio.fail_after(30):
                while True:
                    try:
                        answer = await client.post(
                            f"http://127.0.0.1:{port}/mcp",
                            content=_call("library", {}),
                            headers={k.decode(): v.decode() for k, v in JSON_HEADERS[1:]},
                        )
                        break
                    except httpx.ConnectError:
                        await anyio.sleep(0.05)
        frozen = gc.get_freeze_count()
        tg.cancel_scope.cancel()
    assert answer.json()["result"]["content"][0]["text"] == "asyncio"
    assert frozen > 0
    assert sniffio.thread_local.name == before
