"""An ``mcp`` SDK MCPServer for the MCPClient tests, run as ``python sdk_server.py`` (stdio).

Its ``echo`` collides with server-everything's and the toolkernel echo server's; the
other tools give the fault tests something slow, something hanging and something that
reports progress. ``COUNTER_FILE`` (env) counts calls of ``count`` across restarts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp_types import ToolAnnotations

app = MCPServer("sdk-peer", instructions="A test peer written with the mcp SDK.")


@app.tool()
def echo(message: str) -> str:
    """Return the message with a marker."""
    return f"sdk: {message}"


@app.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


@app.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer (not idempotent: never retried)."""
    await anyio.sleep(seconds)
    return "done"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow_read(seconds: float) -> str:
    """Sleep, then answer (read-only: retried after a lost connection)."""
    await anyio.sleep(seconds)
    return f"read after {seconds}s in {os.getpid()}"


@app.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep_forever()
    return "unreachable"


@app.tool()
async def crawl(steps: int, step_seconds: float, ctx: Context) -> str:
    """Report progress every step; total time may exceed a request timeout."""
    for i in range(steps):
        await anyio.sleep(step_seconds)
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"crawled {steps}"


@app.tool()
def count() -> int:
    """Add one to the counter file; the new value."""
    path = Path(os.environ["COUNTER_FILE"])
    value = int(path.read_text() or "0") + 1 if path.exists() else 1
    path.write_text(str(value))
    return value


@app.resource("note://today", mime_type="text/plain")
def today() -> str:
    """A note the ``touch`` tool reports as updated."""
    return "nothing yet"


@app.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Add a prompt, then say the prompt list changed (both protocol eras)."""
    app.add_prompt(Prompt.from_function(lambda: f"prompt {name}", name=name, description="added at run time"))
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_prompts_changed()
    else:
        await ctx.session.send_prompt_list_changed()
    return name


@app.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Say resource ``uri`` was updated (both protocol eras)."""
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_resource_updated(uri)
    else:
        await ctx.session.send_resource_updated(uri)
    return uri


if __name__ == "__main__":
    print("sdk peer starting", file=sys.stderr)
    app.run("stdio")
