"""Interop with the ``mcp`` SDK's own client and server: both protocol eras, both HTTP transports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer as SDKServer
from mcp.server.transport_security import TransportSecuritySettings

from toolkernel import MCPServer
from toolkernel.transports import ClientTransportOptions
from toolkernel_http import asgi_app, http_client

from .conftest import serving

pytestmark = pytest.mark.anyio
TIMEOUT_S = 60.0


async def _echo_through(client: Client) -> str:
    result = await client.call_tool("echo", {"text": "héllo"})
    assert not result.is_error
    return str(result.content[0].text)  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    "options",
    [{}, {"json_response": True}, {"stateless": True}, {"stateless": True, "json_response": True}],
    ids=["stateful-sse", "stateful-json", "stateless-sse", "stateless-json"],
)
async def test_sdk_client_over_streamable_http(
    tk_server: MCPServer, mode: str, options: dict[str, Any]
) -> None:
    """The SDK client, in both eras, calls a tool on every Streamable HTTP flavour."""
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server, **options)) as base,
            Client(streamable_http_client(f"{base}/mcp"), mode=mode) as client,
        ):  # type: ignore[arg-type]
            assert await _echo_through(client) == "héllo"
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"echo", "header"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_over_legacy_sse(tk_server: MCPServer, mode: str) -> None:
    """The SDK's legacy SSE client reaches the SSE endpoints served next to /mcp."""
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server)) as base,
            Client(sse_client(f"{base}/sse"), mode=mode) as client,
        ):  # type: ignore[arg-type]
            assert await _echo_through(client) == "héllo"


def _sdk_server() -> SDKServer:
    server = SDKServer("sdk-peer")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


@pytest.mark.parametrize("transport", ["auto", "streamable"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_our_client_against_sdk_streamable_http(transport: str, mode: str) -> None:
    """Our client transport against the SDK's own MCPServer over Streamable HTTP."""
    peer = _sdk_server()
    options = ClientTransportOptions(extra={"transport": transport})
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(peer.streamable_http_app()) as base,
            Client(http_client(f"{base}/mcp", options), mode=mode) as client,
        ):  # type: ignore[arg-type]
            assert await _echo_through(client) == "héllo"


@pytest.mark.parametrize("transport", ["auto", "sse"])
async def test_our_client_against_sdk_sse(transport: str) -> None:
    """Our client against the SDK's SSE-only server: explicitly, or by falling back from Streamable HTTP."""
    peer = _sdk_server()
    app = peer.sse_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    options = ClientTransportOptions(extra={"transport": transport})
    with anyio.fail_after(TIMEOUT_S):
        async with serving(app) as base, Client(http_client(f"{base}/sse", options), mode="legacy") as client:  # type: ignore[arg-type]
            assert await _echo_through(client) == "héllo"


async def test_our_client_sends_custom_headers(tk_server: MCPServer) -> None:
    """``ClientTransportOptions.headers`` reach the server on every request."""
    options = ClientTransportOptions(headers={"x-tenant": "acme"})
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server)) as base,
            Client(http_client(f"{base}/mcp", options), mode="legacy") as client,
        ):  # type: ignore[arg-type]
            result = await client.call_tool("header", {"name": "x-tenant"})
            assert result.content[0].text == "acme"  # type: ignore[union-attr]


class _Bearer(httpx2.Auth):
    """Adds a bearer token to every request, as an OAuth provider would."""

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        request.headers["authorization"] = "Bearer t0ken"
        yield request


@pytest.mark.parametrize("transport", ["streamable", "sse"])
async def test_our_client_uses_injected_factory_and_auth(tk_server: MCPServer, transport: str) -> None:
    """``http_client_factory`` builds the httpx2 client (with our timeouts); ``auth`` signs every request."""
    made: list[httpx2.Timeout] = []

    def factory(headers: Any = None, timeout: Any = None, auth: Any = None) -> httpx2.AsyncClient:
        made.append(timeout)
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth)

    options = ClientTransportOptions(
        connect_timeout=3.0,
        read_timeout=42.0,
        extra={"transport": transport, "http_client_factory": factory, "auth": _Bearer()},
    )
    path = "/mcp" if transport == "streamable" else "/sse"
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server)) as base,
            Client(http_client(f"{base}{path}", options), mode="legacy") as client,  # type: ignore[arg-type]
        ):
            result = await client.call_tool("header", {"name": "authorization"})
            assert result.content[0].text == "Bearer t0ken"  # type: ignore[union-attr]
    assert made
    assert made[0].connect == 3.0
    assert made[0].read == 42.0


@pytest.mark.parametrize(("options", "advertised"), [({}, True), ({"stateless": True}, False)])
async def test_list_changed_is_advertised_only_where_it_can_be_delivered(
    tk_server: MCPServer, options: dict[str, Any], advertised: bool
) -> None:
    """Stateful sessions advertise ``listChanged`` and deliver it on the GET stream; stateless ones don't."""
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(tk_server, **options)) as base,
            Client(
                streamable_http_client(f"{base}/mcp"), mode="legacy", message_handler=on_message
            ) as client,
        ):  # type: ignore[arg-type]
            capabilities = client.server_capabilities
            assert capabilities.tools is not None
            assert capabilities.tools.list_changed is advertised
            assert capabilities.prompts is None or capabilities.prompts.list_changed is advertised
            if advertised:
                await _echo_through(client)  # the session is live, and so is its GET stream
                with anyio.fail_after(10):
                    while not changed.is_set():
                        await tk_server.notify_list_changed("tools")
                        with anyio.move_on_after(0.2):
                            await changed.wait()
