"""Asking the client for its roots, and sampling with preferences and stop sequences."""

from toolkernel import MCPServer, ToolContext

app = MCPServer("workspace", "1.0.0")


@app.tool
async def summarize_workspace(ctx: ToolContext) -> str:
    """Summarize the folders the client shares with this server."""
    roots = await ctx.list_roots()
    listing = ", ".join(root.uri for root in roots)
    summary = await ctx.sample(
        f"Summarize a workspace holding: {listing}",
        max_tokens=100,
        stop_sequences=["\n\n"],
        model_preferences={"hints": [{"name": "claude"}], "speedPriority": 0.8},
        include_context="thisServer",
    )
    return summary.text
