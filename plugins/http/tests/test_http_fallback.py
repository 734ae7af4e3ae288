"""Auto mode against a handshake-era Streamable HTTP server that refuses the 2026 probe with 400.

The reference server (npm @modelcontextprotocol/server-everything) speaks Streamable HTTP
but only the 2025 handshake: it answers the SDK's first ``server/discover`` POST with 400
("no valid session"). That must lead to ``initialize`` on the same transport, not to a
fall back to legacy SSE.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import anyio
import httpx
import pytest

from toolkernel import Kernel

ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / "tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def everything_url():
    if not EVERYTHING.exists():
        if os.environ.get("CI"):
            pytest.fail("npm peers missing: run python dev.py setup")
        pytest.skip("npm peers not installed (python dev.py setup)")
    port = _free_port()
    proc = subprocess.Popen(
        ["node", str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            portal.call(_wait_listening, port)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


async def _wait_listening(port: int) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                async with httpx.AsyncClient() as client:
                    await client.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
                return
            except httpx.HTTPError:
                await anyio.sleep(0.2)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_auto_mode_stays_on_streamable_http(everything_url, mode):
    from mcp.client import Client

    transport = Kernel(load_entry_points=True, only=["toolkernel-http"]).client_transport(everything_url)
    with anyio.fail_after(60):
        async with Client(transport, mode=mode) as client:
            tools = await client.list_tools()
            assert client.protocol_version == "2025-11-25"
    assert "echo" in {t.name for t in tools.tools}
