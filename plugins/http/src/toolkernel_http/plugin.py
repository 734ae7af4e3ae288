"""toolkernel-http's hooks: the ``http`` and ``sse`` server transports and the http(s) client transport.

The factories import the transports (and with them uvicorn, Starlette and the ``mcp``
SDK) only when a server is served or a URL is opened, so listing plugins stays cheap.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import ClientTransportRegistry, ServerTransportRegistry, SettingsRegistry
    from toolkernel.transports import ClientTransportOptions, ServeOptions, ServerTransport, TransportStreams


def http_server(options: ServeOptions) -> ServerTransport:
    """Streamable HTTP at ``options.path``, with legacy SSE alongside, under uvicorn."""
    from toolkernel_http._serve import HTTPServerTransport

    return HTTPServerTransport(options)


def sse_server(options: ServeOptions) -> ServerTransport:
    """Only the legacy SSE endpoints (GET /sse, POST /messages), under uvicorn."""
    from toolkernel_http._serve import LegacySSEServerTransport

    return LegacySSEServerTransport(options)


def http_client_transport(
    target: str | list[str], options: ClientTransportOptions
) -> AbstractAsyncContextManager[TransportStreams]:
    """Streamable HTTP to ``target``, falling back to legacy SSE."""
    from toolkernel_http._client import http_client

    return http_client(target, options)


@hookimpl
def register_server_transports(registry: ServerTransportRegistry) -> None:
    """Serve Streamable HTTP (``http``, legacy SSE alongside) or only legacy SSE (``sse``) under uvicorn."""
    registry.add("http", http_server)
    registry.add("sse", sse_server)


@hookimpl
def register_client_transports(registry: ClientTransportRegistry) -> None:
    """Reach http:// and https:// URLs: Streamable HTTP, falling back to legacy SSE."""
    registry.add("http", http_client_transport, schemes=("http", "https"))


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Server options from the ``[plugins.http]`` config table or ``TOOLKERNEL_HTTP_<FIELD>``."""
    from toolkernel_http._options import HTTPServerOptions

    registry.add("http", HTTPServerOptions)
