"""Official SDK peer: the echo tool on ``mcp.server.mcpserver.MCPServer`` over the SDK's stdio."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("echo")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    mcp.run(transport="stdio")
