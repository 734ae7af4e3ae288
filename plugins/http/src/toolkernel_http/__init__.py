"""toolkernel-http: Streamable HTTP and legacy SSE for toolkernel, server and client side.

Names load on first use, so importing the package (as the plugin loader does for
:mod:`toolkernel_http.plugin`) costs nothing until a transport is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.streamable_http import EventMessage as EventMessage
    from mcp.server.streamable_http import EventStore as EventStore

    from toolkernel_http._asgi import MCPHTTPApp as MCPHTTPApp
    from toolkernel_http._asgi import asgi_app as asgi_app
    from toolkernel_http._client import http_client as http_client
    from toolkernel_http._events import InMemoryEventStore as InMemoryEventStore
    from toolkernel_http._events import SessionScopedEventStore as SessionScopedEventStore
    from toolkernel_http._options import HTTPClientOptions as HTTPClientOptions
    from toolkernel_http._options import HTTPServerOptions as HTTPServerOptions
    from toolkernel_http._serve import HTTPServerTransport as HTTPServerTransport
    from toolkernel_http._serve import LegacySSEServerTransport as LegacySSEServerTransport

_WHERE = {
    "EventMessage": "mcp.server.streamable_http",
    "EventStore": "mcp.server.streamable_http",
    "HTTPClientOptions": "toolkernel_http._options",
    "HTTPServerOptions": "toolkernel_http._options",
    "HTTPServerTransport": "toolkernel_http._serve",
    "InMemoryEventStore": "toolkernel_http._events",
    "LegacySSEServerTransport": "toolkernel_http._serve",
    "MCPHTTPApp": "toolkernel_http._asgi",
    "SessionScopedEventStore": "toolkernel_http._events",
    "asgi_app": "toolkernel_http._asgi",
    "http_client": "toolkernel_http._client",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module the first time it is asked for."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkernel_http' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
