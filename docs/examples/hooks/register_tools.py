"""A plugin that gives every served server a ``server_time`` tool."""

from datetime import UTC, datetime

from toolkernel import hookimpl, tool


@tool(annotations={"readOnlyHint": True})
def server_time() -> str:
    """The server's current time in UTC, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@hookimpl
def register_tools(registry):
    registry.add(server_time)
