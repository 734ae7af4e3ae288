"""The kernel's direct answers (``toolkernel._direct``) reply byte for byte as the SDK's runner does.

Every case goes to two apps serving the same tools: one whose stateless requests get the
direct answer, and one whose SDK server has one more (pass-through) SDK middleware, which
the direct answer never skips: that app answers every request through the SDK's runner.
Status, headers and body must be equal, in JSON and SSE mode, at every handshake-era
version; and the plain cases must really have been answered without the runner.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server.runner import ServerRunner
from pydantic import BaseModel

from toolkernel import Kernel, MCPServer, ToolContext, ToolResult, hookimpl
from toolkernel_http import asgi_app

from .test_http_stateless_cost import JSON_HEADERS, _request

VERSIONS = (None, "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


class Point(BaseModel):
    x: float
    label: str | None = None


class Recorder:
    """A kernel plugin recording the lifecycle hooks a call fires."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def on_tool_input_start(self, event: Any) -> None:
        self.seen.append(f"start {event.tool_name}")

    @hookimpl
    def on_tool_output(self, event: Any) -> None:
        self.seen.append(f"output {event.tool_name}")

    @hookimpl
    def on_tool_error(self, event: Any) -> None:
        self.seen.append(f"error {event.tool_name}")


def make_server(recorder: Recorder | None = None) -> MCPServer:
    """One tool per kind of answer: text, structured, meta, errors, images, context readers, tasks."""
    plugins = [recorder] if recorder is not None else []
    server = MCPServer("direct", "1.0.0", kernel=Kernel(load_entry_points=False, plugins=plugins))

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool
    async def shout(text: str, times: int = 1) -> str:
        """Return the text upper-cased, ``times`` times."""
        return text.upper() * times

    @server.tool
    def point(x: float) -> Point:
        """A structured result."""
        return Point(x=x)

    @server.tool
    def stats(values: list[float]) -> dict[str, Any]:
        """A plain dict: text content only."""
        return {"n": len(values), "total": sum(values), "none": None}

    @server.tool
    def with_meta(text: str) -> ToolResult:
        """A result with ``_meta``, structured content and a failing flag."""
        return ToolResult(
            content=[text, "second"],
            structured={"t": text, "nan": float("nan")},
            meta={"k": None},
            is_error=True,
        )

    @server.tool
    def boom(text: str) -> str:
        """Fail."""
        raise RuntimeError(f"no {text}")

    @server.tool
    def nothing() -> None:
        """Return no content."""

    @server.tool
    def picture() -> ToolResult:
        """An image block beside a text block."""
        return ToolResult(content=[{"type": "image", "data": "aGk=", "mimeType": "image/png"}, "caption"])

    @server.tool
    def about(ctx: ToolContext) -> str:
        """What the call can read of its request."""
        headers = ctx.headers or {}
        return json.dumps(
            [
                ctx.request_id,
                ctx.protocol_version,
                ctx.session_id,
                headers.get("accept"),
                ctx.cancel_requested,
            ]
        )

    @server.tool
    async def chatty(ctx: ToolContext) -> str:
        """Log and report progress (events in SSE mode, dropped from a JSON body)."""
        await ctx.log("info", "working")
        await ctx.progress(1, 2)
        return "done"

    @server.tool
    def bad_text() -> str:
        """A result JSON cannot carry (a lone surrogate)."""
        return "\ud800"

    @server.tool(task="optional")
    def taskable(text: str) -> str:
        """May run as a task: always the SDK's path."""
        return text

    @server.tool(scopes=("admin",))
    def scoped() -> str:
        """Needs a scope, which no caller has without auth (auth off: allowed)."""
        return "ok"

    return server


def _body(method: str, params: Any = None, request_id: Any = 7, **extra: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method, **extra}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def _call(name: Any, arguments: Any = None, request_id: Any = 7, **params: Any) -> bytes:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return _body("tools/call", body, request_id)


# Cases the direct answer serves (the runner must not run for them) ...
DIRECT = {
    "echo": _call("echo", {"text": "hi"}),
    "echo, string id": _call("echo", {"text": "s"}, request_id="abc"),
    "echo, negative id": _call("echo", {"text": "n"}, request_id=-3),
    "echo, unicode": _call("echo", {"text": 'h\u00e9 \u2603 \U0001f600 "q" \\ \n'}),
    "async tool": _call("shout", {"text": "a", "times": 3}),
    "structured": _call("point", {"x": 1.5}),
    "dict result": _call("stats", {"values": [1, 2.5]}),
    "meta, isError, nan": _call("with_meta", {"text": "m"}),
    "tool raises": _call("boom", {"text": "x"}),
    "no content": _call("nothing", {}),
    "no arguments": _call("nothing"),
    "image": _call("picture", {}),
    "reads its context": _call("about", {}),
    "logs and progress": _call("chatty", {}),
    "unencodable result": _call("bad_text", {}),
    "scoped tool, no auth": _call("scoped", {}),
    "wrong argument type": _call("echo", {"text": 3}),
    "missing argument": _call("echo", {}),
    "extra argument": _call("echo", {"text": "a", "more": 1}),
    "unknown tool": _call("nope", {}),
    "tools/list": _body("tools/list"),
    "ping": _body("ping"),
}
# ... and those it leaves to the runner.
RUNNER = {
    "task tool": _call("taskable", {"text": "t"}),
    "progress token": _call("chatty", {}, _meta={"progressToken": "p1"}),
    "context values": _call("about", {}, _meta={"toolkernel/context": {"a": 1}}),
    "arguments null": _body("tools/call", {"name": "echo", "arguments": None}),
    "arguments a list": _call("echo", [1]),
    "name not a string": _call(5, {}),
    "no name": _body("tools/call", {"arguments": {}}),
    "no params": _body("tools/call"),
    "params a list": _body("tools/call", [1]),
    "extra param": _call("echo", {"text": "e"}, task={"ttl": 1}),
    "tools/list cursor": _body("tools/list", {"cursor": "bm9wZQ=="}),
    "tools/list meta": _body("tools/list", {"_meta": {"progressToken": 1}}),
    "ping with params": _body("ping", {"_meta": {}}),
    "unknown method": _body("no/such"),
    "resources/list": _body("resources/list"),
    "float id": _body("ping", request_id=2.0),
}


class PassThrough:
    """An SDK middleware that changes nothing: its presence alone sends requests through the runner."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)


def _apps(json_response: bool) -> tuple[Any, Any]:
    direct = asgi_app(make_server(), stateless=True, json_response=json_response)
    runner = asgi_app(make_server(), stateless=True, json_response=json_response)
    runner.session_manager.app.middleware.append(PassThrough())
    return direct, runner


def _headers(version: str | None) -> list[tuple[bytes, bytes]]:
    return JSON_HEADERS if version is None else [*JSON_HEADERS, (b"mcp-protocol-version", version.encode())]


def _cases(cases: dict[str, bytes]) -> Iterator[tuple[str, bytes, list[tuple[bytes, bytes]]]]:
    for version in VERSIONS:
        for name, body in cases.items():
            yield f"{name} @ {version}", body, _headers(version)


@pytest.mark.anyio
@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
async def test_direct_answers_equal_the_runners(json_response: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case, at every version: same status, headers and body; the plain ones skip the runner.

    Untraced, as a server without an exporter is: a tracer provider another test installed in
    this process (OpenTelemetry's is global and set once) would send every call to the runner.
    Traced calls are checked in a process of their own below.
    """
    from opentelemetry import trace

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    runs: list[str] = []
    on_request = ServerRunner._on_request

    async def counted(self: Any, dctx: Any, method: str, params: Any) -> Any:
        runs.append(method)
        return await on_request(self, dctx, method, params)

    monkeypatch.setattr(ServerRunner, "_on_request", counted)
    direct, runner = _apps(json_response)
    async with direct.lifespan(), runner.lifespan():
        for name, body, headers in _cases(DIRECT):
            ours = await _request(direct, body, headers)
            assert not runs, f"{name}: the direct app went through the runner"
            theirs = await _request(runner, body, headers)
            assert runs, f"{name}: the reference app did not go through the runner"
            runs.clear()
            assert ours == theirs, name
            assert ours[0] == 200, name
        for name, body, headers in _cases(RUNNER):
            ours = await _request(direct, body, headers)
            theirs = await _request(runner, body, headers)
            assert ours == theirs, name


@pytest.mark.anyio
async def test_direct_answers_say_what_the_runner_says_in_detail() -> None:
    """Spot checks of the shared answers, so that two equal wrong answers cannot pass."""
    direct, _ = _apps(True)
    async with direct.lifespan():

        async def answer(body: bytes, version: str | None = "2025-06-18") -> Any:
            status, _, content = await _request(direct, body, _headers(version))
            assert status == 200
            return json.loads(content)

        assert await answer(DIRECT["echo"]) == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": "hi"}], "isError": False},
        }
        structured = (await answer(DIRECT["structured"]))["result"]
        assert structured["structuredContent"] == {"x": 1.5, "label": None}
        failed = (await answer(DIRECT["tool raises"]))["result"]
        assert failed["isError"] is True
        assert "no x" in failed["content"][0]["text"]
        invalid = (await answer(DIRECT["wrong argument type"]))["result"]
        assert invalid["isError"] is True
        assert "text" in invalid["content"][0]["text"]
        unknown = await answer(DIRECT["unknown tool"])
        assert unknown["error"]["code"] == -32602
        assert "nope" in unknown["error"]["message"]
        unencodable = await answer(DIRECT["unencodable result"])
        assert unencodable["error"]["code"] == -32603
        assert "bad_text" in unencodable["error"]["message"]
        about = json.loads((await answer(DIRECT["reads its context"]))["result"]["content"][0]["text"])
        assert about == [7, "2025-06-18", None, "application/json, text/event-stream", False]
        listed = (await answer(DIRECT["tools/list"]))["result"]["tools"]
        assert "echo" in [t["name"] for t in listed]
        assert await answer(DIRECT["ping"]) == {"jsonrpc": "2.0", "id": 7, "result": {}}


@pytest.mark.anyio
async def test_direct_calls_run_the_kernels_call_path() -> None:
    """Lifecycle hooks, tool middleware and the server's own middleware all see a direct call."""
    recorder = Recorder()
    server = make_server(recorder)
    seen: list[str] = []

    async def middleware(call: Any, call_next: Any) -> Any:
        seen.append(call.tool.name)
        return await call_next(call)

    server.middleware.append(middleware)
    app = asgi_app(server, stateless=True, json_response=True)
    async with app.lifespan():
        for body in (DIRECT["echo"], DIRECT["tool raises"], DIRECT["wrong argument type"]):
            status, _, _ = await _request(app, body, JSON_HEADERS)
            assert status == 200
    assert seen == ["echo", "boom", "echo"]
    assert recorder.seen == [
        "start echo",
        "output echo",
        "start boom",
        "error boom",
        "start echo",
        "error echo",
    ]


_TRACED = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
sys.path.insert(0, sys.argv[1])
from tests.test_http_direct_answers import make_server, DIRECT, JSON_HEADERS, _request
from toolkernel_http import asgi_app

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def main():
    app = asgi_app(make_server(), stateless=True, json_response=True)
    async with app.lifespan():
        status, _, body = await _request(app, DIRECT["echo"], JSON_HEADERS)
    names = sorted(s.name for s in exporter.get_finished_spans())
    return status, json.loads(body)["result"]["content"][0]["text"], names

print(json.dumps(asyncio.run(main())))
"""


def test_with_tracing_on_calls_keep_their_spans() -> None:
    """With a tracer provider installed, a stateless call still gets its SERVER and execute_tool spans."""
    from pathlib import Path

    plugin = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _TRACED, str(plugin)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    status, text, names = json.loads(done.stdout)
    assert (status, text) == (200, "hi")
    assert names == ["execute_tool echo", "tools/call echo"]
