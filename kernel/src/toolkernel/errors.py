"""Exceptions raised by the kernel, each naming what was wrong and where."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "MCPClientError",
    "MissingDependencyError",
    "PluginLoadError",
    "RegistrationError",
    "ToolExecutionError",
    "ToolkernelError",
]


class ToolkernelError(Exception):
    """Base class of every error toolkernel raises on purpose."""


class ConfigError(ToolkernelError, ValueError):
    """Configuration or arguments failed validation; the message names the field path."""


class RegistrationError(ToolkernelError):
    """A plugin registered something invalid, or a name twice."""


class PluginLoadError(ToolkernelError):
    """A plugin failed to import or to register (fatal only in strict mode)."""


class MissingDependencyError(ToolkernelError, ImportError):
    """A plugin needs a library that is not installed; the message says what to install."""


class ToolExecutionError(ToolkernelError):
    """A tool ran in-process (``MCPServer.execute_tool``) and its call ended in an error result."""


class MCPClientError(ToolkernelError):
    """A request to an MCP server failed; ``server`` names which server."""

    def __init__(self, server: str, message: str, code: int | None = None) -> None:
        super().__init__(f"{server}: {message}" + (f" (code {code})" if code is not None else ""))
        self.server = server
        self.code = code
