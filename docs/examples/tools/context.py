"""A tool that uses its ToolContext: request values, caller, progress and logging."""

import anyio
import anyio.lowlevel

from toolkernel import MCPServer, ToolContext

app = MCPServer("reports", "1.0.0")


@app.tool
async def build_report(pages: int, ctx: ToolContext) -> str:
    """Build a report page by page, telling the client how far along it is."""
    user = ctx.values.get("user", "anonymous")  # from _meta["toolkernel/context"] or middleware
    caller = ctx.auth.subject if ctx.auth else None  # set by an authenticating HTTP transport
    await ctx.info("building report", pages=pages, user=user)
    for page in range(1, pages + 1):
        await anyio.lowlevel.checkpoint()  # real work goes here
        await ctx.progress(page, total=pages, message=f"page {page} of {pages}")
    return f"{pages} pages for {user} (caller {caller}, session {ctx.session_id})"
