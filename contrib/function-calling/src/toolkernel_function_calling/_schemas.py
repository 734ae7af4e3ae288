"""Tool definitions in the shapes the OpenAI and Anthropic APIs take, from an MCPClient's tools.

MCP input schemas are JSON Schema objects already; the only work is the envelope each
API wants and a schema that is always an object (a tool with no parameters still
needs ``{"type": "object", "properties": {}}``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel.client import NamespacedTool


def parameters(tool: NamespacedTool) -> dict[str, Any]:
    """The tool's input schema, as an object schema with ``properties`` (what both APIs require)."""
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def openai_tools(tools: Iterable[NamespacedTool], *, strict: bool = False) -> list[dict[str, Any]]:
    """Chat Completions ``tools``: ``{"type": "function", "function": {name, description, parameters}}``.

    ``strict`` asks for OpenAI's structured outputs; it holds only for schemas that meet
    its rules (every property required, ``additionalProperties: false``).
    """
    out = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "parameters": parameters(tool)}
        if tool.description:
            function["description"] = tool.description
        if strict:
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


def openai_response_tools(tools: Iterable[NamespacedTool], *, strict: bool = False) -> list[dict[str, Any]]:
    """Responses API ``tools``: ``{"type": "function", name, description, parameters, strict}``."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description or "",
            "parameters": parameters(tool),
            "strict": strict,
        }
        for tool in tools
    ]


def anthropic_tools(tools: Iterable[NamespacedTool]) -> list[dict[str, Any]]:
    """Messages API ``tools``: ``{name, description, input_schema}``."""
    out = []
    for tool in tools:
        entry: dict[str, Any] = {"name": tool.name, "input_schema": parameters(tool)}
        if tool.description:
            entry["description"] = tool.description
        out.append(entry)
    return out
