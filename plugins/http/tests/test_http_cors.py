"""CORS: browser clients from an allowed origin can preflight, call, and read the session id."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from toolkernel import Kernel, MCPServer
from toolkernel._builtin.commands import serve_options
from toolkernel.cli import build_parser, main
from toolkernel.errors import ConfigError
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


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "2001:db8::1"])
def test_wide_bind_without_allowed_hosts_refuses_to_start(tk_server: MCPServer, host: str) -> None:
    """Off loopback with no allowed_hosts (and no authentication) any web page could drive the
    tools; the app refuses to be built and says what to set."""
    with pytest.raises(ConfigError) as refused:
        asgi_app(tk_server, host=host)
    message = str(refused.value)
    assert host in message
    assert "allowed_hosts" in message
    assert "--insecure" in message


def test_wide_bind_is_served_with_allowed_hosts_authentication_or_insecure(tk_server: MCPServer) -> None:
    asgi_app(tk_server, host="0.0.0.0", allowed_hosts=("tools.example.com",))
    asgi_app(tk_server, host="0.0.0.0", authenticated=True)
    asgi_app(tk_server, host="0.0.0.0", insecure=True)
    asgi_app(tk_server, host="127.0.0.1")  # loopback needs none of them
    asgi_app(tk_server, host="tools.example.com")  # a name is what clients use: it is the allowed host


def test_serve_refuses_a_wide_bind_and_says_what_to_set(capsys: pytest.CaptureFixture[str]) -> None:
    """``toolkernel serve --host 0.0.0.0`` exits 2 before binding, naming the fix."""
    code = main(["serve", "docs/examples/echo_server.py:app", "--transport", "http", "--host", "0.0.0.0"])
    error = capsys.readouterr().err
    assert code == 2
    assert "allowed_hosts" in error
    assert "--insecure" in error


def test_serve_insecure_flag_reaches_the_transport() -> None:
    args = build_parser(Kernel()).parse_args(["serve", "x.py:app", "--transport", "http", "--insecure"])
    assert serve_options(args).extra == {"insecure": True}
    plain = build_parser(Kernel()).parse_args(["serve", "x.py:app"])
    assert serve_options(plain).extra == {}
