"""Task-augmented tools (2025-11-25 Tasks) against server-everything's ``simulate-research-query``.

The tool requires task execution: the client creates the task, reports its status
changes as progress, answers the elicitation the task asks for while it waits on
``tasks/result``, and cancels the task on the server when the call is cancelled.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolkernel.client import MCPClient
from toolkernel.client.errors import REQUEST_CANCELLED
from toolkernel.errors import MCPClientError

from .conftest import EVERYTHING, ROOT, everything_http, everything_stdio

pytestmark = [pytest.mark.node, pytest.mark.anyio, pytest.mark.timeout(180)]

TOOL = "simulate-research-query"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def clarify(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Pick the second interpretation the server offers."""
    schema = getattr(params, "requested_schema", None) or {}
    choices = schema["properties"]["interpretation"]["oneOf"]
    return types.ElicitResult(action="accept", content={"interpretation": choices[1]["const"]})


@pytest.fixture(scope="module")
async def client(client_kernel: Any) -> AsyncIterator[MCPClient]:
    with everything_http("streamableHttp") as http:
        config = {
            "servers": {"stdio": everything_stdio(), "http": {"url": http.url}},
            "throw_on_load_error": True,
        }
        async with MCPClient(config, kernel=client_kernel, persist=False, elicitation_handler=clarify) as c:
            yield c


def test_cli_calls_a_task_tool() -> None:
    """``toolkernel call`` waits for the task and prints the tool's result."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkernel",
            "call",
            f"node {EVERYTHING} stdio",
            TOOL,
            "--args",
            '{"topic": "tide pools"}',
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "# Research Report: tide pools" in run.stdout
    assert "Stage 4: Generating report" in run.stdout


@pytest.mark.parametrize("server", ["stdio", "http"])
async def test_the_call_waits_for_the_task_and_reports_its_statuses(client: MCPClient, server: str) -> None:
    seen: list[str] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message or "")

    out = await client.call_server_tool(server, TOOL, {"topic": "rivers"}, on_progress=progress)
    assert out.text.startswith("# Research Report: rivers")
    # Which stages a poll lands on depends on timing; the first status and the form do not.
    assert seen, "no task status was reported"
    assert re.fullmatch(r"task \S+ working(: .*)?", seen[0]), seen
    assert len({m.split()[1] for m in seen}) == 1, seen


async def test_the_task_asks_for_clarification_and_gets_it(client: MCPClient) -> None:
    """The elicitation arrives while the client waits on tasks/result; the answer shapes the report."""
    out = await client.call_server_tool("stdio", TOOL, {"topic": "python", "ambiguous": True})
    assert "# Research Report: python (snake)" in out.text


async def test_cancelling_the_call_cancels_the_task_on_the_server(client: MCPClient) -> None:
    task_ids: list[str] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        found = re.match(r"task (\S+) ", message or "")
        if found and found.group(1) not in task_ids:
            task_ids.append(found.group(1))
            client.cancel("research-1")

    with pytest.raises(MCPClientError) as caught:
        await client.call_server_tool(
            "stdio", TOOL, {"topic": "glaciers"}, run_id="research-1", on_progress=progress
        )
    assert caught.value.code == REQUEST_CANCELLED
    (task_id,) = task_ids
    with anyio.fail_after(10):
        state = await client.get_task("stdio", task_id)
    assert state.status == "cancelled"


async def test_a_tool_that_requires_a_task_cannot_be_called_without(client: MCPClient) -> None:
    with pytest.raises(MCPClientError, match="runs only as a task"):
        await client.call_server_tool("stdio", TOOL, {"topic": "x"}, task=False)
