"""Tasks on the 2026-07-28 wire (the ``io.modelcontextprotocol/tasks`` extension) against toolkernel servers.

The client offers the extension; a tool the server runs as a task answers ``tools/call``
with ``resultType: "task"``, and the client polls ``tasks/get`` until the inlined result
is there, answering the task's ``inputRequests`` with ``tasks/update`` and cancelling
the task on the server when the call is cancelled. Over stdio and Streamable HTTP.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolkernel.client import MCPClient
from toolkernel.client.errors import REQUEST_CANCELLED
from toolkernel.errors import MCPClientError

from .conftest import ROOT, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

APP = '''
import anyio
from pydantic import BaseModel

from toolkernel import MCPServer, ToolContext

app = MCPServer("jobs", "1.0.0")


class Pick(BaseModel):
    colour: str


@app.tool(task="required")
async def paint(rooms: int, ctx: ToolContext) -> str:
    """Ask for a colour while running as a task, then paint."""
    answer = await ctx.elicit("Which colour?", Pick)
    colour = answer.data.colour if answer.data else "white"
    for room in range(1, rooms + 1):
        await ctx.progress(room, rooms, f"room {room} of {rooms}")
        await anyio.sleep(0.05)
    return f"{rooms} rooms painted {colour}"


@app.tool(task="optional")
async def wait(seconds: float) -> str:
    """Sleep, as a task when the client supports tasks."""
    await anyio.sleep(seconds)
    return "waited"


@app.tool
def now() -> str:
    """Answered at once, never a task."""
    return "noon"
'''


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def app_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jobs") / "jobs.py"
    path.write_text(APP)
    return path


@contextlib.contextmanager
def _http_server(app_path: Path) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "toolkernel", "serve", f"{app_path}:app", "--transport", "http"]
    proc = subprocess.Popen([*command, "--port", str(port)], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            assert proc.poll() is None, "the HTTP server exited"
            assert time.monotonic() < deadline, "the HTTP server did not listen in 60 s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)


async def pick_blue(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"colour": "blue"})


@pytest.fixture(scope="module")
async def client(client_kernel: Any, app_path: Path) -> AsyncIterator[MCPClient]:
    with _http_server(app_path) as url:
        stdio = {"command": sys.executable, "args": ["-m", "toolkernel", "serve", f"{app_path}:app"]}
        config = {"servers": {"stdio": stdio, "http": {"url": url}}, "throw_on_load_error": True}
        async with MCPClient(config, kernel=client_kernel, persist=False, elicitation_handler=pick_blue) as c:
            yield c


@pytest.mark.parametrize("server", ["stdio", "http"])
async def test_a_task_that_asks_a_question_completes(client: MCPClient, server: str) -> None:
    assert client.get_servers()[server].protocol_version == "2026-07-28"
    seen: list[str] = []
    out = await client.call_server_tool(
        server, "paint", {"rooms": 3}, on_progress=lambda done, total, message: seen.append(message or "")
    )
    assert out.text == "3 rooms painted blue"
    # The task waits for the answer, so the poll that sees input_required cannot be skipped.
    statuses = [m.split()[2].rstrip(":") for m in seen]
    assert statuses[0] in ("working", "input_required")
    assert "input_required" in statuses
    assert statuses[-1] == "completed"


@pytest.mark.parametrize("server", ["stdio", "http"])
async def test_a_plain_tool_is_answered_at_once(client: MCPClient, server: str) -> None:
    seen: list[str] = []
    out = await client.call_server_tool(server, "now", {}, on_progress=lambda *a: seen.append(str(a)))
    assert out.text == "noon"
    assert seen == []


async def test_cancelling_the_call_cancels_the_task(client: MCPClient) -> None:
    task_ids: list[str] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        found = re.match(r"task (\S+) ", message or "")
        if found and not task_ids:
            task_ids.append(found.group(1))
            client.cancel("wait-1")

    with pytest.raises(MCPClientError) as caught:
        await client.call_server_tool("stdio", "wait", {"seconds": 30}, run_id="wait-1", on_progress=progress)
    assert caught.value.code == REQUEST_CANCELLED
    with anyio.fail_after(10):
        state = await client.get_task("stdio", task_ids[0])
    assert state.status == "cancelled"
