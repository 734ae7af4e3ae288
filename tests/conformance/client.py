"""The client the official MCP conformance suite drives: ``python tests/conformance/client.py <server-url>``.

The suite sets ``MCP_CONFORMANCE_SCENARIO`` and checks, from its side of the wire,
that this client behaves: the handshake, tool calls, applying elicitation defaults
(SEP-1034), and reconnecting after the server's ``retry`` delay with
``Last-Event-ID`` (SEP-1699). The connection goes through the kernel's client
transport registry, so the URL is reached by toolkernel-http's client transport.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.client import Client
from mcp_types import ElicitRequestParams, ElicitResult, Implementation

from toolkernel import Kernel

TIMEOUT_S = 60.0


async def accept_with_defaults(context: Any, params: ElicitRequestParams) -> ElicitResult:
    """Accept every elicitation, answering each field with the default its schema gives."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: field["default"]
        for name, field in (schema.get("properties") or {}).items()
        if isinstance(field, dict) and "default" in field
    }
    return ElicitResult(action="accept", content=content)


async def run(url: str, scenario: str) -> None:
    """Connect to ``url`` and do what ``scenario`` expects of a client."""
    kernel = Kernel()
    with anyio.fail_after(TIMEOUT_S):
        async with Client(
            kernel.client_transport(url),
            mode="legacy",
            client_info=Implementation(name="toolkernel-conformance-client", version="1.0.0"),
            elicitation_callback=accept_with_defaults,
        ) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            if scenario == "tools_call":
                await client.call_tool("add_numbers", {"a": 5, "b": 3})
            elif scenario == "elicitation-sep1034-client-defaults":
                await client.call_tool("test_client_elicitation_defaults", {})
            elif scenario == "sse-retry":
                await client.call_tool("test_reconnection", {})
            elif scenario != "initialize":
                raise SystemExit(f"unknown scenario {scenario!r} (tools offered: {sorted(tools)})")


def main() -> None:
    """Entry point: the server URL is the last argument, the scenario comes from the environment."""
    if len(sys.argv) < 2:
        raise SystemExit("usage: client.py SERVER_URL  (MCP_CONFORMANCE_SCENARIO names the scenario)")
    anyio.run(run, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))


if __name__ == "__main__":
    main()
