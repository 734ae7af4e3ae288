"""toolkernel: a plugin-based microkernel for Model Context Protocol tooling.

This module holds the public API only. Importing it loads neither the ``mcp`` SDK nor
any backend library; those load when a server is served or a plugin's factory runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from toolkernel._kernel import Kernel as Kernel
from toolkernel.auth import AuthInfo as AuthInfo
from toolkernel.context import Elicitation as Elicitation
from toolkernel.context import RequestValues as RequestValues
from toolkernel.context import Sampled as Sampled
from toolkernel.context import ToolContext as ToolContext
from toolkernel.errors import ConfigError as ConfigError
from toolkernel.errors import MCPClientError as MCPClientError
from toolkernel.errors import MissingDependencyError as MissingDependencyError
from toolkernel.errors import PluginLoadError as PluginLoadError
from toolkernel.errors import RegistrationError as RegistrationError
from toolkernel.errors import ToolExecutionError as ToolExecutionError
from toolkernel.errors import ToolkernelError as ToolkernelError
from toolkernel.events import SessionEvent as SessionEvent
from toolkernel.events import ToolEvent as ToolEvent
from toolkernel.middleware import ToolCall as ToolCall
from toolkernel.middleware import ToolOutcome as ToolOutcome
from toolkernel.prompts import Prompt as Prompt
from toolkernel.prompts import PromptArgument as PromptArgument
from toolkernel.prompts import prompt as prompt
from toolkernel.resources import Resource as Resource
from toolkernel.resources import ResourceTemplate as ResourceTemplate
from toolkernel.server import MCPServer as MCPServer
from toolkernel.tools import Tool as Tool
from toolkernel.tools import ToolAnnotations as ToolAnnotations
from toolkernel.tools import ToolResult as ToolResult
from toolkernel.tools import create_tool as create_tool
from toolkernel.tools import tool as tool

if TYPE_CHECKING:
    from toolkernel.client import MCPClient as MCPClient
    from toolkernel.client import MCPClientConfig as MCPClientConfig
    from toolkernel.client import ServerStore as ServerStore
    from toolkernel.client import ToolError as ToolError
    from toolkernel.filters import Filter as Filter
    from toolkernel.vectors import IndexInfo as IndexInfo
    from toolkernel.vectors import QueryResult as QueryResult
    from toolkernel.vectors import UnsupportedFilterError as UnsupportedFilterError
    from toolkernel.vectors import VectorStore as VectorStore
    from toolkernel.vectors import VectorStoreError as VectorStoreError

# The client and the vector-store contract are public here but load on first use: a
# server started with ``toolkernel serve`` needs neither, and start-up time is measured.
_LAZY = {
    "MCPClient": "toolkernel.client",
    "MCPClientConfig": "toolkernel.client",
    "ServerStore": "toolkernel.client",
    "ToolError": "toolkernel.client",
    "Filter": "toolkernel.filters",
    "IndexInfo": "toolkernel.vectors",
    "QueryResult": "toolkernel.vectors",
    "UnsupportedFilterError": "toolkernel.vectors",
    "VectorStore": "toolkernel.vectors",
    "VectorStoreError": "toolkernel.vectors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkernel' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


hookimpl = pluggy.HookimplMarker("toolkernel")
"""Marks a plugin function as the implementation of a hook in :mod:`toolkernel.hookspecs`."""

__all__ = [
    "AuthInfo",
    "ConfigError",
    "Elicitation",
    "Filter",
    "IndexInfo",
    "Kernel",
    "MCPClient",
    "MCPClientConfig",
    "MCPClientError",
    "MCPServer",
    "MissingDependencyError",
    "PluginLoadError",
    "Prompt",
    "PromptArgument",
    "QueryResult",
    "RegistrationError",
    "RequestValues",
    "Resource",
    "ResourceTemplate",
    "Sampled",
    "ServerStore",
    "SessionEvent",
    "Tool",
    "ToolAnnotations",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolEvent",
    "ToolExecutionError",
    "ToolOutcome",
    "ToolResult",
    "ToolkernelError",
    "UnsupportedFilterError",
    "VectorStore",
    "VectorStoreError",
    "create_tool",
    "hookimpl",
    "prompt",
    "tool",
]
