"""Bad requests get the right status and a JSON-RPC error body, and never disturb other sessions."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from toolkernel import MCPServer
from toolkernel_http import asgi_app

from .conftest import initialize, serving

pytestmark = pytest.mark.anyio
TIMEOUT_S = 60.0
ACCEPT = "application/json, text/event-stream"
INIT = initialize()


def _jsonrpc_error(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error object of ``response``; fails unless the body is one."""
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = json.loads(response.content)
    assert body["jsonrpc"] == "2.0"
    assert body["id"] in (None, INIT["id"])
    assert isinstance(body["error"]["code"], int)
    assert body["error"]["message"]
    return dict(body["error"])


def _post(content: bytes | str, **headers: str) -> dict[str, Any]:
    return {"content": content, "headers": {"accept": ACCEPT, "content-type": "application/json", **headers}}


CASES: list[tuple[str, dict[str, Any], int, int | None]] = [
    ("malformed JSON", _post("{not json"), 400, -32700),
    ("not JSON-RPC", _post('{"hello": "world"}'), 400, -32600),
    ("wrong content type", _post(json.dumps(INIT), **{"content-type": "text/plain"}), 415, -32600),
    (
        "unacceptable Accept",
        _post(json.dumps(INIT), accept="text/html"),
        406,
        None,
    ),
    ("oversized body", _post(json.dumps({**INIT, "pad": "x" * 5000})), 413, -32600),
    (
        "unknown session",
        _post(json.dumps({**INIT, "id": 2, "method": "ping"}), **{"mcp-session-id": "nope"}),
        404,
        None,
    ),
    ("foreign Origin", _post(json.dumps(INIT), origin="http://evil.example.com"), 403, -32600),
    ("foreign Host", _post(json.dumps(INIT), host="evil.example.com"), 421, -32600),
    (
        "unknown protocol version",
        _post(json.dumps(INIT), **{"mcp-protocol-version": "1999-01-01"}),
        400,
        -32600,
    ),
]


@pytest.mark.parametrize(("case", "request_kwargs", "status", "code"), CASES, ids=[c[0] for c in CASES])
async def test_bad_request_is_refused_with_jsonrpc_error(
    tk_server: MCPServer, case: str, request_kwargs: dict[str, Any], status: int, code: int | None
) -> None:
    """Each bad request gets its status and a JSON-RPC error; a live session keeps working throughout."""
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server, max_body_bytes=4096)) as base,
            Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as session,  # type: ignore[arg-type]
            httpx.AsyncClient() as raw,
        ):
            assert (await session.call_tool("echo", {"text": "before"})).content[0].text == "before"  # type: ignore[union-attr]
            response = await raw.post(f"{base}/mcp", **request_kwargs)
            assert response.status_code == status, response.text
            error = _jsonrpc_error(response)
            if code is not None:
                assert error["code"] == code
            assert (await session.call_tool("echo", {"text": "after"})).content[0].text == "after"  # type: ignore[union-attr]


@pytest.mark.parametrize("stateless", [False, True])
async def test_requests_with_invalid_ids_or_fields_are_refused_as_jsonrpc_asks(
    tk_server: MCPServer, stateless: bool
) -> None:
    """An id of a type MCP does not allow is an Invalid Request (id null), never a notification (202);
    a malformed request with a readable id is refused with that id, so its client stops waiting."""
    bad_ids = ["1.5", "null", "true", '{"a": 1}', "1e400"]
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server, stateless=stateless)) as base, httpx.AsyncClient() as raw:
            opened = await raw.post(f"{base}/mcp", **_post(json.dumps(INIT)))
            session = {"mcp-session-id": opened.headers["mcp-session-id"]} if not stateless else {}
            for bad_id in bad_ids:
                body = f'{{"jsonrpc": "2.0", "id": {bad_id}, "method": "ping"}}'
                refused = await raw.post(f"{base}/mcp", **_post(body, **session))
                assert refused.status_code == 400, (bad_id, refused.text)
                assert json.loads(refused.content)["error"]["code"] == -32600
                assert json.loads(refused.content)["id"] is None
            malformed = '{"jsonrpc": "2.0", "id": "r-7", "method": "tools/list", "params": 5}'
            answered = await raw.post(f"{base}/mcp", **_post(malformed, **session))
    assert answered.status_code == 400
    assert json.loads(answered.content)["id"] == "r-7"
    assert json.loads(answered.content)["error"]["code"] == -32600


async def test_unsupported_protocol_version_names_the_supported_ones(tk_server: MCPServer) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server)) as base, httpx.AsyncClient() as raw:
            ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            response = await raw.post(f"{base}/mcp", **_post(ping, **{"mcp-protocol-version": "2099-01-01"}))
    message = _jsonrpc_error(response)["message"]
    assert response.status_code == 400
    assert "MCP-Protocol-Version '2099-01-01'" in message
    assert "2025-11-25" in message


async def test_deleted_session_answers_404(tk_server: MCPServer) -> None:
    """DELETE ends a session: its id then gets 404 with a JSON-RPC error."""
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server)) as base, httpx.AsyncClient() as raw:
            opened = await raw.post(f"{base}/mcp", **_post(json.dumps(INIT)))
            session = opened.headers["mcp-session-id"]
            assert (await raw.delete(f"{base}/mcp", headers={"mcp-session-id": session})).status_code == 200
            ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            gone = await raw.post(f"{base}/mcp", **_post(ping, **{"mcp-session-id": session}))
            assert gone.status_code == 404
            _jsonrpc_error(gone)


@pytest.mark.parametrize(
    ("path", "method", "status"),
    [("/messages/?session_id=0123456789abcdef0123456789abcdef", "POST", 404), ("/nowhere", "GET", 404)],
)
async def test_legacy_and_unknown_paths_answer_jsonrpc_errors(
    tk_server: MCPServer, path: str, method: str, status: int
) -> None:
    """Plain-text refusals from the SDK's SSE transport and the router become JSON-RPC errors too."""
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server)) as base, httpx.AsyncClient() as raw:
            response = await raw.request(method, f"{base}{path}", **_post(json.dumps(INIT)))
            assert response.status_code == status
            _jsonrpc_error(response)


async def test_localhost_names_are_accepted(tk_server: MCPServer) -> None:
    """Host ``localhost:PORT`` and Origin ``http://localhost:PORT`` pass the DNS-rebinding checks."""
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server)) as base, httpx.AsyncClient() as raw:
            port = base.rsplit(":", 1)[1]
            host = f"localhost:{port}"
            response = await raw.post(
                f"{base}/mcp", **_post(json.dumps(INIT), host=host, origin=f"http://{host}")
            )
            assert response.status_code == 200
