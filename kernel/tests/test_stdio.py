"""stdio for real: `python -m toolkernel serve` as a subprocess, driven by the SDK client,
toolkernel's own client transport, raw JSON lines and the MCP Inspector CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from toolkernel._builtin._stdio_transport import END_OF_INPUT_GRACE_S
from toolkernel.testing import connect_sdk_client as connect

ROOT = Path(__file__).resolve().parents[2]
ECHO_TARGET = "docs/examples/echo_server.py:app"
SERVE = [sys.executable, "-m", "toolkernel", "serve"]
TIMEOUT = 30
INSPECTOR = ROOT / "tests/node/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
UNICODE = 'héllo wörld 🌍 中文 \u2028 tab\t quote" backslash\\ newline\n end'

NOISY_SERVER = textwrap.dedent(
    '''
    import sys

    from toolkernel import MCPServer

    app = MCPServer("noisy", "0.0.1")


    @app.tool
    def noisy(text: str) -> str:
        """Prints to stdout before answering."""
        print("NOISE FROM A TOOL:", text)
        print("MORE NOISE", file=sys.stdout, flush=True)
        return text.upper()
    '''
)


SLOW_SERVER = textwrap.dedent(
    '''
    import anyio

    from toolkernel import MCPServer

    app = MCPServer("slow", "0.0.1")


    @app.tool
    async def slow(text: str) -> str:
        """Answers after a short while."""
        await anyio.sleep(0.3)
        return text


    @app.tool
    async def stuck() -> str:
        """Never answers."""
        await anyio.sleep(3600)
        return "never"
    '''
)


SURROGATE_SERVER = textwrap.dedent(
    '''
    from toolkernel import MCPServer

    app = MCPServer("surrogates", "0.0.1")


    @app.tool
    def listing() -> str:
        """A file name as os.fsdecode gives it for non-UTF-8 bytes: JSON cannot encode it."""
        return "report-\\udcff.txt"
    '''
)


def _env() -> dict[str, str]:
    return {**os.environ, "TOOLKERNEL_LOG_LEVEL": "WARNING"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_lists_and_calls_echo(mode):
    params = StdioServerParameters(
        command=sys.executable, args=[*SERVE[1:], ECHO_TARGET], cwd=str(ROOT), env=_env()
    )
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode=mode) as client:
            tools = (await client.list_tools()).tools
            result = await client.call_tool("echo", {"text": UNICODE})
            bad = await client.call_tool("echo", {"text": 1})
            version = client.protocol_version
            server_info = client.server_info
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert server_info is not None
    assert (server_info.name, server_info.version) == ("echo", "1.0.0")
    assert [t.name for t in tools] == ["echo"]
    assert tools[0].description == "Return the text unchanged."
    assert result.is_error is False
    assert result.content[0].text == UNICODE
    assert bad.is_error is True
    assert bad.content[0].text == "Invalid input for tool 'echo': text: Input should be a valid string"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_toolkernel_stdio_client_transport(kernel, mode):
    command = f"{sys.executable} -m toolkernel serve {ROOT / ECHO_TARGET}"
    with anyio.fail_after(TIMEOUT):
        async with connect(kernel, command, mode=mode) as client:
            result = await client.call_tool("echo", {"text": UNICODE})
    assert result.content[0].text == UNICODE


class RawServer:
    """A served subprocess spoken to in raw JSON lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, target: str, cwd: Path = ROOT) -> RawServer:
        proc = await asyncio.create_subprocess_exec(
            *SERVE,
            target,
            cwd=cwd,
            env=_env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    async def send_line(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() if isinstance(line, str) else line)
        await self.proc.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message) + "\n")

    async def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with anyio.fail_after(TIMEOUT):
            line = await self.proc.stdout.readline()
        assert line.endswith(b"\n"), f"server closed its stdout: {line!r}"
        return json.loads(line)

    async def request(self, id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        return await self.receive()

    async def initialize(self) -> dict[str, Any]:
        response = await self.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response

    async def close_and_wait(self) -> tuple[int, str]:
        """Close stdin; the server must exit on its own within the timeout."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        with anyio.fail_after(TIMEOUT):
            code = await self.proc.wait()
            stderr = await self.proc.stderr.read() if self.proc.stderr is not None else b""
        return code, stderr.decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


@pytest.mark.anyio
async def test_malformed_lines_get_jsonrpc_errors_and_the_server_keeps_serving():
    server = await RawServer.start(ECHO_TARGET)
    try:
        init = await server.initialize()
        assert init["result"]["serverInfo"]["name"] == "echo"
        await server.send_line("{not json\n")
        parse_error = await server.receive()
        await server.send_line('{"jsonrpc": "2.0", "no": "method"}\n')
        invalid = await server.receive()
        await server.send_line("\n")  # blank lines are skipped, not answered
        listed = await server.request(1, "tools/list", {})
        not_object = await server.request(2, "tools/call", {"name": "echo", "arguments": [1, 2]})
        unknown = await server.request(3, "tools/call", {"name": "nope", "arguments": {}})
        unicode = await server.request(4, "tools/call", {"name": "echo", "arguments": {"text": UNICODE}})
        code, _ = await server.close_and_wait()
    finally:
        server.kill()

    assert parse_error == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32700,
            "message": "Parse error: Invalid JSON: key must be a string at line 1 column 2",
        },
    }
    assert invalid["id"] is None
    assert invalid["error"]["code"] == -32600
    assert [t["name"] for t in listed["result"]["tools"]] == ["echo"]
    assert listed["id"] == 1
    assert not_object["id"] == 2
    assert not_object["error"]["code"] == -32602
    assert unknown["error"] == {"code": -32602, "message": "Unknown tool: 'nope'"}
    assert unicode["result"]["content"] == [{"type": "text", "text": UNICODE}]
    assert code == 0


@pytest.mark.anyio
async def test_tool_printing_to_stdout_does_not_corrupt_the_wire(tmp_path):
    (tmp_path / "noisy_server.py").write_text(NOISY_SERVER)
    server = await RawServer.start(f"{tmp_path / 'noisy_server.py'}:app", cwd=tmp_path)
    try:
        await server.initialize()
        first = await server.request(1, "tools/call", {"name": "noisy", "arguments": {"text": "abc"}})
        second = await server.request(2, "tools/call", {"name": "noisy", "arguments": {"text": "déf"}})
        code, stderr = await server.close_and_wait()
        assert server.proc.stdout is not None
        rest = await server.proc.stdout.read()
    finally:
        server.kill()
    assert first["result"]["content"] == [{"type": "text", "text": "ABC"}]
    assert second["result"]["content"] == [{"type": "text", "text": "DÉF"}]
    assert rest == b""
    assert code == 0
    assert "NOISE FROM A TOOL: abc" in stderr
    assert "NOISE FROM A TOOL: déf" in stderr
    assert stderr.count("MORE NOISE") == 2


@pytest.mark.anyio
async def test_unencodable_result_is_an_internal_error_naming_the_tool(tmp_path):
    (tmp_path / "surrogate_server.py").write_text(SURROGATE_SERVER)
    server = await RawServer.start(f"{tmp_path / 'surrogate_server.py'}:app", cwd=tmp_path)
    try:
        await server.initialize()
        failed = await server.request(1, "tools/call", {"name": "listing", "arguments": {}})
        listed = await server.request(2, "tools/list", {})
        code, _ = await server.close_and_wait()
    finally:
        server.kill()
    assert failed["id"] == 1
    assert failed["error"]["code"] == -32603
    assert "tool 'listing'" in failed["error"]["message"]
    assert "JSON" in failed["error"]["message"]
    assert listed["result"]["tools"][0]["name"] == "listing"
    assert code == 0


@pytest.mark.anyio
async def test_reinitialize_is_refused_and_the_session_keeps_its_version():
    server = await RawServer.start(ECHO_TARGET)
    try:
        await server.initialize()
        params = {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "again", "version": "0"},
        }
        again = await server.request(1, "initialize", params)
        broken = await server.request(2, "initialize", {"protocolVersion": 7})
        echoed = await server.request(3, "tools/call", {"name": "echo", "arguments": {"text": "intact"}})
        code, _ = await server.close_and_wait()
    finally:
        server.kill()
    assert again["error"]["code"] == -32600
    assert "already initialized" in again["error"]["message"]
    assert broken["error"]["code"] == -32600
    assert echoed["result"]["content"][0]["text"] == "intact"
    assert code == 0


def test_server_exits_at_once_when_stdin_is_dev_null():
    done = subprocess.run(
        [*SERVE, ECHO_TARGET],
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""


@pytest.mark.anyio
async def test_server_exits_when_stdin_closes_mid_session():
    server = await RawServer.start(ECHO_TARGET)
    try:
        await server.initialize()
        echoed = await server.request(1, "tools/call", {"name": "echo", "arguments": {"text": "bye"}})
        code, stderr = await server.close_and_wait()
    finally:
        server.kill()
    assert echoed["result"]["content"][0]["text"] == "bye"
    assert code == 0, stderr


def _inspector_or_skip() -> Path:
    if not INSPECTOR.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"the MCP Inspector is not installed at {INSPECTOR} (npm ci in tests/node)")
        pytest.skip("tests/node/node_modules is missing: run npm ci in tests/node to use the MCP Inspector")
    return INSPECTOR


@pytest.mark.node
def test_inspector_cli_lists_and_calls_echo():
    inspector = _inspector_or_skip()
    base = ["node", str(inspector), "--cli", *SERVE, ECHO_TARGET]
    # The Inspector takes seconds to start: run both commands side by side.
    procs = [
        subprocess.Popen(
            [*base, *extra],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for extra in (
            ["--method", "tools/list"],
            ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=héllo inspector"],
        )
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                proc.wait(timeout=10)
    listed, called = outputs
    assert [t["name"] for t in listed["tools"]] == ["echo"]
    assert listed["tools"][0]["inputSchema"]["required"] == ["text"]
    assert called == {"content": [{"type": "text", "text": "héllo inspector"}], "isError": False}


def _initialize() -> list[dict[str, object]]:
    return [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "f", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def test_requests_from_a_file_are_all_answered(tmp_path):
    (tmp_path / "slow_server.py").write_text(SLOW_SERVER)
    requests = [
        *_initialize(),
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"text": "a"}},
        },
    ]
    batch = tmp_path / "requests.jsonl"
    batch.write_text("".join(json.dumps(r) + "\n" for r in requests))
    with batch.open("rb") as stdin:
        done = subprocess.run(
            [*SERVE, f"{tmp_path / 'slow_server.py'}:app"],
            cwd=tmp_path,
            env=_env(),
            stdin=stdin,
            capture_output=True,
            timeout=TIMEOUT,
        )
    assert done.returncode == 0, done.stderr
    responses = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in responses] == [1, 2]
    assert responses[1]["result"]["content"] == [{"type": "text", "text": "a"}]


def test_a_request_cancelled_before_input_ends_is_not_waited_for(tmp_path):
    (tmp_path / "slow_server.py").write_text(SLOW_SERVER)
    requests = [
        *_initialize(),
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "stuck", "arguments": {}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    started = time.monotonic()
    done = subprocess.run(
        [*SERVE, f"{tmp_path / 'slow_server.py'}:app"],
        cwd=tmp_path,
        env=_env(),
        input="".join(json.dumps(r) + "\n" for r in requests).encode(),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1, 3]
    # Well inside the grace that requests still running get when input ends.
    assert time.monotonic() - started < END_OF_INPUT_GRACE_S / 2
