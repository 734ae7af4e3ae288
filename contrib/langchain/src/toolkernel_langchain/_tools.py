"""One LangChain ``StructuredTool`` per MCP tool, with the content / artifact split of ``load_mcp_tools``.

A call returns ``(content, artifact)`` (``response_format="content_and_artifact"``): the
content is the list of standard content blocks the model reads, the artifact keeps
what it does not — the tool's structured result and the blocks the client's
``output_handling`` puts aside (images, audio and embedded files by default). A result
the tool marks as an error becomes a ``ToolMessage`` with ``status="error"`` (the agent
can correct itself) unless ``handle_tool_errors=False``; a failed connection or a
timeout always raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.tools import StructuredTool, ToolException

if TYPE_CHECKING:
    from toolkernel.client import MCPClient, NamespacedTool, ToolOutput


class MCPToolArtifact(TypedDict, total=False):
    """What a call keeps beside the model's content (``ToolMessage.artifact``)."""

    structured_content: dict[str, Any]
    """The tool's ``structuredContent``, as ``load_mcp_tools`` reports it."""
    blocks: list[dict[str, Any]]
    """Content blocks ``output_handling`` sends to ``artifact`` (media and files by default)."""


class MCPToolError(ToolException):
    """The tool reported an error; ``content`` holds its blocks for the error ``ToolMessage``."""

    def __init__(self, output: ToolOutput) -> None:
        super().__init__(output.text or f"MCP tool {output.tool!r} reported an error with no text")
        self.content: list[dict[str, Any]] = [*output.content, *output.artifacts]


def _error_content(error: ToolException) -> Any:
    """``handle_tool_error``: the error's blocks (or its message) become the error ToolMessage."""
    if isinstance(error, MCPToolError) and error.content:
        return error.content
    return str(error)


def _split(output: ToolOutput) -> tuple[list[dict[str, Any]], MCPToolArtifact | None]:
    artifact = MCPToolArtifact()
    if output.structured_content is not None:
        artifact["structured_content"] = output.structured_content
    if output.artifacts:
        artifact["blocks"] = list(output.artifacts)
    return list(output.content), artifact or None


def to_langchain_tool(
    client: MCPClient, tool: NamespacedTool, *, handle_tool_errors: bool = True
) -> StructuredTool:
    """``tool`` (from ``client.list_tools()``) as a LangChain tool named by its client-wide name.

    The tool's JSON Schema is its ``args_schema`` as the server sent it; annotations and
    ``_meta`` go into ``metadata`` (as ``load_mcp_tools`` puts them). Only the async
    interface runs it (``ainvoke``; agents call tools that way).
    """
    name = tool.name

    async def call(**arguments: Any) -> tuple[list[dict[str, Any]], MCPToolArtifact | None]:
        output = await client.call_tool(name, arguments, raise_on_error=False)
        if output.is_error:
            raise MCPToolError(output)
        return _split(output)

    metadata: dict[str, Any] = {}
    if tool.annotations is not None:
        metadata.update(tool.annotations.model_dump(exclude_none=True))
    if tool.tool.meta is not None:
        metadata["_meta"] = tool.tool.meta
    return StructuredTool(
        name=name,
        description=tool.description or "",
        args_schema=tool.input_schema,
        coroutine=call,
        response_format="content_and_artifact",
        metadata=metadata or None,
        handle_tool_error=_error_content if handle_tool_errors else False,
    )


async def load_tools(
    client: MCPClient, *, servers: Iterable[str] | None = None, handle_tool_errors: bool = True
) -> list[StructuredTool]:
    """Every ready server's tools (or only those of ``servers``) as LangChain tools.

    :param client: a started :class:`~toolkernel.client.MCPClient`; the tools call through it,
        so it must stay open while they are used.
    :param servers: server names to take tools from (default: all).
    :param handle_tool_errors: a tool's error result becomes an error ``ToolMessage``
        (default) instead of raising ``ToolException``.
    """
    toolsets = await client.list_toolsets()
    wanted = set(toolsets) if servers is None else set(servers)
    unknown = wanted - set(toolsets)
    if unknown:
        from toolkernel.errors import ConfigError

        raise ConfigError(
            f"no ready server named {', '.join(sorted(unknown))}; ready: {', '.join(toolsets) or 'none'}"
        )
    return [
        to_langchain_tool(client, tool, handle_tool_errors=handle_tool_errors)
        for server, tools in toolsets.items()
        if server in wanted
        for tool in tools
    ]
