"""Shared fixtures: a toolkernel server to serve, and a loopback uvicorn runner for any ASGI app."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import uvicorn

from toolkernel import Kernel, MCPServer, ToolContext

STARTUP_TIMEOUT_S = 60.0


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on a free loopback port; yield ``http://127.0.0.1:PORT``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(STARTUP_TIMEOUT_S):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
                await anyio.sleep(0.02)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
    sock.close()


def initialize(version: str = "2025-06-18", request_id: int = 1) -> dict[str, Any]:
    """A 2025-era ``initialize`` request body."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }


def make_server() -> MCPServer:
    """A toolkernel server with an echo tool and one that reports a request header."""
    server = MCPServer("http-test", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    def header(name: str, ctx: ToolContext) -> str:
        """Return the value of request header ``name`` (empty when absent)."""
        return (ctx.headers or {}).get(name, "")

    return server


@pytest.fixture
def tk_server() -> MCPServer:
    """A fresh toolkernel server per test."""
    return make_server()
