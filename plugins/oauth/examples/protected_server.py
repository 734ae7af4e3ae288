"""Tools that need a token: `toolkernel serve protected_server.py:app --transport http --auth NAME`."""

from toolkernel import MCPServer, ToolContext

app = MCPServer("notes", "1.0.0")
notes: list[str] = []


@app.tool
def whoami(ctx: ToolContext) -> str:
    """Who the token belongs to, as the server verified it."""
    if ctx.auth is None:
        return "nobody: this server is not served with --auth"
    return f"{ctx.auth.subject} via {ctx.auth.client_id}, scopes: {' '.join(ctx.auth.scopes)}"


@app.tool(scopes=["notes:write"])
def add_note(text: str) -> str:
    """Keep a note (needs the notes:write scope; hidden from callers without it)."""
    notes.append(text)
    return f"{len(notes)} notes"
