"""Stateful sessions on the wire: one GET stream, idle timeout, the session cap, cancellation,
resuming a finished request, and the body limit on chunked uploads."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from toolkernel import Kernel, MCPServer, ToolContext
from toolkernel_http import asgi_app

from . import _raw as raw
from .conftest import initialize, serving

pytestmark = pytest.mark.anyio
TIMEOUT_S = 60.0
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _server() -> MCPServer:
    server = MCPServer("sessions", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    async def wait(seconds: float) -> str:
        """Sleep, then say so."""
        await anyio.sleep(seconds)
        return "waited"

    @server.tool
    async def poll(ctx: ToolContext) -> str:
        """Try to end the response early (SSE polling)."""
        return f"closed={await ctx.close_sse_stream()}"

    return server


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """Server-sent events of ``response`` as dicts of their fields."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
            continue
        name, _, value = line.partition(":")
        event[name] = value[1:] if value.startswith(" ") else value
    if event:
        yield event


async def _open(http: httpx.AsyncClient, url: str, version: str = "2025-06-18") -> dict[str, str]:
    """Initialize a session; the headers later requests carry."""
    init = initialize(version, request_id=0)
    response = await http.post(url, json=init, headers=ACCEPT)
    assert response.status_code == 200, response.text
    headers = {
        **ACCEPT,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": version,
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=initialized, headers=headers)).status_code == 202
    return headers


def _call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def _answer(http: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    messages = [
        json.loads(line[5:])
        for line in response.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]
    return next(m for m in messages if m.get("id") == body["id"])


async def test_one_get_stream_per_session() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(_server())) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            headers = await _open(http, url)
            get_headers = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
            async with http.stream("GET", url, headers=get_headers) as first:
                assert first.status_code == 200
                second = await http.get(url, headers=get_headers)
                assert second.status_code == 409
                assert json.loads(second.content)["error"]["message"].startswith("Conflict")
            # The first stream is gone: a new one may open (the server noticed the disconnect).
            with anyio.fail_after(10):
                while True:
                    async with http.stream("GET", url, headers=get_headers) as again:
                        if again.status_code == 200:
                            break
                    await anyio.sleep(0.05)


async def test_idle_session_is_closed() -> None:
    with anyio.fail_after(TIMEOUT_S):
        app = asgi_app(_server(), session_idle_timeout=0.3)
        async with serving(app) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            headers = await _open(http, url)
            assert (await _answer(http, url, headers, _call(1, "echo", {"text": "hi"})))["result"]
            await anyio.sleep(1.0)
            response = await http.post(url, json=_call(2, "echo", {"text": "hi"}), headers=headers)
            assert response.status_code == 404


async def test_session_cap_answers_503_and_frees_on_delete() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(_server(), max_sessions=1)) as base,
            httpx.AsyncClient(timeout=30) as http,
        ):
            url = f"{base}/mcp"
            headers = await _open(http, url)
            assert (await _answer(http, url, headers, _call(1, "echo", {"text": "in use"})))["result"]
            init = initialize()
            refused = await http.post(url, json=init, headers=ACCEPT)
            assert refused.status_code == 503
            assert json.loads(refused.content)["error"]["message"] == "Too many open sessions"
            assert (await http.delete(url, headers=headers)).status_code == 200
            assert (
                await http.post(url, json=_call(1, "echo", {"text": "x"}), headers=headers)
            ).status_code == 404
            await _open(http, url)


async def test_abandoned_sessions_never_lock_out_a_new_client() -> None:
    """A flood of sessions that never make a second request cannot fill the table: at the cap
    the oldest of them makes room, so a well-behaved client is still served."""
    with anyio.fail_after(TIMEOUT_S):
        app = asgi_app(_server(), max_sessions=20)
        async with serving(app) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            for _ in range(60):
                response = await http.post(url, json=initialize(), headers=ACCEPT)
                assert response.status_code == 200, response.text
            assert app.sessions is not None
            assert len(app.sessions.sessions) == 20
            headers = await _open(http, url)
            assert (await _answer(http, url, headers, _call(1, "echo", {"text": "served"})))["result"]
            # Sessions in use are never taken: the flood now only recycles its own.
            for _ in range(40):
                assert (await http.post(url, json=initialize(), headers=ACCEPT)).status_code == 200
            assert (await _answer(http, url, headers, _call(2, "echo", {"text": "still"})))["result"]


async def test_per_client_quota_answers_429_and_leaves_others_served() -> None:
    """One client (here: one address) holds at most ``max_sessions_per_client`` sessions in use."""
    with anyio.fail_after(TIMEOUT_S):
        transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with (
            serving(asgi_app(_server(), max_sessions_per_client=2)) as base,
            httpx.AsyncClient(timeout=30) as http,
            httpx.AsyncClient(timeout=30, transport=transport) as other,
        ):
            url = f"{base}/mcp"
            for request_id in range(2):
                headers = await _open(http, url)
                assert (await _answer(http, url, headers, _call(request_id, "echo", {"text": "x"})))["result"]
            refused = await http.post(url, json=initialize(), headers=ACCEPT)
            other_headers = await _open(other, url)
            served = await _answer(other, url, other_headers, _call(9, "echo", {"text": "other"}))
    assert refused.status_code == 429
    assert "max_sessions_per_client" in json.loads(refused.content)["error"]["message"]
    assert served["result"]["content"][0]["text"] == "other"


async def test_session_that_never_makes_a_second_request_is_reaped_early() -> None:
    with anyio.fail_after(TIMEOUT_S):
        app = asgi_app(_server(), unused_session_timeout=0.3)
        async with serving(app) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            unused = await _open(http, url)
            used = await _open(http, url)
            assert (await _answer(http, url, used, _call(1, "echo", {"text": "hi"})))["result"]
            await anyio.sleep(1.0)
            gone = await http.post(url, json=_call(2, "echo", {"text": "hi"}), headers=unused)
            kept = await _answer(http, url, used, _call(3, "echo", {"text": "hi"}))
    assert gone.status_code == 404
    assert kept["result"]["content"][0]["text"] == "hi"


async def test_cancelled_request_ends_its_stream_and_the_session_goes_on() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(_server())) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            headers = await _open(http, url)
            async with http.stream(
                "POST", url, json=_call(7, "wait", {"seconds": 30}), headers=headers
            ) as slow:
                assert slow.status_code == 200
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
                await anyio.sleep(0.2)
                assert (await http.post(url, json=cancel, headers=headers)).status_code == 202
                messages = [json.loads(e["data"]) async for e in _events(slow) if e.get("data")]
            assert messages == [
                {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
            ]
            assert (await _answer(http, url, headers, _call(8, "echo", {"text": "still"})))["result"]


async def test_resuming_a_finished_request_replays_its_answer_and_ends() -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(_server())) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            headers = await _open(http, url, version="2025-11-25")
            async with http.stream(
                "POST", url, json=_call(3, "wait", {"seconds": 0.3}), headers=headers
            ) as call:
                priming = await _events(call).__anext__()  # read the priming event, then hang up
            assert priming["data"] == ""
            await anyio.sleep(0.8)  # the tool finishes with nobody listening; its answer is stored
            resume = {**headers, "last-event-id": priming["id"]}
            del resume["content-type"]
            async with http.stream("GET", url, headers=resume) as replay:
                assert replay.status_code == 200
                messages = [json.loads(e["data"]) async for e in _events(replay) if e.get("data")]
            assert messages == [
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "result": {"content": [{"type": "text", "text": "waited"}], "isError": False},
                }
            ]


async def test_chunked_body_over_the_limit_is_refused() -> None:
    with anyio.fail_after(TIMEOUT_S):
        app = asgi_app(_server(), max_body_bytes=1024)
        async with serving(app) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            headers = await _open(http, url)

            async def body() -> AsyncIterator[bytes]:
                yield json.dumps(_call(1, "echo", {"text": "x" * 4000})).encode()

            response = await http.post(url, content=body(), headers=headers)
            assert response.status_code == 413
            assert "limit is 1024 bytes" in json.loads(response.content)["error"]["message"]
            assert (await _answer(http, url, headers, _call(2, "echo", {"text": "ok"})))["result"]


async def test_a_session_answers_only_the_credential_that_opened_it() -> None:
    """Behind bearer auth, another principal presenting a session's id is told it does not exist."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from starlette.authentication import AuthCredentials, AuthenticationBackend
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.requests import HTTPConnection

    class Tokens(AuthenticationBackend):
        """Every bearer token is its own client (enough to tell two principals apart)."""

        async def authenticate(
            self, conn: HTTPConnection
        ) -> tuple[AuthCredentials, AuthenticatedUser] | None:
            token = conn.headers.get("authorization", "").removeprefix("Bearer ")
            if not token:
                return None
            return AuthCredentials([]), AuthenticatedUser(
                AccessToken(token=token, client_id=token, scopes=[])
            )

    app = AuthenticationMiddleware(asgi_app(_server()), backend=Tokens())
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(app) as base,
            httpx.AsyncClient(timeout=30, headers={"authorization": "Bearer alice"}) as alice,
        ):
            url = f"{base}/mcp"
            headers = await _open(alice, url)
            mallory = {**headers, "authorization": "Bearer mallory"}
            stolen = await alice.post(url, json=_call(1, "echo", {"text": "x"}), headers=mallory)
            assert stolen.status_code == 404
            assert (await alice.delete(url, headers=mallory)).status_code == 404
            assert (await _answer(alice, url, headers, _call(2, "echo", {"text": "mine"})))["result"]


async def test_json_mode_has_no_stream_to_close() -> None:
    """In JSON-response mode a 2025-11-25 client gets its answer; the tool learns there was no stream."""
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(_server(), json_response=True)) as base,
            httpx.AsyncClient(timeout=30) as http,
        ):
            url = f"{base}/mcp"
            headers = await _open(http, url, version="2025-11-25")
            response = await http.post(url, json=_call(1, "poll", {}), headers=headers)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/json")
            assert json.loads(response.content)["result"]["content"][0]["text"] == "closed=False"


async def test_without_an_event_store_last_event_id_opens_the_plain_stream() -> None:
    """Nothing is stored to replay, so ``Last-Event-ID`` is ignored: the GET is the session's stream."""
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(_server(), resumable=False)) as base,
            httpx.AsyncClient(timeout=30) as http,
        ):
            url = f"{base}/mcp"
            headers = await _open(http, url, version="2025-11-25")
            get = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
            async with http.stream("GET", url, headers={**get, "last-event-id": "17"}) as stream:
                assert stream.status_code == 200
                assert (await http.get(url, headers=get)).status_code == 409


@pytest.mark.parametrize("json_response", [False, True])
async def test_reinitialize_is_refused_and_leaves_the_session_intact(
    tk_server: MCPServer, json_response: bool
) -> None:
    """A second ``initialize`` on an established session, valid or not, is refused with an error
    carrying its id; the session keeps its protocol version and keeps serving."""
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server, json_response=json_response)) as base,
            httpx.AsyncClient(timeout=10) as client,
        ):
            url = f"{base}/mcp"
            session = await raw.open_session(client, url, "2025-11-25")
            invalid = {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": 7}}
            refused_invalid = raw.answer(await raw.post(client, url, invalid, session), 5)
            valid = initialize("2025-03-26", request_id=6)
            refused_valid = raw.answer(await raw.post(client, url, valid, session), 6)
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
            call["params"] = {"name": "echo", "arguments": {"text": "intact"}}
            after = await raw.post(client, url, call, session)
    assert refused_invalid["error"]["code"] == -32600
    assert "already initialized" in refused_invalid["error"]["message"]
    assert refused_valid["error"]["code"] == -32600
    assert raw.answer(after, 7)["result"]["content"][0]["text"] == "intact"
    if not json_response:
        # Still a 2025-11-25 session: its streams open with a priming event.
        assert after.text.startswith("id: ")
