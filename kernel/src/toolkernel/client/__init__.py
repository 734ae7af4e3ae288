"""MCPClient: one client for many MCP servers.

A connection state machine per server (authenticating → connecting → connected →
discovering → ready, failed from any), one reliability policy (backoff, stdio restart,
HTTP reconnect, progress-extended timeouts with a hard cap, retries only for
idempotent or read-only tools), a server registry that survives restarts (SQLite by
default, any :class:`ServerStore`), and tools namespaced ``server_tool`` within 64
characters. See ``docs/client.md``.
"""

from __future__ import annotations

from toolkernel.client._client import MCPClient as MCPClient
from toolkernel.client._client import NamespacedTool as NamespacedTool
from toolkernel.client._connection import ServerSnapshot as ServerSnapshot
from toolkernel.client._connection import ServerState as ServerState
from toolkernel.client._connection import StateChange as StateChange
from toolkernel.client._content import ToolOutput as ToolOutput
from toolkernel.client._names import ToolRef as ToolRef
from toolkernel.client._skills import LoadedSkill as LoadedSkill
from toolkernel.client._skills import Skill as Skill
from toolkernel.client._skills import SkillFile as SkillFile
from toolkernel.client.config import HTTPServerConfig as HTTPServerConfig
from toolkernel.client.config import MCPClientConfig as MCPClientConfig
from toolkernel.client.config import ReliabilityPolicy as ReliabilityPolicy
from toolkernel.client.config import RestartPolicy as RestartPolicy
from toolkernel.client.config import StdioServerConfig as StdioServerConfig
from toolkernel.client.errors import ToolError as ToolError
from toolkernel.client.storage import MemoryServerStore as MemoryServerStore
from toolkernel.client.storage import ServerStore as ServerStore
from toolkernel.client.storage import SqliteServerStore as SqliteServerStore

__all__ = [
    "HTTPServerConfig",
    "LoadedSkill",
    "MCPClient",
    "MCPClientConfig",
    "MemoryServerStore",
    "NamespacedTool",
    "ReliabilityPolicy",
    "RestartPolicy",
    "ServerSnapshot",
    "ServerState",
    "ServerStore",
    "Skill",
    "SkillFile",
    "SqliteServerStore",
    "StateChange",
    "StdioServerConfig",
    "ToolError",
    "ToolOutput",
    "ToolRef",
]
