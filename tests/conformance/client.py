"""The client the official MCP conformance suite drives: ``python tests/conformance/client.py <server-url>``.

The suite sets ``MCP_CONFORMANCE_SCENARIO`` (and, for some scenarios,
``MCP_CONFORMANCE_CONTEXT``) and checks from its side of the wire that the client
behaves. Everything goes through :class:`toolkernel.client.MCPClient` with its default
settings (``protocol: auto``, ``transport: auto``): this script only decides which
calls a scenario needs; headers, ``_meta``, multi-round-trip requests, tool filtering
and skill verification are the client's own behaviour.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types

from toolkernel.client import MCPClient
from toolkernel.errors import MCPClientError

TIMEOUT_S = 60.0
SERVER = "conformance"


async def accept_with_defaults(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept every elicitation, answering each field with the default its schema gives (SEP-1034)."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: field["default"]
        for name, field in (schema.get("properties") or {}).items()
        if isinstance(field, dict) and "default" in field
    }
    return types.ElicitResult(action="accept", content=content)


async def empty_sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    """A sampling answer with no text: the scenarios only check that sampling is declared."""
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=""), model="conformance"
    )


def _stub_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The smallest arguments that satisfy ``schema``'s required properties."""
    by_type = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": []}
    properties = schema.get("properties") or {}
    return {
        name: by_type.get((properties.get(name) or {}).get("type"), "x")
        for name in schema.get("required", [])
    }


async def _call_quietly(client: MCPClient, tool: str, arguments: dict[str, Any]) -> None:
    """Call ``tool``; a failure is reported on stderr and the run goes on (the scenario allows it)."""
    try:
        await client.call_server_tool(SERVER, tool, arguments, raise_on_error=False)
    except MCPClientError as exc:
        print(f"{tool}: {exc}", file=sys.stderr)


async def run(url: str, scenario: str) -> None:
    """Connect to ``url`` and do what ``scenario`` expects of a client."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    config = {
        "servers": {SERVER: {"url": url}},
        "throw_on_load_error": True,
        "policy": {"heartbeat_interval": None},
    }
    with anyio.fail_after(TIMEOUT_S):
        async with MCPClient(
            config,
            persist=False,
            client_name="toolkernel-conformance-client",
            elicitation_handler=accept_with_defaults,
            sampling_handler=empty_sampling,
            roots=[],
        ) as client:
            tools = {t.original_name: t for t in (await client.list_toolsets()).get(SERVER, [])}
            if scenario in ("tools_call", "request-metadata"):
                await client.call_server_tool(SERVER, "add_numbers", {"a": 5, "b": 3})
            elif scenario == "http-standard-headers":
                for name, tool in tools.items():
                    await client.call_server_tool(SERVER, name, _stub_arguments(tool.input_schema))
                for resource in (await client.list_resources()).get(SERVER, []):
                    await client.read_resource(SERVER, str(resource.uri))
                for prompt in (await client.list_prompts()).get(SERVER, []):
                    await client.get_prompt(SERVER, prompt.name)
            elif scenario == "elicitation-sep1034-client-defaults":
                await client.call_server_tool(SERVER, "test_client_elicitation_defaults", {})
            elif scenario == "sse-retry":
                await client.call_server_tool(SERVER, "test_reconnection", {})
            elif scenario == "json-schema-2020-12-preservation":
                schema = tools["json_schema_2020_12_tool"].input_schema
                await client.call_server_tool(SERVER, "json_schema_echo", {"schema": schema})
            elif scenario == "http-invalid-tool-headers":
                for name, tool in tools.items():
                    await _call_quietly(client, name, _stub_arguments(tool.input_schema))
            elif scenario == "http-custom-headers":
                for call in context.get("toolCalls", []):
                    if call["name"] in tools:
                        await _call_quietly(client, call["name"], call.get("arguments") or {})
            elif scenario == "sep-2322-client-request-state":
                for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state"):
                    await client.call_server_tool(SERVER, name, {})
                await client.call_server_tool(SERVER, "test_mrtr_no_result_type", {})
            elif scenario.startswith("sep-2640-client-"):
                skills = await client.list_skills(SERVER)
                if scenario != "sep-2640-client-no-prefetch":
                    for skill in skills:
                        try:
                            await client.load_skill(SERVER, skill.uri)
                        except MCPClientError as exc:
                            print(f"skill {skill.uri} refused: {exc}", file=sys.stderr)
            elif scenario not in ("initialize", "json-schema-ref-no-deref"):
                raise SystemExit(f"unknown scenario {scenario!r} (tools offered: {sorted(tools)})")


def main() -> None:
    """Entry point: the server URL is the last argument, the scenario comes from the environment."""
    if len(sys.argv) < 2:
        raise SystemExit("usage: client.py SERVER_URL  (MCP_CONFORMANCE_SCENARIO names the scenario)")
    anyio.run(run, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))


if __name__ == "__main__":
    main()
