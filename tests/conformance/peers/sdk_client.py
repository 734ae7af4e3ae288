"""The conformance client scenarios driven through the ``mcp`` SDK's own ``Client`` (a yardstick).

``python sdk_client.py URL`` with ``MCP_CONFORMANCE_SCENARIO`` set, as the suite runs a
client: the same calls ``tests/conformance/client.py`` makes through MCPClient, made with
the SDK's public API and its defaults (``mode="auto"``). The SDK has no skills API: a
skill is listed with a raw ``skills/list`` request and loaded by reading its files with
``read_resource``, as a host without verification would.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.client import Client
from mcp.client.extension import advertise

SKILLS = "io.modelcontextprotocol/skills"


class SkillList(types.PaginatedResult):
    """A ``skills/list`` answer, entries kept as the server sent them."""

    skills: list[dict[str, Any]]


async def _defaults(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    props = schema.get("properties") or {}
    return types.ElicitResult(
        action="accept", content={k: v["default"] for k, v in props.items() if "default" in v}
    )


async def _sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=""), model="x"
    )


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


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
    async with Client(
        url,
        elicitation_callback=_defaults,
        sampling_callback=_sample,
        list_roots_callback=_roots,
        extensions=[advertise(SKILLS)],
    ) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        if scenario in ("tools_call", "request-metadata"):
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario == "http-standard-headers":
            for name, tool in tools.items():
                await client.call_tool(name, _stub(tool.input_schema))
            for resource in (await client.list_resources()).resources:
                await client.read_resource(str(resource.uri))
            for prompt in (await client.list_prompts()).prompts:
                await client.get_prompt(prompt.name)
        elif scenario == "elicitation-sep1034-client-defaults":
            await client.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            await client.call_tool("test_reconnection", {})
        elif scenario == "json-schema-2020-12-preservation":
            schema = tools["json_schema_2020_12_tool"].input_schema
            await client.call_tool("json_schema_echo", {"schema": schema})
        elif scenario == "http-invalid-tool-headers":
            for name, tool in tools.items():
                await _quietly(client.call_tool(name, _stub(tool.input_schema)))
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
            request = types.Request[types.PaginatedRequestParams, str](  # type: ignore[misc]
                method="skills/list", params=types.PaginatedRequestParams()
            )
            listed = await client.session.send_request(request, SkillList)
            if scenario != "sep-2640-client-no-prefetch":
                for skill in listed.skills:
                    for entry in skill.get("resources", []):
                        await client.read_resource(entry["uri"])


if __name__ == "__main__":
    anyio.run(run, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize"))
