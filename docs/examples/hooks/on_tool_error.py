"""Keep the last errors per tool, for a health page."""

from collections import defaultdict, deque

from toolkernel import hookimpl

recent_errors = defaultdict(lambda: deque(maxlen=10))


@hookimpl
def on_tool_error(event):
    recent_errors[event.tool_name].append(f"{type(event.error).__name__}: {event.error}")
