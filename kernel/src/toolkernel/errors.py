"""Exceptions raised by the kernel, each naming what was wrong and where."""

from __future__ import annotations

from typing import Any

__all__ = [
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "ConfigError",
    "MCPClientError",
    "MissingDependencyError",
    "PluginLoadError",
    "ProtocolError",
    "RegistrationError",
    "ToolExecutionError",
    "ToolkernelError",
    "missing_capability",
]


class ToolkernelError(Exception):
    """Base class of every error toolkernel raises on purpose."""

    exit_code = 2
    """The ``toolkernel`` command's exit status when this error ends it (see docs/cli.md)."""


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

    exit_code = 3

    def __init__(self, server: str, message: str, code: int | None = None) -> None:
        super().__init__(f"{server}: {message}" + (f" (code {code})" if code is not None else ""))
        self.server = server
        self.code = code


class ProtocolError(ToolkernelError):
    """Raised by a tool to answer its call with a JSON-RPC error rather than an ``isError`` result.

    A call running as a task ends ``failed`` with this error instead.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object: ``code``, ``message`` and ``data`` when there is some."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


MISSING_REQUIRED_CLIENT_CAPABILITY = -32021


def missing_capability(capabilities: dict[str, Any], why: str) -> ProtocolError:
    """The -32021 error of a request that needs client ``capabilities`` the client did not declare."""
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{why}: the client did not declare {', '.join(sorted(capabilities))}",
        {"requiredCapabilities": capabilities},
    )
