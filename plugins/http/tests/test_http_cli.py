"""A real ``toolkernel serve --transport http`` process: ``call --header`` against it, and how it stops."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from toolkernel.cli import main

from .conftest import initialize

HEADER_SERVER = '''
from toolkernel import MCPServer, ToolContext

app = MCPServer("headers")


@app.tool
def header(name: str, ctx: ToolContext) -> str:
    """The value of request header ``name``."""
    return (ctx.headers or {}).get(name, "<absent>")
'''


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``toolkernel serve --transport http --port 0`` in its own process; yields its URL and the process."""
    yield from _serve_headers(tmp_path, {})


@pytest.fixture
def served_with_a_long_grace(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The same, giving open connections 600 s to finish when it stops (``shutdown_grace_s``)."""
    yield from _serve_headers(tmp_path, {"TOOLKERNEL_HTTP_SHUTDOWN_GRACE_S": "600"})


def _serve_headers(
    tmp_path: Path, env: dict[str, str], *, stdout: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    (tmp_path / "header_server.py").write_text(HEADER_SERVER)
    command = [sys.executable, "-m", "toolkernel", "serve", f"{tmp_path / 'header_server.py'}:app"]
    proc = subprocess.Popen(
        [*command, "--transport", "http", "--port", "0"],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        assert proc.stderr is not None
        url = None
        for _ in range(50):
            line = proc.stderr.readline()
            if found := re.search(r"on (http://\S+)", line):
                url = found.group(1)
                break
        assert url is not None, "the server never said where it listens"
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def http_server(served: tuple[str, subprocess.Popen[str]]) -> str:
    return served[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_call_sends_headers_to_a_url_server(
    http_server: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["call", http_server, "header", "--args", '{"name": "x-tenant"}', "--header", "X-Tenant:  acme "]
    assert main([*args, "--mode", mode]) == 0
    assert capsys.readouterr().out == "acme\n"


@pytest.mark.timeout(120)
def test_ctrl_c_does_not_wait_for_open_get_streams(
    served_with_a_long_grace: tuple[str, subprocess.Popen[str]],
) -> None:
    """A client holding its session's GET stream open must not hold up the server's stop: with
    600 s of grace for open connections, the server still stops (the 30 s wait is only a guard;
    a server waiting for the stream would run into it) and ends the stream."""
    url, proc = served_with_a_long_grace
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = initialize()
    with httpx.Client(timeout=30) as client:
        session = client.post(url, json=init, headers=accept).headers["mcp-session-id"]
        headers = {**accept, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        opened = threading.Event()

        def hold() -> None:
            get = {"accept": "text/event-stream", "mcp-session-id": session}
            with client.stream("GET", url, headers=get) as stream:
                opened.set()
                for _ in stream.iter_bytes():
                    pass

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        assert opened.wait(10)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the server waited for the open GET stream instead of ending it")
        holder.join(10)
    assert not holder.is_alive(), "the GET stream was not ended"


ROOT = Path(__file__).resolve().parents[3]
INSPECTOR = ROOT / "tests/node/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"


@pytest.mark.node
@pytest.mark.timeout(180)
def test_inspector_cli_calls_a_tool_over_streamable_http(served: tuple[str, subprocess.Popen[str]]) -> None:
    """The MCP Inspector's CLI (TypeScript SDK) opens a stateful session and calls a tool by URL."""
    if not INSPECTOR.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"the MCP Inspector is not installed at {INSPECTOR} (npm ci in tests/node)")
        pytest.skip("tests/node/node_modules is missing: run npm ci in tests/node to use the MCP Inspector")
    url, _ = served
    args = ["--method", "tools/call", "--tool-name", "header", "--tool-arg", "name=mcp-session-id"]
    run = subprocess.run(
        ["node", str(INSPECTOR), "--cli", url, "--transport", "http", *args],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["isError"] is False
    session = result["content"][0]["text"]
    assert re.fullmatch(r"[0-9a-f]{32}", session), f"no session id reached the tool: {session!r}"


SLOW_SERVER = '''
from pathlib import Path

import anyio

from toolkernel import MCPServer

app = MCPServer("slow")


@app.tool
async def slow(marker: str) -> str:
    """Say it started (a file), take a moment, then answer."""
    Path(marker).write_text("started")
    await anyio.sleep(1.5)
    return "finished"
'''


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("signum", "inherited"),
    [
        (signal.SIGINT, signal.SIG_DFL),
        (signal.SIGTERM, signal.SIG_DFL),
        (signal.SIGINT, signal.SIG_IGN),
    ],
    ids=["SIGINT", "SIGTERM", "SIGINT-inherited-ignored"],
)
def test_a_stop_signal_lets_the_request_in_flight_finish(
    tmp_path: Path, signum: int, inherited: signal.Handlers
) -> None:
    """SIGTERM (what service managers and ``docker stop`` send) drains the server as Ctrl-C
    does: the request in flight gets its answer, and the exit status is Ctrl-C's (130).

    The server is started with SIGINT at a known disposition, not whatever the test run has:
    a background job of a shell script inherits SIGINT ignored, under which the server still
    stopped on Ctrl-C (uvicorn handles it itself) but exited 0.
    """
    (tmp_path / "slow_server.py").write_text(SLOW_SERVER)
    env = {**os.environ, "TOOLKERNEL_HTTP_STATELESS": "true", "TOOLKERNEL_HTTP_JSON_RESPONSE": "true"}
    target = f"{tmp_path / 'slow_server.py'}:app"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkernel", "serve", target, "--transport", "http", "--port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, inherited),
    )
    try:
        assert proc.stderr is not None
        found = re.search(r"on (http://\S+)", proc.stderr.readline())
        assert found is not None, "the server never said where it listens"
        marker = tmp_path / "started"
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"marker": str(marker)}},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2025-11-25",
        }
        answers: list[httpx.Response] = []
        caller = threading.Thread(
            target=lambda: answers.append(httpx.post(found.group(1), json=call, headers=headers, timeout=30))
        )
        caller.start()
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), "the tool never started"
        proc.send_signal(signum)
        caller.join(30)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert len(answers) == 1
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["result"]["content"][0]["text"] == "finished"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("level", "logged"), [("info", True), ("warning", False)])
def test_access_lines_follow_the_log_level(tmp_path: Path, level: str, logged: bool) -> None:
    """uvicorn's access line per request (on stdout) shows at ``log_level`` info, and not above it."""
    env = {"TOOLKERNEL_HTTP_LOG_LEVEL": level, "TOOLKERNEL_HTTP_STATELESS": "true"}
    served = _serve_headers(tmp_path, env, stdout=subprocess.PIPE)
    url, proc = next(served)
    try:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
        answer = httpx.post(url, json=ping, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
    finally:
        served.close()  # stops the server
    assert proc.stdout is not None
    out = proc.stdout.read()
    assert ('"POST /mcp HTTP/1.1" 200' in out) is logged, out
