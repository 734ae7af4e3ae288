"""Tracing: SERVER spans per MCP request, execute_tool spans with lifecycle events, trace ids in logs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import SpanKind, StatusCode

from toolkernel import MCPServer, ToolContext, hookimpl
from toolkernel.testing import connect_in_memory

ROOT = Path(__file__).resolve().parents[2]
MODES = ["legacy", "auto"]


class LifecycleHooks:
    """Implements the tool events so the kernel records them as span events."""

    @hookimpl
    def on_tool_input_start(self, event):
        pass

    @hookimpl
    def on_tool_input_delta(self, event):
        pass

    @hookimpl
    def on_tool_input_available(self, event):
        pass

    @hookimpl
    def on_tool_output(self, event):
        pass

    @hookimpl
    def on_tool_error(self, event):
        pass


def _server(kernel: Any) -> MCPServer:
    server = MCPServer("traced", kernel=kernel)

    @server.tool
    async def echo(text: str, ctx: ToolContext) -> str:
        """Echo, logging on the way."""
        await ctx.info("inside the tool", text=text)
        return text

    @server.tool
    def boom() -> str:
        """Raise."""
        raise RuntimeError("kaput")

    return server


def _by_name(spans: Any) -> dict[str, Any]:
    return {s.name: s for s in spans.get_finished_spans()}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_tools_call_server_span_and_execute_tool_span_with_hook_events(kernel_with, spans, mode):
    kernel = kernel_with(LifecycleHooks())
    async with connect_in_memory(_server(kernel), mode=mode) as client:
        await client.list_tools()
        spans.clear()
        result = await client.call_tool("echo", {"text": "hi"})
    assert result.content[0].text == "hi"
    finished = _by_name(spans)
    server_span = finished["tools/call echo"]
    tool_span = finished["execute_tool echo"]

    assert server_span.kind == SpanKind.SERVER
    attributes = dict(server_span.attributes)
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "echo"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert attributes["jsonrpc.request.id"].isdigit()
    assert server_span.status.status_code == StatusCode.UNSET

    assert tool_span.kind == SpanKind.INTERNAL
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == server_span.context.span_id
    assert tool_span.context.trace_id == server_span.context.trace_id
    assert dict(tool_span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": attributes["jsonrpc.request.id"],
    }
    assert [e.name for e in tool_span.events] == [
        "on_tool_input_start",
        "on_tool_input_delta",
        "on_tool_input_available",
        "on_tool_output",
    ]
    assert all(dict(e.attributes) == {"gen_ai.tool.name": "echo"} for e in tool_span.events)


@pytest.mark.anyio
async def test_failing_calls_mark_their_spans(kernel_with, spans):
    kernel = kernel_with(LifecycleHooks())
    async with connect_in_memory(_server(kernel)) as client:
        spans.clear()
        failed = await client.call_tool("boom", {})
        with pytest.raises(MCPError):
            await client.call_tool("missing", {})
    assert failed.is_error is True
    finished = _by_name(spans)
    boom = finished["tools/call boom"]
    assert boom.status.status_code == StatusCode.ERROR
    assert boom.attributes["error.type"] == "tool_error"
    assert [e.name for e in finished["execute_tool boom"].events] == [
        "on_tool_input_start",
        "on_tool_input_delta",
        "on_tool_input_available",
        "on_tool_error",
    ]
    missing = finished["tools/call missing"]
    assert missing.status.status_code == StatusCode.ERROR
    assert missing.attributes["error.type"] == "-32602"
    assert "execute_tool missing" not in finished


@pytest.mark.anyio
async def test_other_requests_get_server_spans(kernel, spans):
    async with connect_in_memory(_server(kernel)) as client:
        spans.clear()
        await client.list_tools()
    (span,) = [s for s in spans.get_finished_spans() if s.name == "tools/list"]
    assert span.kind == SpanKind.SERVER
    assert span.attributes["mcp.method.name"] == "tools/list"
    assert "gen_ai.tool.name" not in span.attributes


@pytest.mark.anyio
async def test_trace_context_propagates_from_the_caller(kernel, spans):
    from opentelemetry import trace

    async with connect_in_memory(_server(kernel)) as client:
        spans.clear()
        with trace.get_tracer("test").start_as_current_span("caller") as outer:
            await client.call_tool("echo", {"text": "x"})
    finished = _by_name(spans)
    server_span = finished["tools/call echo"]
    client_span = finished["MCP send tools/call echo"]
    # The SDK client sends its span in _meta (traceparent); the server span continues that trace.
    assert server_span.context.trace_id == outer.get_span_context().trace_id
    assert server_span.parent is not None
    assert server_span.parent.span_id == client_span.context.span_id
    assert client_span.kind == SpanKind.CLIENT


@pytest.fixture
def restore_logging():
    """Put structlog and the root logger back as they were after the test reconfigures them."""
    saved = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


@pytest.mark.anyio
async def test_log_lines_inside_a_tool_carry_the_trace_id(kernel, spans, capsys, restore_logging):
    from toolkernel._logging import configure_logging

    # The kernel's real logging configuration: JSON lines on stderr (pytest's capture, here).
    configure_logging("DEBUG", json=True)
    async with connect_in_memory(_server(kernel)) as client:
        spans.clear()
        capsys.readouterr()
        await client.call_tool("echo", {"text": "logged"})
    logged = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    lines = [line for line in logged if line.get("event") == "inside the tool"]
    tool_span = _by_name(spans)["execute_tool echo"]
    assert len(lines) == 1
    assert lines[0]["text"] == "logged"
    assert lines[0]["tool"] == "echo"
    assert lines[0]["level"] == "info"
    assert lines[0]["trace_id"] == format(tool_span.context.trace_id, "032x")
    assert lines[0]["span_id"] == format(tool_span.context.span_id, "016x")


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_tracing_is_off_without_a_provider_and_on_after_configure_from_env():
    code = (
        "from toolkernel._telemetry import tracing_enabled, configure_from_env\n"
        "from toolkernel._telemetry import tool_span, current_trace_ids\n"
        "off = tracing_enabled()\n"
        "with tool_span('t', '1') as span: none_span = span is None\n"
        "unasked = configure_from_env({})\n"
        "refused = configure_from_env({'OTEL_TRACES_EXPORTER': 'none'})\n"
        "still_off = tracing_enabled()\n"
        "on = configure_from_env({'OTEL_TRACES_EXPORTER': 'console'})\n"
        "with tool_span('t', '1') as span: ids = sorted(current_trace_ids())\n"
        "print(off, none_span, unasked, refused, still_off, on, tracing_enabled(), ids)\n"
    )
    out = _python(code).splitlines()[0]
    assert out == "False True False False False True True ['span_id', 'trace_id']"


@pytest.mark.anyio
async def test_served_process_exports_spans_to_stderr_and_keeps_stdout_clean():
    import anyio

    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "otel"}},
        },
    ]
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "echo-under-test"}
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-m", "toolkernel", "serve", "docs/examples/echo_server.py:app"],
            cwd=ROOT,
            env=env,
        ) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            assert proc.stderr is not None
            await proc.stdin.send("".join(json.dumps(r) + "\n" for r in requests).encode())
            received = b""
            while received.count(b"\n") < 2:
                received += await proc.stdout.receive()
            await proc.stdin.aclose()
            stderr = b"".join([chunk async for chunk in proc.stderr]).decode()
            received += b"".join([chunk async for chunk in proc.stdout])
            code = await proc.wait()
    assert code == 0, stderr
    responses = [json.loads(line) for line in received.decode().splitlines()]
    assert [r["id"] for r in responses] == [1, 2]
    assert responses[1]["result"]["content"] == [{"type": "text", "text": "otel"}]
    assert '"name": "tools/call echo"' in stderr
    assert '"name": "execute_tool echo"' in stderr
    assert '"service.name": "echo-under-test"' in stderr


def test_logging_follows_sys_stderr_when_it_is_replaced(monkeypatch, restore_logging):
    import io

    from toolkernel._logging import configure_logging, get_logger

    configure_logging("INFO", json=True)
    replaced = io.StringIO()
    monkeypatch.setattr(sys, "stderr", replaced)
    get_logger("toolkernel.test").warning("after the swap", n=1)
    logging.getLogger("toolkernel.stdlib").error("stdlib after the swap")
    lines = replaced.getvalue().splitlines()
    assert json.loads(lines[0])["event"] == "after the swap"
    assert json.loads(lines[0])["n"] == 1
    assert lines[1] == "ERROR toolkernel.stdlib: stdlib after the swap"
