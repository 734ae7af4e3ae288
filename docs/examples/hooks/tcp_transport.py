"""A plugin that carries MCP over a plain TCP socket: one JSON-RPC message per line.

The server side serves one MCP session per connection; the client side answers for
``tcp://host:port`` URLs, so ``toolkernel call tcp://127.0.0.1:8765 echo`` reaches it.
"""

from contextlib import asynccontextmanager

from toolkernel import hookimpl


@asynccontextmanager
async def line_streams(stream):
    """Turn a byte stream into the SDK's (read, write) pair of JSON-RPC messages."""
    import anyio
    from anyio.streams.buffered import BufferedByteReceiveStream
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    to_sdk, read = anyio.create_memory_object_stream(100)
    write, from_sdk = anyio.create_memory_object_stream(100)
    lines = BufferedByteReceiveStream(stream)

    async def pump_in():
        async with to_sdk:
            while True:
                try:
                    line = await lines.receive_until(b"\n", 16 * 1024 * 1024)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                    return
                try:
                    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await to_sdk.send(exc)  # the SDK answers a malformed line with an error
                    continue
                await to_sdk.send(SessionMessage(message))

    async def pump_out():
        async with from_sdk:
            async for item in from_sdk:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stream.send(data.encode() + b"\n")

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        yield read, write
        tg.cancel_scope.cancel()


class TcpServerTransport:
    """Listens on options.host:options.port; each connection is one MCP session."""

    def __init__(self, options):
        self.options = options

    async def serve(self, app):
        import anyio

        listener = await anyio.create_tcp_listener(local_host=self.options.host, local_port=self.options.port)

        async def session(stream):
            async with stream, line_streams(stream) as (read, write):
                await app.run_session(read, write, transport="tcp")

        await listener.serve(session)


@asynccontextmanager
async def tcp_client(target, options):
    """Connect to tcp://host:port and yield the SDK's stream pair."""
    from urllib.parse import urlsplit

    import anyio

    url = urlsplit(target)
    with anyio.fail_after(options.connect_timeout):
        stream = await anyio.connect_tcp(url.hostname, url.port)
    async with stream, line_streams(stream) as streams:
        yield streams


@hookimpl
def register_server_transports(registry):
    registry.add("tcp", TcpServerTransport)


@hookimpl
def register_client_transports(registry):
    registry.add("tcp", tcp_client, schemes=("tcp",))
