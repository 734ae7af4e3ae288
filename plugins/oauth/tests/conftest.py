"""Shared fixtures: a JWT issuer with a JWKS served on loopback, and protected toolkernel servers."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolkernel import Kernel, MCPServer, ToolContext, tool

STARTUP_TIMEOUT_S = 60.0
ISSUER = "https://issuer.test"


def loopback_socket() -> socket.socket:
    """A listening socket on 127.0.0.1 with a free port (so a URL is known before the app exists)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def serving_app(app: Any, sock: socket.socket | None = None) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on ``sock`` (default: a free loopback port); yield its base URL."""
    sock = sock or loopback_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(STARTUP_TIMEOUT_S):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
                await anyio.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
    sock.close()


class Issuer:
    """Signs JWT access tokens with an RSA key whose public half it publishes as a JWKS."""

    def __init__(self, issuer: str = ISSUER, kid: str = "k1") -> None:
        self.issuer = issuer
        self.key = RSAKey.generate_key(2048, parameters={"kid": kid})
        self.fetches = 0

    def jwks(self) -> dict[str, Any]:
        return KeySet([self.key]).as_dict(private=False)

    def token(self, audience: str | None, scopes: str = "", typ: str = "at+jwt", **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "ada",
            "client_id": "cli",
            "iat": now,
            "exp": now + 300,
            "scope": scopes,
            **claims,
        }
        if audience is not None:
            body["aud"] = audience
        body = {k: v for k, v in body.items() if v is not None}  # a claim given as None is left out
        return jwt.encode({"alg": "RS256", "kid": self.key.kid, "typ": typ}, body, self.key)

    def app(self) -> Starlette:
        async def jwks(request: Any) -> JSONResponse:
            self.fetches += 1
            return JSONResponse(self.jwks())

        return Starlette(routes=[Route("/jwks", jwks)])


def scoped_server() -> MCPServer:
    """A server with an open tool, a tool needing ``admin``, and a tool reporting ``ctx.auth``."""
    server = MCPServer("oauth-test", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    def whoami(ctx: ToolContext) -> dict[str, Any]:
        """Who is calling, as the tool sees it."""
        auth = ctx.auth
        if auth is None:
            return {"auth": None}
        return {"subject": auth.subject, "client": auth.client_id, "scopes": list(auth.scopes)}

    server.add_tool(tool(scopes=["admin"])(_purge))
    return server


def _purge() -> str:
    """Delete everything (needs the admin scope)."""
    return "purged"


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()
