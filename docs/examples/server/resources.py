"""Resources at fixed URIs, templates with completion, and change notifications."""

from toolkernel import MCPServer, Resource, ResourceTemplate, ToolContext

notes = {"groceries": "eggs, milk", "todo": "write docs"}

app = MCPServer("notes", "1.0.0")

app.add_resource(
    Resource(
        uri="notes://index",
        name="index",
        description="Every note's name, one per line.",
        read=lambda: "\n".join(sorted(notes)),
    )
)


async def read_note(name):
    return notes[name]


app.add_resource(
    ResourceTemplate(
        uri_template="notes://note/{name}",
        name="note",
        mime_type="text/markdown",
        read=read_note,
        complete={"name": lambda prefix: [n for n in sorted(notes) if n.startswith(prefix)]},
    )
)


@app.tool
async def write_note(name: str, text: str, ctx: ToolContext) -> str:
    """Create or replace a note."""
    is_new = name not in notes
    notes[name] = text
    await ctx.server.notify_updated(f"notes://note/{name}")  # subscribers of this note
    if is_new:
        await ctx.server.notify_updated("notes://index")
    return "saved"
