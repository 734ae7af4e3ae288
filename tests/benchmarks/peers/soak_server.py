"""The server the soak benchmark drives: an echo, a large result, and a result JSON cannot encode."""

from toolkernel import MCPServer

app = MCPServer("soak", "1.0.0")


@app.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool
def big(size: int) -> str:
    """``size`` bytes of text."""
    return "x" * size


@app.tool
def listing() -> str:
    """A file name as os.fsdecode gives it for non-UTF-8 bytes: a lone surrogate."""
    return "report-\udcff.txt"
