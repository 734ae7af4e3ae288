"""``toolkernel call URL`` against real servers that speak only legacy SSE.

With ``transport: auto`` the client first tries Streamable HTTP, which such a server
refuses, then legacy SSE. The failed first attempt must leave nothing behind that
tears the SSE connection down once it is ready (it used to: the call failed with
"connection closed" while ``inspect`` worked). Three real SSE-only servers:
toolkernel's own (``serve --transport sse``), FastMCP's and server-everything's.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ECHO_APP, ROOT, everything_http, free_port

pytestmark = pytest.mark.timeout(180)

START_TIMEOUT_S = 60.0
FASTMCP_SSE = """
import sys
from fastmcp import FastMCP

app = FastMCP("fastmcp-sse")


@app.tool
def echo(text: str) -> str:
    return "fastmcp: " + text


app.run(transport="sse", host="127.0.0.1", port=int(sys.argv[1]), show_banner=False)
"""


@contextlib.contextmanager
def _listening(command: list[str], port: int) -> Iterator[None]:
    """Run ``command`` until it accepts connections on ``port``; kill it afterwards."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{command} exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not listen on {port} in {START_TIMEOUT_S}s")
            time.sleep(0.1)
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _cli_call(url: str, tool: str, args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkernel", "call", url, tool, "--args", args, "--timeout", "30"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_call_over_sse_on_toolkernel_server() -> None:
    port = free_port()
    serve = [sys.executable, "-m", "toolkernel", "serve", f"{ECHO_APP}:app", "--transport", "sse"]
    with _listening([*serve, "--port", str(port)], port):
        run = _cli_call(f"http://127.0.0.1:{port}/sse", "echo", '{"text": "over sse"}')
    assert run.returncode == 0, run.stderr
    assert "over sse" in run.stdout


def test_call_over_sse_on_fastmcp_server(tmp_path: Path) -> None:
    script = tmp_path / "fastmcp_sse.py"
    script.write_text(FASTMCP_SSE)
    port = free_port()
    with _listening([sys.executable, str(script), str(port)], port):
        run = _cli_call(f"http://127.0.0.1:{port}/sse", "echo", '{"text": "over sse"}')
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fastmcp: over sse"


@pytest.mark.node
def test_call_over_sse_on_server_everything() -> None:
    with everything_http("sse") as server:
        run = _cli_call(server.url, "get-sum", '{"a": 2, "b": 3}')
    assert run.returncode == 0, run.stderr
    assert "5" in run.stdout
