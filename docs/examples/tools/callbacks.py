"""Per-tool lifecycle callbacks: the same events as the kernel hooks, for one tool only."""

from toolkernel import MCPServer, tool

seen = []


def record(event):
    seen.append((event.tool_name, event.input_text_delta, event.input, event.output))


@tool(on_input_start=record, on_input_delta=record, on_input_available=record, on_output=record)
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


app = MCPServer("callbacks", tools=[shout])
