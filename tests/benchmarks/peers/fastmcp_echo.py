"""FastMCP 4.1.x peer: the echo tool over FastMCP's stdio transport, banner off."""

from fastmcp import FastMCP

mcp = FastMCP("echo")


@mcp.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    mcp.run(transport="stdio", show_banner=False)
