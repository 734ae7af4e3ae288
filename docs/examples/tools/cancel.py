"""Cancellation: awaiting code is cancelled for you; CPU loops check ctx.cancel_requested."""

import anyio

from toolkernel import MCPServer, ToolContext

app = MCPServer("long-running", "1.0.0")
cleaned_up = []
stopped_at = []


@app.tool
async def wait_for(seconds: float, ctx: ToolContext) -> str:
    """Wait, then answer; stops early when the client cancels."""
    try:
        await anyio.sleep(seconds)
    finally:
        cleaned_up.append(ctx.cancel_requested)  # runs on cancellation too
    return "waited"


@app.tool
def count_primes(limit: int, ctx: ToolContext) -> int:
    """Count primes below limit (CPU-bound: takes the context, so it runs in a worker thread)."""
    found = 0
    for n in range(2, limit):
        if n % 10_000 == 0 and ctx.cancel_requested:
            stopped_at.append(n)  # e.g. log how far it got
            break
        found += all(n % d for d in range(2, int(n**0.5) + 1))
    return found
