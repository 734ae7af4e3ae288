"""The resource server, against real sockets: metadata, 401/403 challenges, scopes, ctx.auth everywhere."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
import structlog
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from toolkernel.client import MCPClient
from toolkernel_http import asgi_app
from toolkernel_oauth.resource import ResourceServer
from toolkernel_oauth.settings import JWTSettings
from toolkernel_oauth.validators import JWTValidator

from .conftest import ISSUER, Issuer, scoped_server, serving_app

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
async def protected(issuer: Issuer) -> AsyncIterator[dict[str, Any]]:
    """A scoped toolkernel server behind JWT validation, and the JWKS it trusts, both on loopback."""
    async with serving_app(issuer.app()) as jwks_base:
        validator = JWTValidator(JWTSettings(issuer=ISSUER, jwks_uri=f"{jwks_base}/jwks"))
        guard = ResourceServer(validator, authorization_servers=(ISSUER,), scopes_supported=("mcp", "admin"))
        async with serving_app(asgi_app(scoped_server(), auth=guard)) as base:
            yield {"base": base, "url": f"{base}/mcp", "issuer": issuer, "guard": guard}


async def post(url: str, body: Any, token: str | None = None, **headers: str) -> httpx2.Response:
    extra = {"authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=body, headers={**HEADERS, **extra, **headers})


def client(url: str, token: str, **server: Any) -> MCPClient:
    config = {
        "servers": {"s": {"url": url, "headers": {"Authorization": f"Bearer {token}"}, **server}},
        "throw_on_load_error": True,
        "prefix_tool_name_with_server_name": False,
        "policy": {"http_reconnect": {"max_attempts": 0}, "heartbeat_interval": None},
    }
    return MCPClient(config, persist=False)


async def test_no_token_gets_401_naming_the_metadata(protected: dict[str, Any]) -> None:
    base, url = protected["base"], protected["url"]
    response = await post(url, INIT)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="mcp admin"' in challenge
    async with httpx2.AsyncClient() as http:
        suffixed = (await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")).json()
        root = (await http.get(f"{base}/.well-known/oauth-protected-resource")).json()
    assert suffixed == root
    assert suffixed["resource"] == url
    assert suffixed["authorization_servers"] == [ISSUER]
    assert suffixed["scopes_supported"] == ["mcp", "admin"]


def _forged(kind: str, issuer: Issuer, url: str) -> str:
    """A token wrong in exactly one way."""
    if kind == "wrong audience":
        return issuer.token("http://127.0.0.1:1/other")
    if kind == "wrong issuer":
        return issuer.token(url, iss="https://evil.test")
    if kind == "expired":
        return issuer.token(url, exp=1_000_000, iat=999_000)
    if kind == "not yet valid":
        return issuer.token(url, nbf=4_000_000_000)
    if kind == "no audience":
        return issuer.token(None)
    if kind == "bad signature":
        other = RSAKey.generate_key(2048, parameters={"kid": issuer.key.kid})
        return jwt.encode(
            {"alg": "RS256", "kid": issuer.key.kid}, {"iss": ISSUER, "aud": url, "exp": 4e9}, other
        )
    if kind == "alg none":
        head = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
        body = json.dumps({"iss": ISSUER, "aud": url, "sub": "ada", "exp": 4_000_000_000}).encode()
        return f"{head}.{base64.urlsafe_b64encode(body).rstrip(b'=').decode()}."
    if kind == "HS256 with the public key":
        public = json.dumps(issuer.jwks()).encode()
        return jwt.encode(
            {"alg": "HS256"}, {"iss": ISSUER, "aud": url, "exp": 4e9}, OctKey.import_key(public)
        )
    if kind == "garbage":
        return "not-a-jwt"
    if kind == "typ JWT (not an access token)":
        return issuer.token(url, "mcp", typ="JWT")
    if kind == "no sub":
        return issuer.token(url, "mcp", sub=None)
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "wrong audience",
        "wrong issuer",
        "expired",
        "not yet valid",
        "no audience",
        "bad signature",
        "alg none",
        "HS256 with the public key",
        "garbage",
        "typ JWT (not an access token)",
        "no sub",
    ],
)
async def test_bad_tokens_get_401(protected: dict[str, Any], kind: str) -> None:
    token = _forged(kind, protected["issuer"], protected["url"])
    response = await post(protected["url"], INIT, token)
    assert response.status_code == 401, kind
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert token not in response.text


async def test_valid_token_is_served(protected: dict[str, Any]) -> None:
    token = protected["issuer"].token(protected["url"], "mcp")
    response = await post(protected["url"], INIT, token)
    assert response.status_code == 200


@pytest.mark.parametrize(
    "server_options",
    [
        pytest.param({"transport": "streamable-http", "protocol": "legacy"}, id="streamable-2025"),
        pytest.param({"transport": "streamable-http", "protocol": "2026-07-28"}, id="streamable-2026"),
        pytest.param({"transport": "sse", "protocol": "legacy"}, id="legacy-sse"),
    ],
)
async def test_ctx_auth_reaches_the_tool(protected: dict[str, Any], server_options: dict[str, Any]) -> None:
    token = protected["issuer"].token(protected["url"], "mcp")
    url = protected["url"] if server_options["transport"] != "sse" else f"{protected['base']}/sse"
    with anyio.fail_after(30):
        async with client(url, token, **server_options) as c:
            out = await c.call_tool("whoami", {})
    assert json.loads(out.result.content[0].text) == {"subject": "ada", "client": "cli", "scopes": ["mcp"]}


async def test_ctx_auth_on_stateless_http(issuer: Issuer) -> None:
    async with serving_app(issuer.app()) as jwks_base:
        guard = ResourceServer(JWTValidator(JWTSettings(issuer=ISSUER, jwks_uri=f"{jwks_base}/jwks")))
        async with serving_app(asgi_app(scoped_server(), auth=guard, stateless=True)) as base:
            url = f"{base}/mcp"
            for protocol in ("legacy", "2026-07-28"):
                token = issuer.token(url, "mcp")
                with anyio.fail_after(30):
                    async with client(url, token, transport="streamable-http", protocol=protocol) as c:
                        out = await c.call_tool("whoami", {})
                assert json.loads(out.result.content[0].text)["subject"] == "ada", protocol


async def test_missing_scope_gets_403_naming_it(protected: dict[str, Any]) -> None:
    url = protected["url"]
    token = protected["issuer"].token(url, "mcp")
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "_purge", "arguments": {}}}
    response = await post(url, call, token, **{"mcp-protocol-version": "2026-07-28"})
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="admin"' in challenge
    assert "resource_metadata=" in challenge
    assert response.json()["id"] == 2  # the request's id was readable, so the answer carries it


async def test_each_refused_request_is_one_log_line_with_a_reason(protected: dict[str, Any]) -> None:
    """No token, a bad token, a token lacking a scope: one ``request refused`` line each, saying
    why, and never the token."""
    url, issuer = protected["url"], protected["issuer"]
    expired = issuer.token(url, "mcp", exp=5, iat=1)
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "_purge", "arguments": {}}}
    with structlog.testing.capture_logs() as logs:
        assert (await post(url, INIT)).status_code == 401
        assert (await post(url, INIT, expired)).status_code == 401
        assert (await post(url, INIT, issuer.token(url, "mcp", typ="JWT"))).status_code == 401
        assert (await post(url, call, issuer.token(url, "mcp"))).status_code == 403
    refused = [entry for entry in logs if entry["event"] == "request refused"]
    assert [(r["status"], r["error"]) for r in refused] == [
        (401, None),
        (401, "invalid_token"),
        (401, "invalid_token"),
        (403, "insufficient_scope"),
    ]
    reasons = [r["reason"] for r in refused]
    assert reasons[0] == "no Authorization header"
    assert "Expired" in reasons[1]
    assert "at+jwt" in reasons[2]
    assert reasons[3] == "missing scope(s): admin"
    assert all(r["path"] == "/mcp" and r["method"] == "POST" for r in refused)
    assert expired not in repr(logs)


async def test_tool_hidden_from_a_caller_without_its_scope(protected: dict[str, Any]) -> None:
    url, issuer = protected["url"], protected["issuer"]
    async with client(url, issuer.token(url, "mcp")) as c:
        names = {t.name for t in await c.list_tools()}
    assert names == {"echo", "whoami"}
    async with client(url, issuer.token(url, "mcp admin")) as c:
        names = {t.name for t in await c.list_tools()}
        out = await c.call_tool("_purge", {})
    assert names == {"echo", "whoami", "_purge"}
    assert out.result.content[0].text == "purged"


async def test_token_never_in_logs_or_errors(
    protected: dict[str, Any], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    url, issuer = protected["url"], protected["issuer"]
    tokens = [issuer.token(url, "mcp"), issuer.token("http://elsewhere/mcp"), issuer.token(url, exp=5, iat=1)]
    bodies = [(await post(url, INIT, t)).text for t in tokens]
    async with client(url, tokens[0]) as c:
        await c.call_tool("echo", {"text": "hi"})
    out, err = capfd.readouterr()
    for token in tokens:
        for text in (caplog.text, out, err, *bodies):
            assert token not in text


async def test_origin_checks_and_cors_keep_working(protected: dict[str, Any]) -> None:
    url, issuer = protected["url"], protected["issuer"]
    token = issuer.token(url, "mcp")
    refused = await post(url, INIT, token, origin="http://evil.example")
    assert refused.status_code == 403
    origin = "http://localhost:5173"
    async with httpx2.AsyncClient() as http:
        preflight = await http.options(
            url,
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == origin
    unauthorized = await post(url, INIT, None, origin=origin)
    assert unauthorized.status_code == 401
    assert unauthorized.headers["access-control-allow-origin"] == origin
    assert "www-authenticate" in unauthorized.headers["access-control-expose-headers"].lower()


async def test_unknown_kid_refetches_the_keys(protected: dict[str, Any]) -> None:
    url, issuer = protected["url"], protected["issuer"]
    assert (await post(url, INIT, issuer.token(url, "mcp"))).status_code == 200
    before = issuer.fetches
    issuer.key = RSAKey.generate_key(2048, parameters={"kid": "k2"})  # the server rotates its key
    validator = protected["guard"].verifier
    validator._fetched_at -= validator.settings.jwks_refresh_min_s + 1  # the refresh floor has passed
    assert (await post(url, INIT, issuer.token(url, "mcp"))).status_code == 200
    assert issuer.fetches == before + 1


async def test_resources_and_prompts_need_their_scopes(issuer: Issuer) -> None:
    from toolkernel import Kernel, MCPServer, Resource, prompt

    server = MCPServer("scoped", kernel=Kernel(load_entry_points=False))
    server.add_resource(Resource(uri="notes://open", name="open", read=lambda: "open"))
    server.add_resource(Resource(uri="notes://secret", name="secret", read=lambda: "s3", scopes=("admin",)))
    server.add_prompt(prompt(name="summarise", scopes=["admin"])(lambda: "Summarise the secret notes."))
    async with serving_app(issuer.app()) as jwks_base:
        guard = ResourceServer(JWTValidator(JWTSettings(issuer=ISSUER, jwks_uri=f"{jwks_base}/jwks")))
        async with serving_app(asgi_app(server, auth=guard)) as base:
            url = f"{base}/mcp"
            async with client(url, issuer.token(url, "mcp")) as c:
                snapshot = c.get_servers()["s"]
                assert [r.uri for r in snapshot.resources] == ["notes://open"]
                assert snapshot.prompts == []
            read = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "resources/read",
                "params": {"uri": "notes://secret"},
            }
            refused = await post(
                url, read, issuer.token(url, "mcp"), **{"mcp-protocol-version": "2026-07-28"}
            )
            assert refused.status_code == 403
            assert 'scope="admin"' in refused.headers["www-authenticate"]
            async with client(url, issuer.token(url, "mcp admin")) as c:
                snapshot = c.get_servers()["s"]
                assert sorted(r.uri for r in snapshot.resources) == ["notes://open", "notes://secret"]
                assert [p.name for p in snapshot.prompts] == ["summarise"]


def test_scopes_must_be_scope_tokens() -> None:
    from toolkernel import tool
    from toolkernel.errors import ConfigError

    assert tool(name="t", scopes="a b")(lambda: None).scopes == ("a", "b")
    with pytest.raises(ConfigError, match="not an OAuth scope token"):
        tool(name="t", scopes=["a b"])(lambda: None)
