"""toolkernel-http's hooks: the ``http`` and ``sse`` server transports and the http(s) client transport."""

from __future__ import annotations

from toolkernel import hookimpl
from toolkernel.registries import ClientTransportRegistry, ServerTransportRegistry, SettingsRegistry


@hookimpl
def register_server_transports(registry: ServerTransportRegistry) -> None:
    """Serve Streamable HTTP (``http``, legacy SSE alongside) or only legacy SSE (``sse``) under uvicorn."""
    from toolkernel_http._serve import HTTPServerTransport, LegacySSEServerTransport

    registry.add("http", HTTPServerTransport)
    registry.add("sse", LegacySSEServerTransport)


@hookimpl
def register_client_transports(registry: ClientTransportRegistry) -> None:
    """Reach http:// and https:// URLs: Streamable HTTP, falling back to legacy SSE."""
    from toolkernel_http._client import http_client

    registry.add("http", http_client, schemes=("http", "https"))


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Server options from the ``http`` config section or ``TOOLKERNEL_HTTP_<FIELD>``, checked at start-up."""
    from toolkernel_http._options import HTTPServerOptions

    registry.add("http", HTTPServerOptions)
