"""Errors an MCPClient raises besides ``MCPClientError`` and ``ConfigError`` (:mod:`toolkernel.errors`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel.errors import MCPClientError

if TYPE_CHECKING:
    from toolkernel.client._content import ToolOutput

__all__ = [
    "CONNECTION_CLOSED",
    "REQUEST_CANCELLED",
    "REQUEST_TIMEOUT",
    "ToolError",
]

REQUEST_TIMEOUT = -32001
"""The code of an :class:`MCPClientError` for a request that ran out of time (as the SDK uses it)."""
CONNECTION_CLOSED = -32000
"""The code of an :class:`MCPClientError` for a request whose connection went away."""
REQUEST_CANCELLED = -32800
"""The code of an :class:`MCPClientError` for a request cancelled through :meth:`MCPClient.cancel`."""


class RequestTimeout(MCPClientError):
    """A request (or, for the command line, the whole command) ran out of time; exit status 4."""

    exit_code = 4


class ProtocolError(MCPClientError):
    """The server broke the protocol (not JSON-RPC, an answer to a request never sent, an error
    for no request, a message over the size limit); its connection was dropped at once."""


class ToolError(MCPClientError):
    """A tool call ended in an error: the tool reported one (``output`` holds it) or the name is unknown."""

    def __init__(
        self, server: str, message: str, *, tool: str | None = None, output: ToolOutput | None = None
    ) -> None:
        super().__init__(server, message)
        self.tool = tool
        self.output = output
