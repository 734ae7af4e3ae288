"""An audit trail: who called which tool with which validated arguments."""

from toolkernel import hookimpl

audit = []


@hookimpl
def on_tool_input_available(event):
    arguments = event.input.model_dump() if hasattr(event.input, "model_dump") else dict(event.input)
    caller = event.context.values.get("user", "anonymous")
    audit.append((caller, event.tool_name, arguments))
