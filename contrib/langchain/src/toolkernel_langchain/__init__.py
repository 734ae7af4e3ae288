"""MCP tools as LangChain tools: every tool an :class:`~toolkernel.client.MCPClient` reaches.

``await load_tools(client)`` gives one :class:`~langchain_core.tools.StructuredTool` per
tool, ready for ``model.bind_tools(...)`` or LangGraph's prebuilt agent. Unlike
``langchain-mcp-adapters`` (which pins ``mcp<2``) it runs on ``mcp`` 2.x, over every
transport and protocol era the client speaks, with its reconnects and timeouts.
"""

from __future__ import annotations

from toolkernel_langchain._tools import MCPToolArtifact as MCPToolArtifact
from toolkernel_langchain._tools import load_tools as load_tools
from toolkernel_langchain._tools import to_langchain_tool as to_langchain_tool

__all__ = ["MCPToolArtifact", "load_tools", "to_langchain_tool"]
