"""A toolkernel server that asks its client for things, served with ``python -m toolkernel serve``.

Over the 2025 handshake it sends elicitation and sampling requests; over 2026-07-28 the
kernel turns the same calls into ``input_required`` rounds. MCPClient answers both alike.
"""

from __future__ import annotations

from pydantic import BaseModel

from toolkernel import MCPServer, ToolContext

app = MCPServer("asker", "1.0.0", description="Asks the client for input.")


class Person(BaseModel):
    name: str


@app.tool
async def greet(ctx: ToolContext) -> str:
    """Ask for a name, then greet it."""
    answer = await ctx.elicit("Who are you?", Person)
    return f"hello {answer.data.name}" if answer.data else f"no name ({answer.action})"


@app.tool
async def summarize(text: str, ctx: ToolContext) -> str:
    """Ask the client's model to summarize ``text``."""
    sampled = await ctx.sample(f"Summarize: {text}", max_tokens=30)
    return f"{sampled.model}: {sampled.text}"
