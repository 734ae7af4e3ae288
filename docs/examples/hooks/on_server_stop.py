"""Release what on_server_start opened; runs even when serving failed."""

from toolkernel import hookimpl

closed = []


@hookimpl
def on_server_stop(server):
    closed.append(server.name)  # e.g. close the connection pool
