"""The stdio transport, server and client side, as a built-in plugin.

Newline-delimited JSON-RPC over a pipe pair, read and written through asyncio pipe
transports on the event loop. The SDK's own stdio transport moves each line through a
worker thread; this one does no thread hop per message, which is most of the per-call
cost at high rates. Logs never go to stdout: while serving, fd 1 points at stderr and
the wire uses a private duplicate.
"""

from __future__ import annotations

from toolkernel import hookimpl
from toolkernel.registries import ClientTransportRegistry, ServerTransportRegistry


@hookimpl
def register_server_transports(registry: ServerTransportRegistry) -> None:
    """Serve over this process's stdin/stdout."""
    from toolkernel._builtin._stdio_transport import StdioServerTransport

    registry.add("stdio", StdioServerTransport)


@hookimpl
def register_client_transports(registry: ClientTransportRegistry) -> None:
    """Spawn a server subprocess and talk to it over its stdin/stdout."""
    from toolkernel._builtin._stdio_transport import stdio_client

    registry.add("stdio", stdio_client)
