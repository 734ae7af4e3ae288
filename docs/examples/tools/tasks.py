"""Tools that run as tasks: the client gets a task id at once and polls for the result."""

import anyio
from pydantic import BaseModel

from toolkernel import MCPServer, ToolContext
from toolkernel.tasks import InMemoryTaskStore

app = MCPServer("reports", "1.0.0", task_store=InMemoryTaskStore(max_tasks=1000))


class Go(BaseModel):
    go: bool


@app.tool(task="optional")
async def build_report(pages: int, ctx: ToolContext) -> str:
    """Build a long report; a client that supports tasks polls for it."""
    for page in range(1, pages + 1):
        await anyio.sleep(0.01)
        await ctx.progress(page, pages, f"page {page} of {pages}")
    return f"report of {pages} pages"


@app.tool(task="required", task_start="detach")
async def archive(folder: str, ctx: ToolContext) -> str:
    """Ask inside the request first, then go on as a task."""
    answer = await ctx.elicit(f"Archive {folder}?", Go)
    if answer.data is None or not answer.data.go:
        return f"{folder} kept"
    await ctx.run_as_task()
    await anyio.sleep(0.05)
    return f"{folder} archived"
