"""The OAuth client the conformance suite's ``auth/*`` scenarios drive: ``auth_client.py <server-url>``.

The suite starts an authorization server and a protected MCP server per scenario, sets
``MCP_CONFORMANCE_SCENARIO`` and, where the client needs credentials, passes them in
``MCP_CONFORMANCE_CONTEXT`` (JSON). This client is an :class:`~toolkernel.client.MCPClient`
whose server config carries ``auth: {type: oauth, ...}``: everything the suite checks is
what toolkernel-oauth does. The test authorization servers approve at once, so the
"browser" here is one HTTP GET of the authorization URL, whose redirect is handed back.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import httpx2

from toolkernel import Kernel
from toolkernel.client import MCPClient
from toolkernel_oauth import MemoryTokenStore, oauth_auth

TIMEOUT_S = 30.0
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def follow_authorization(url: str) -> str:
    """Open the authorization URL as a browser that approves at once; return where it was sent."""
    async with httpx2.AsyncClient(timeout=10.0) as http:
        response = await http.get(url, follow_redirects=False)
    location = response.headers.get("location")
    if response.status_code not in (301, 302, 303, 307, 308) or not location:
        raise RuntimeError(f"authorization endpoint answered {response.status_code} without a redirect")
    return str(location)


def settings_for(scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    """The ``auth`` settings a user would write for the situation ``scenario`` sets up."""
    settings: dict[str, Any] = {"type": "oauth", "store": "memory"}
    if scenario.startswith("auth/client-credentials"):
        settings.update(grant="client_credentials", client_id=context["client_id"])
        if "private_key_pem" in context:
            settings.update(
                private_key=context["private_key_pem"],
                signing_algorithm=context.get("signing_algorithm", "ES256"),
                token_endpoint_auth_method="private_key_jwt",
            )
        else:
            settings.update(client_secret=context["client_secret"])
    elif scenario == "auth/wif-jwt-bearer":
        settings.update(grant="jwt_bearer", client_id=context["client_id"], assertion=context["valid_jwt"])
    elif scenario == "auth/enterprise-managed-authorization":
        settings.update(
            grant="enterprise",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            token_endpoint_auth_method="client_secret_basic",
            identity_provider={
                "token_endpoint": context["idp_token_endpoint"],
                "client_id": context["idp_client_id"],
                "id_token": context["idp_id_token"],
            },
        )
    else:
        settings.update(client_metadata_url=CIMD_URL, redirect_uri="http://localhost:3000/callback")
        if "client_id" in context:
            settings.update(client_id=context["client_id"], client_secret=context.get("client_secret"))
    return settings


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    """Connect to ``url`` through the OAuth flow the scenario calls for, list and call tools."""
    auth = oauth_auth(
        url, settings_for(scenario, context), store=MemoryTokenStore(), authorizer=follow_authorization
    )
    config = {
        "servers": {
            "server": {
                "url": url,
                "transport": "streamable-http",
                "protocol": os.environ.get("TK_PROTOCOL", "auto"),
            }
        },
        "throw_on_load_error": True,
        "prefix_tool_name_with_server_name": False,
        "policy": {"http_reconnect": {"max_attempts": 0}, "heartbeat_interval": None},
    }
    with anyio.fail_after(TIMEOUT_S):
        async with MCPClient(config, kernel=Kernel(), persist=False, auth={"server": auth}) as client:
            tools = await client.list_tools()
            for tool in tools:
                if tool.name.endswith("test-tool") or tool.name == "test_tool":
                    await client.call_tool(tool.name, {})


def main() -> None:
    """Entry point: the server URL is the last argument; scenario and context come from the environment."""
    if len(sys.argv) < 2:
        raise SystemExit("usage: auth_client.py SERVER_URL  (MCP_CONFORMANCE_SCENARIO names the scenario)")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    anyio.run(run, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), context)


if __name__ == "__main__":
    main()
