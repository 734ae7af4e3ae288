"""Held resources are bounded: slow headers, connections, streams per session, legacy SSE streams,
stateless GETs, and tools whose answer nobody can receive any more."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

import toolkernel_http.plugin
from toolkernel import Kernel, MCPServer
from toolkernel.transports import ServeOptions
from toolkernel_http import asgi_app

from . import _raw as raw
from .conftest import serving

pytestmark = pytest.mark.anyio
TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _served(**extra: Any) -> AsyncIterator[str]:
    """``kernel.serve`` over the registered ``http`` transport (uvicorn as ``toolkernel serve`` runs it)."""
    kernel = Kernel(load_entry_points=False, plugins=[toolkernel_http.plugin])
    server = MCPServer("limits", "1.0.0", kernel=kernel)

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    port = _free_port()
    async with anyio.create_task_group() as tg:
        tg.start_soon(kernel.serve, server, "http", ServeOptions(port=port, extra=extra))
        with anyio.fail_after(30):
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    await anyio.sleep(0.05)
        await anyio.sleep(0.3)  # let the server see the probe connection close
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tg.cancel_scope.cancel()


def _recv_all(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (the socket has a timeout)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


async def test_slow_headers_are_cut_off() -> None:
    """A slowloris connection (headers never finished) is answered 408 and closed at the deadline."""
    with anyio.fail_after(TIMEOUT_S):
        async with _served(header_timeout_s=0.5) as base:
            port = int(base.rsplit(":", 1)[1])
            socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
            for sock in socks:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            answers = await anyio.to_thread.run_sync(lambda: [_recv_all(s) for s in socks])
            for sock in socks:
                sock.close()
            async with httpx.AsyncClient(timeout=10) as client:
                served = await raw.open_session(client, f"{base}/mcp")
    assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[:2]
    assert "mcp-session-id" in served


def _keep_alive_call(sock: socket.socket, request_id: int) -> bytes:
    """Post one stateless tools/call on ``sock`` and read its whole answer (a JSON body)."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "k"}},
        }
    ).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    headers, _, rest = data.partition(b"\r\n\r\n")
    length = int(
        next(line for line in headers.split(b"\r\n") if line.lower().startswith(b"content-length:")).split(
            b":"
        )[1]
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return headers.split(b"\r\n")[0] + b" " + rest


async def test_the_header_deadline_restarts_with_each_response() -> None:
    """A keep-alive client whose every request comes within the deadline is served past it; once it
    sends half a request after an answer, it is cut off at the deadline, as a new connection is."""

    def client(port: int) -> tuple[list[bytes], bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            answers = []
            for request_id in range(6):  # 6 x 0.25 s: three times the deadline, each request in time
                answers.append(_keep_alive_call(sock, request_id))
                time.sleep(0.25)
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            return answers, _recv_all(sock)

    with anyio.fail_after(TIMEOUT_S):
        async with _served(header_timeout_s=0.5, stateless=True, json_response=True) as base:
            port = int(base.rsplit(":", 1)[1])
            answers, late = await anyio.to_thread.run_sync(client, port)
    assert len(answers) == 6
    assert all(a.startswith(b"HTTP/1.1 200") and b'"text":"k"' in a for a in answers), answers
    assert late.startswith(b"HTTP/1.1 408"), late


async def test_connections_past_the_cap_are_refused_at_once() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with _served(max_connections=3) as base:
            port = int(base.rsplit(":", 1)[1])
            held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
            await anyio.sleep(0.2)
            extra = socket.create_connection(("127.0.0.1", port), timeout=5)
            refused = await anyio.to_thread.run_sync(_recv_all, extra)
            extra.close()
            for sock in held:
                sock.close()
            await anyio.sleep(0.2)
            async with httpx.AsyncClient(timeout=10) as client:
                served = await raw.open_session(client, f"{base}/mcp")
    head, _, body = refused.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503")
    assert "max_connections" in json.loads(body)["error"]["message"]
    assert "mcp-session-id" in served


def _waiting_server(log: list[str]) -> MCPServer:
    server = MCPServer("waits", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    async def wait(seconds: float) -> str:
        """Sleep, then answer; records whether it finished or was cancelled."""
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            log.append("cancelled")
            raise
        log.append("finished")
        return "done"

    return server


async def test_stateless_get_is_405() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(_waiting_server([]), stateless=True)) as base,
            httpx.AsyncClient() as client,
        ):
            response = await client.get(f"{base}/mcp", headers={"accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert json.loads(response.content)["error"]["code"] == -32600


async def test_legacy_sse_streams_count_against_max_sessions() -> None:
    with anyio.fail_after(TIMEOUT_S):
        app = asgi_app(_waiting_server([]), max_sessions=1)
        async with serving(app) as base, httpx.AsyncClient(timeout=10) as client:
            async with client.stream("GET", f"{base}/sse") as legacy:
                assert legacy.status_code == 200
                refused = await client.post(f"{base}/mcp", json=_init(), headers=raw.HEADERS)
            # Once the server sees the legacy stream gone, a session fits, and a legacy stream no longer does.
            with anyio.fail_after(10):
                while legacy_app_open(app):  # noqa: ASYNC110 - a count, not an event
                    await anyio.sleep(0.05)
            session = await raw.open_session(client, f"{base}/mcp")
            await raw.post(client, f"{base}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, session)
            legacy_refused = await client.get(f"{base}/sse")
    assert refused.status_code == 503
    assert legacy_refused.status_code == 503
    assert json.loads(legacy_refused.content)["error"]["message"] == "Too many open sessions"


def legacy_app_open(app: Any) -> int:
    """Legacy streams the app counts as open."""
    return int(app.sessions.held_elsewhere())


def _init() -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def _wait_call(request_id: int, seconds: float) -> dict[str, Any]:
    params = {"name": "wait", "arguments": {"seconds": seconds}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_streams_per_session_are_capped() -> None:
    with anyio.fail_after(TIMEOUT_S):
        app = asgi_app(_waiting_server([]), max_streams_per_session=2)
        async with serving(app) as base, httpx.AsyncClient(timeout=10) as client:
            url = f"{base}/mcp"
            session = await raw.open_session(client, url)
            async with anyio.create_task_group() as tg:
                for request_id in (1, 2):
                    tg.start_soon(raw.post, client, url, _wait_call(request_id, 1.0), session)
                await anyio.sleep(0.3)
                refused = await raw.post(client, url, _wait_call(3, 1.0), session)
    assert refused.status_code == 429
    assert json.loads(refused.content)["id"] == 3
    assert "max_streams_per_session" in json.loads(refused.content)["error"]["message"]


DISCONNECT_MODES = {
    "stateless-sse": ({"stateless": True}, "cancelled"),
    "stateless-json": ({"stateless": True, "json_response": True}, "cancelled"),
    "stateful-json": ({"json_response": True}, "cancelled"),
    "stateful-sse-unresumable": ({"resumable": False}, "cancelled"),
    # A resumable stream's answer is stored for the client to fetch with Last-Event-ID.
    "stateful-sse-resumable": ({}, "finished"),
}


@pytest.mark.parametrize("mode", list(DISCONNECT_MODES))
async def test_disconnect_cancels_the_tool_only_where_nobody_can_receive_its_answer(mode: str) -> None:
    options, outcome = DISCONNECT_MODES[mode]
    log: list[str] = []
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(_waiting_server(log), **options)) as base:
            url = f"{base}/mcp"
            async with httpx.AsyncClient(timeout=10) as client:
                session = await raw.open_session(client, url)
            async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=0.5)) as impatient:
                with pytest.raises(httpx.ReadTimeout):
                    await raw.post(impatient, url, _wait_call(1, 2.0), session)
            with anyio.fail_after(10):
                while not log:  # noqa: ASYNC110 - the tool's own record is what is checked
                    await anyio.sleep(0.05)
    assert log == [outcome]


async def test_client_refuses_json_bodies_over_its_cap() -> None:
    """A JSON body over ``max_json_body_size`` fails its request at once, naming the cap; the
    connection goes on (a smaller answer still arrives)."""
    from mcp.client import Client
    from mcp.shared.exceptions import MCPError

    from toolkernel.transports import ClientTransportOptions
    from toolkernel_http import http_client

    server = MCPServer("big", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def big(size: int) -> str:
        """``size`` bytes of text."""
        return "x" * size

    options = ClientTransportOptions(extra={"transport": "streamable", "max_json_body_size": 1_000_000})
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(server, json_response=True)) as base,
            Client(http_client(f"{base}/mcp", options), mode="legacy") as client,  # type: ignore[arg-type]
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("big", {"size": 2_000_000})
            small = await client.call_tool("big", {"size": 10})
    assert "max_json_body_size" in str(refused.value)
    assert small.content[0].text == "x" * 10  # type: ignore[union-attr]


def _send_head(port: int, head: bytes) -> bytes:
    """Send ``head`` (as much of it as the server reads) on a raw socket; what the server answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        with contextlib.suppress(OSError):  # the server may answer before the head is all sent
            sock.sendall(head)
        return _recv_all(sock)


def _refusal(answer: bytes) -> tuple[bytes, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], json.loads(body)["error"]["message"]


async def test_oversized_request_headers_are_refused_with_431_before_the_body() -> None:
    """A 16 MB header (the body never sent) gets 431 naming the limit; other clients are served."""
    with anyio.fail_after(TIMEOUT_S):
        async with _served() as base:
            port = int(base.rsplit(":", 1)[1])
            head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + b"x" * (16 << 20)
            answer = await anyio.to_thread.run_sync(_send_head, port, head)
            async with httpx.AsyncClient(timeout=10) as client:
                served = await raw.open_session(client, f"{base}/mcp")
    status, message = _refusal(answer)
    assert status == b"HTTP/1.1 431 Request Header Fields Too Large", answer[:200]
    assert "over 65536 bytes (max_header_bytes)" in message
    assert "mcp-session-id" in served


async def test_too_many_request_headers_are_refused_with_431() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with _served() as base:
            port = int(base.rsplit(":", 1)[1])
            many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
            head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many + b"Content-Length: 2\r\n\r\n{}"
            answer = await anyio.to_thread.run_sync(_send_head, port, head)
    status, message = _refusal(answer)
    assert status == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert "more than 100 request headers (max_headers)" in message


async def test_header_limits_are_options() -> None:
    """Raised limits let a 100 kB header and 150 headers through to the application; lowered ones refuse."""
    big = {"x-big": "y" * 100_000, **{f"x-h{i}": "v" for i in range(150)}}
    with anyio.fail_after(TIMEOUT_S):
        async with (
            _served(max_header_bytes=200_000, max_headers=200) as base,
            httpx.AsyncClient(timeout=10) as client,
        ):
            served = await raw.open_session(client, f"{base}/mcp", **big)
        async with _served(max_header_bytes=1_000) as base:
            port = int(base.rsplit(":", 1)[1])
            head = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: " + b"a" * 2_000 + b"\r\n\r\n"
            answer = await anyio.to_thread.run_sync(_send_head, port, head)
    assert "mcp-session-id" in served
    assert _refusal(answer) == (
        b"HTTP/1.1 431 Request Header Fields Too Large",
        "Request Header Fields Too Large: request headers over 1000 bytes (max_header_bytes)",
    )


TRUST = {
    # name: (serve options, a peer whose X-Forwarded-For names the client, a peer whose does not)
    "forwarded_allow_ips": ({"forwarded_allow_ips": "127.0.0.2, 10.0.0.0/8"}, "127.0.0.2", "127.0.0.3"),
    "default-loopback": ({}, "127.0.0.1", "127.0.0.2"),
}


@pytest.mark.parametrize("trust", list(TRUST))
async def test_per_client_quota_counts_the_client_a_trusted_proxy_forwards(
    trust: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a trusted proxy each X-Forwarded-For client has its own ``max_sessions_per_client``
    (the rightmost address that is not itself a trusted proxy); from any other peer the header
    is ignored and the peer is the client. Real connections from two local addresses."""
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)  # uvicorn's own variable: the default
    options, trusted, untrusted = TRUST[trust]

    async def opened(client: httpx.AsyncClient, url: str, forwarded_for: str) -> int:
        """Open a session (and use it, so it is not recycled); the status of ``initialize``."""
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
        init["params"] = {"protocolVersion": "2025-11-25", "capabilities": {}}
        init["params"]["clientInfo"] = {"name": "t", "version": "0"}
        headers = {**raw.HEADERS, "x-forwarded-for": forwarded_for}
        response = await client.post(url, content=json.dumps(init), headers=headers)
        if response.status_code == 200:
            session = {"mcp-session-id": response.headers["mcp-session-id"], **headers}
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            call["params"] = {"name": "echo", "arguments": {"text": "x"}}
            assert "result" in raw.answer(await raw.post(client, url, call, session), 1)
        return response.status_code

    with anyio.fail_after(TIMEOUT_S):
        async with (
            _served(max_sessions_per_client=1, **options) as base,
            httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=trusted)) as proxy,
            httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=untrusted)) as other,
        ):
            url = f"{base}/mcp"
            through_proxy = [
                await opened(proxy, url, "198.51.100.1"),
                await opened(proxy, url, "198.51.100.2"),
                await opened(proxy, url, "198.51.100.1"),  # its quota is used
                await opened(proxy, url, "198.51.100.1, 127.0.0.1"),  # the client, then a proxy
            ]
            direct = [
                await opened(other, url, "198.51.100.3"),
                await opened(other, url, "198.51.100.4"),  # the header changes nothing: same peer
            ]
    assert through_proxy[:3] == [200, 200, 429]
    # 127.0.0.1 is trusted by default, not under the explicit list: the client is then it.
    assert through_proxy[3] == (429 if trust == "default-loopback" else 200)
    assert direct == [200, 429]


def test_forwarded_allow_ips_names_a_malformed_entry() -> None:
    """A typo is an error at start-up, not a trusted name no peer address ever equals (uvicorn's way)."""
    from toolkernel.errors import ConfigError
    from toolkernel_http._serve import HTTPServerTransport

    for value, problem in [
        ("10.0.0.1, 10.0.0.300", "'10.0.0.300' is neither an IP address nor an IP network"),
        (["*", "10.0.0.1"], "'*' (trust every peer) must be the only entry"),
    ]:
        with pytest.raises(ConfigError, match=r"forwarded_allow_ips") as refused:
            HTTPServerTransport(ServeOptions(extra={"forwarded_allow_ips": value}))
        assert problem in str(refused.value)
