"""CORS: browser clients from an allowed origin can preflight, call, and read the session id."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from toolkernel import MCPServer
from toolkernel_http import asgi_app

from .conftest import initialize, serving

pytestmark = pytest.mark.anyio
TIMEOUT_S = 60.0
INIT = initialize()
PREFLIGHT = {
    "access-control-request-method": "POST",
    "access-control-request-headers": "content-type, mcp-protocol-version, mcp-session-id",
}


async def test_preflight_and_call_from_a_loopback_page(tk_server: MCPServer) -> None:
    """A page on another loopback port (an Inspector UI, say) preflights, initializes, sees the session id."""
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server)) as base, httpx.AsyncClient() as raw:
            origin = "http://localhost:6274"
            preflight = await raw.options(f"{base}/mcp", headers={"origin": origin, **PREFLIGHT})
            assert preflight.status_code == 200, preflight.text
            assert preflight.headers["access-control-allow-origin"] == origin
            allowed = preflight.headers["access-control-allow-headers"].lower()
            assert {"mcp-session-id", "mcp-protocol-version", "content-type"} <= {
                h.strip() for h in allowed.split(",")
            }
            assert "DELETE" in preflight.headers["access-control-allow-methods"]

            response = await raw.post(
                f"{base}/mcp",
                content=json.dumps(INIT),
                headers={
                    "origin": origin,
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                },
            )
            assert response.status_code == 200, response.text
            assert response.headers["access-control-allow-origin"] == origin
            assert "mcp-session-id" in response.headers["access-control-expose-headers"].lower()
            assert response.headers["mcp-session-id"]


async def test_preflight_from_a_foreign_origin_is_refused(tk_server: MCPServer) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server)) as base, httpx.AsyncClient() as raw:
            origin = "http://evil.example.com"
            preflight = await raw.options(f"{base}/mcp", headers={"origin": origin, **PREFLIGHT})
            assert preflight.status_code == 403
            assert "access-control-allow-origin" not in preflight.headers
            assert json.loads(preflight.content)["error"]["message"] == "Forbidden: Origin not allowed"


async def test_cors_can_be_turned_off(tk_server: MCPServer) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with serving(asgi_app(tk_server, cors=False)) as base, httpx.AsyncClient() as raw:
            origin = "http://localhost:6274"
            preflight = await raw.options(f"{base}/mcp", headers={"origin": origin, **PREFLIGHT})
            assert "access-control-allow-origin" not in preflight.headers
