"""Record how many characters of argument text each call carried."""

from toolkernel import hookimpl

argument_sizes = {}  # call id -> characters of JSON arguments


@hookimpl
def on_tool_input_delta(event):
    argument_sizes[event.call_id] = argument_sizes.get(event.call_id, 0) + len(event.input_text_delta)
