"""The conformance client scenarios driven through FastMCP's ``Client`` (a yardstick).

``python fastmcp_client.py URL`` with ``MCP_CONFORMANCE_SCENARIO`` set, as the suite runs
a client: the same calls ``tests/conformance/client.py`` makes through MCPClient, made
with FastMCP's public API and its defaults. FastMCP lists skills (``list_skills``) but
has no verified loading: a skill is loaded by reading its files with ``read_resource``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.skills.client import SkillsClientExtension


async def _defaults(message: str, response_type: Any, params: Any, context: Any) -> ElicitResult[Any]:
    schema = getattr(params, "requested_schema", None) or {}
    props = schema.get("properties") or {}
    return ElicitResult(
        action="accept", content={k: v["default"] for k, v in props.items() if "default" in v}
    )


async def _sample(messages: Any, params: Any, context: Any) -> str:
    return ""


def _stub(schema: dict[str, Any]) -> dict[str, Any]:
    by_type = {"string": "x", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": []}
    props = schema.get("properties") or {}
    return {n: by_type.get((props.get(n) or {}).get("type"), "x") for n in schema.get("required", [])}


async def _quietly(call: Any) -> None:
    try:
        await call
    except Exception as exc:  # the scenario allows a failed call; go on
        print(f"call failed: {exc}", file=sys.stderr)


async def run(url: str, scenario: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    client = Client(
        url,
        elicitation_handler=_defaults,
        sampling_handler=_sample,
        roots=[],
        extensions=[SkillsClientExtension()],
    )
    async with client:
        tools = {t.name: t for t in await client.list_tools()}
        if scenario in ("tools_call", "request-metadata"):
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario == "http-standard-headers":
            for name, tool in tools.items():
                await client.call_tool(name, _stub(tool.inputSchema))
            for resource in await client.list_resources():
                await client.read_resource(str(resource.uri))
            for prompt in await client.list_prompts():
                await client.get_prompt(prompt.name)
        elif scenario == "elicitation-sep1034-client-defaults":
            await client.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            await client.call_tool("test_reconnection", {})
        elif scenario == "json-schema-2020-12-preservation":
            schema = tools["json_schema_2020_12_tool"].inputSchema
            await client.call_tool("json_schema_echo", {"schema": schema})
        elif scenario == "http-invalid-tool-headers":
            for name, tool in tools.items():
                await _quietly(client.call_tool(name, _stub(tool.inputSchema)))
        elif scenario == "http-custom-headers":
            for call in context.get("toolCalls", []):
                if call["name"] in tools:
                    await _quietly(client.call_tool(call["name"], call.get("arguments") or {}))
        elif scenario == "sep-2322-client-request-state":
            for name in (
                "test_mrtr_echo_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_state",
                "test_mrtr_no_result_type",
            ):
                await client.call_tool(name, {})
        elif scenario.startswith("sep-2640-client-"):
            skills = await client.list_skills()
            if scenario != "sep-2640-client-no-prefetch":
                for skill in skills:
                    for entry in skill.resources if isinstance(skill.resources, list) else []:
                        await client.read_resource(entry.uri)


if __name__ == "__main__":
    anyio.run(run, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))
