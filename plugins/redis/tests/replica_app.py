"""The server every replica in these tests runs: tools that show which replica answered, a
slow tool whose stream can be cut, a task tool, and a resource whose update is published."""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

from toolkernel import MCPServer, ToolContext
from toolkernel.resources import Resource

server = MCPServer("replicas")
REPLICA = os.environ.get("REPLICA_NAME", str(os.getpid()))


@server.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
def whoami() -> str:
    """The name of the replica that answered."""
    return REPLICA


@server.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
def echo(text: str) -> str:
    """``text`` back."""
    return text


@server.tool
async def ticks(count: int, delay_s: float, ctx: ToolContext) -> str:
    """Send ``count`` progress notifications ``delay_s`` apart, then say how many."""
    for i in range(count):
        await ctx.progress(i + 1, count, f"tick {i + 1}")
        await asyncio.sleep(delay_s)
    return f"{count} ticks from {REPLICA}"


@server.tool(task="optional")
async def slow_sum(a: int, b: int, delay_s: float = 1.0) -> int:
    """``a + b`` after ``delay_s`` seconds (runs as a task when the client asks)."""
    await asyncio.sleep(delay_s)
    return a + b


@server.tool
async def touch(uri: str) -> str:
    """Publish that ``uri`` changed (to subscribers on every replica)."""
    await server.notify_updated(uri)
    return REPLICA


class Confirmation(BaseModel):
    """What ``confirm`` asks for."""

    confirm: bool


@server.tool(task="optional")
async def confirm(what: str, ctx: ToolContext) -> str:
    """Ask the user to confirm ``what`` (mid-call, or parked on input_required as a task)."""
    answer = await ctx.elicit(f"Confirm {what}?", Confirmation)
    confirmed = answer.data is not None and answer.data.confirm
    return f"{what}: {'confirmed' if confirmed else 'not confirmed'} on {REPLICA}"


server.add_resource(Resource(uri="test://doc", name="doc", read=lambda: f"doc from {REPLICA}"))
