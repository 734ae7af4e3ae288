"""Count how often each tool is called, whether or not the call succeeds."""

from collections import Counter

from toolkernel import hookimpl

calls = Counter()


@hookimpl
def on_tool_input_start(event):
    calls[event.tool_name] += 1
