"""Asking the user (elicitation) and the client's model (sampling) from inside a tool."""

from pydantic import BaseModel

from toolkernel import MCPServer, ToolContext

app = MCPServer("deploy", "1.0.0")


class Confirm(BaseModel):
    confirm: bool
    reason: str = ""


@app.tool
async def deploy(service: str, ctx: ToolContext) -> str:
    """Deploy a service after the user confirms."""
    answer = await ctx.elicit(f"Deploy {service} to production?", Confirm)
    if answer.action != "accept" or not answer.data.confirm:
        return f"{service}: not deployed ({answer.action})"
    note = await ctx.sample(f"Write a one-line release note for {service}.", max_tokens=60)
    return f"{service}: deployed. {note.text}"
