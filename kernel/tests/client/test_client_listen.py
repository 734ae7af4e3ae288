"""``subscriptions/listen`` (2026-07-28) is opened only when the server has something to tell.

A server whose capabilities set no ``listChanged`` flag and no ``subscribe`` flag sends
nothing on a listen stream, and FastMCP answers the request with -32601; the client
used to open it anyway and retry it every second for as long as it stayed connected.
A recording stdio proxy shows on the wire which requests the client made.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkernel.client import MCPClient
from toolkernel.errors import MCPClientError

from .conftest import ECHO_APP, ROOT

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

PROXY = Path(__file__).resolve().parent / "recording_proxy.py"
QUIET_FASTMCP = """
from fastmcp import FastMCP

app = FastMCP("quiet")


@app.tool
def echo(text: str) -> str:
    return text


app.run(show_banner=False)
"""
WAIT_S = 2.5
"""Long enough for the old code to have sent the request and retried it twice."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _recorded(server: list[str], log: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(PROXY), str(log), *server],
        "cwd": str(ROOT),
        "protocol": "2026-07-28",
        "stderr": "devnull",
    }


async def test_no_listen_when_the_server_offers_nothing(client_kernel: Any, tmp_path: Path) -> None:
    script = tmp_path / "quiet.py"
    script.write_text(QUIET_FASTMCP)
    log = tmp_path / "methods.log"
    server = _recorded([sys.executable, str(script)], log)
    config = {"servers": {"quiet": server}, "throw_on_load_error": True}
    async with MCPClient(config, kernel=client_kernel, persist=False) as client:
        caps = client.get_servers()["quiet"].capabilities
        assert caps is not None
        assert caps.tools is not None
        assert not caps.tools.list_changed
        assert (await client.call_tool("quiet_echo", {"text": "hi"})).text == "hi"
        await anyio.sleep(WAIT_S)
        with pytest.raises(MCPClientError, match="subscri"):
            await client.subscribe_resource("quiet", "file:///anything")
    methods = log.read_text().split()
    assert "tools/list" in methods
    assert "tools/call" in methods
    assert "subscriptions/listen" not in methods


async def test_listen_when_the_server_announces_list_changes(client_kernel: Any, tmp_path: Path) -> None:
    """The control: toolkernel's server sets ``tools.listChanged``, so one listen stream is opened."""
    log = tmp_path / "methods.log"
    serve = [sys.executable, "-m", "toolkernel", "serve", f"{ECHO_APP}:app"]
    config = {"servers": {"tk": _recorded(serve, log)}, "throw_on_load_error": True}
    async with MCPClient(config, kernel=client_kernel, persist=False) as client:
        caps = client.get_servers()["tk"].capabilities
        assert caps is not None
        assert caps.tools is not None
        assert caps.tools.list_changed
        await anyio.sleep(WAIT_S)
    assert log.read_text().split().count("subscriptions/listen") == 1
