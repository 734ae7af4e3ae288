"""The smallest toolkernel server: one tool that returns its input unchanged.

Serve it with ``toolkernel serve docs/examples/echo_server.py:app``.
"""

from toolkernel import MCPServer

app = MCPServer("echo", "1.0.0", description="Echoes text back.")


@app.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text
