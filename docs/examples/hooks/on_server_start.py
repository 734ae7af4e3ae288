"""Open a shared resource before the server accepts connections."""

from toolkernel import hookimpl

opened = []


async def warm_up(server):
    opened.append(server.name)  # e.g. open a connection pool, load a model


@hookimpl
def on_server_start(server):
    return warm_up(server)
