"""Ship each successful call's duration to a metrics backend, asynchronously."""

from toolkernel import hookimpl

durations = []  # stands in for a metrics client


async def send_metric(name, value, tags):
    durations.append((name, value, tags))  # e.g. await statsd.timing(...)


@hookimpl
def on_tool_output(event):
    # Returning an awaitable is allowed: the kernel awaits it.
    return send_metric("tool.duration_s", event.duration_s, {"tool": event.tool_name})
