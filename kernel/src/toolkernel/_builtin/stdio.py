"""The stdio transport, server and client side, as a built-in plugin.

Newline-delimited JSON-RPC over a pipe pair, read and written through asyncio pipe
transports on the event loop. The SDK's own stdio transport moves each line through a
worker thread; this one does no thread hop per message, which is most of the per-call
cost at high rates. Logs never go to stdout: while serving, fd 1 points at stderr and
the wire uses a private duplicate. The factories import the transport only when a
connection is made, so listing plugins stays cheap; the server answers a client's
``initialize`` before it imports the ``mcp`` SDK (see ``_stdio_server``).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import ClientTransportRegistry, ServerTransportRegistry
    from toolkernel.transports import ClientTransportOptions, ServeOptions, ServerTransport, TransportStreams


def server_transport(options: ServeOptions) -> ServerTransport:
    """A transport serving one session over this process's stdin/stdout."""
    from toolkernel._builtin._stdio_server import StdioServerTransport

    return StdioServerTransport(options)


def client_transport(
    target: str | list[str], options: ClientTransportOptions
) -> AbstractAsyncContextManager[TransportStreams]:
    """Spawn ``target`` and talk to it over its stdin/stdout."""
    from toolkernel._builtin._stdio_transport import stdio_client

    return stdio_client(target, options)


@hookimpl
def register_server_transports(registry: ServerTransportRegistry) -> None:
    """Serve over this process's stdin/stdout."""
    registry.add("stdio", server_transport)


@hookimpl
def register_client_transports(registry: ClientTransportRegistry) -> None:
    """Spawn a server subprocess and talk to it over its stdin/stdout."""
    registry.add("stdio", client_transport)
