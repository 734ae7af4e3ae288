"""Tools running as tasks (``io.modelcontextprotocol/tasks``) over every transport that speaks
2026-07-28: stdio, and Streamable HTTP stateful and stateless, each a real ``toolkernel serve``
subprocess of the conformance fixture driven with raw JSON-RPC.

The task surface lives on the 2026-07-28 wire; legacy SSE speaks only the 2025 handshake
era, where the SDK delivers no task results, so it is not among them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = str(ROOT / "tests/conformance/server.py") + ":app"
VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"

Send = Callable[[str, dict[str, Any]], dict[str, Any]]
"""Send one request (method, params) and return its JSON-RPC response."""


def _params(params: dict[str, Any], tasks: bool = True) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"elicitation": {}}
    if tasks:
        capabilities["extensions"] = {TASKS: {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return {**params, "_meta": meta}


@pytest.fixture(scope="module")
def stdio_send() -> Iterator[Send]:
    """A ``toolkernel serve`` of the fixture over stdio, one JSON line per message."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkernel", "serve", FIXTURE],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    ids = iter(range(1, 10_000))

    def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        while True:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert line, "the server closed stdout"
            reply = json.loads(line)
            if reply.get("id") == request_id:
                return dict(reply)

    try:
        yield send
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _http_server(tmp_path_factory: pytest.TempPathFactory, **settings: str) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server") / "stderr.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolkernel", "serve", FIXTURE, "--transport", "http", "--port", "0"],
            cwd=ROOT,
            env={**os.environ, **settings},
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 120
        while not (match := re.search(r"on (http://\S+)", log.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"server did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield match.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _http_send(url: str) -> Iterator[Send]:
    with httpx.Client(timeout=30) as client:

        def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            name = params.get("name") or params.get("taskId")
            headers = {
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": VERSION,
                "mcp-method": method,
                **({"mcp-name": str(name)} if name else {}),
            }
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            response = client.post(url, json=body, headers=headers)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
                return dict(json.loads([d for d in data if d][-1]))
            return dict(response.json())

        yield send


@pytest.fixture(scope="module")
def stateful_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _http_server(tmp_path_factory)


@pytest.fixture(scope="module")
def stateless_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _http_server(tmp_path_factory, TOOLKERNEL_HTTP_STATELESS="true")


@pytest.fixture(scope="module")
def stateful_send(stateful_url: str) -> Iterator[Send]:
    yield from _http_send(stateful_url)


@pytest.fixture(scope="module")
def stateless_send(stateless_url: str) -> Iterator[Send]:
    yield from _http_send(stateless_url)


@pytest.fixture(params=["stdio", "http-stateful", "http-stateless"])
def send(request: pytest.FixtureRequest) -> Send:
    fixture = {"stdio": "stdio_send", "http-stateful": "stateful_send", "http-stateless": "stateless_send"}
    return request.getfixturevalue(fixture[request.param])  # type: ignore[no-any-return]


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" in reply, reply
    return dict(reply["result"])


def _until(send: Send, task_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        task = _result(send("tasks/get", _params({"taskId": task_id})))
        if done(task) or time.monotonic() > deadline:
            return task
        time.sleep(0.05)


@pytest.mark.timeout(180)
def test_task_created_polled_and_completed(send: Send) -> None:
    created = _result(send("tools/call", _params({"name": "slow_compute", "arguments": {"seconds": 0.3}})))
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["ttlMs"] > 0
    assert created["pollIntervalMs"] > 0
    finished = _until(send, created["taskId"], lambda t: t["status"] != "working")
    assert finished["status"] == "completed", finished
    assert finished["result"]["content"][0]["text"] == "Computed result after 0.3s"


@pytest.mark.timeout(180)
def test_task_asks_then_resumes(send: Send) -> None:
    """A question parks the task on input_required; tasks/update answers it and the tool goes on."""
    created = _result(
        send("tools/call", _params({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}))
    )
    waiting = _until(send, created["taskId"], lambda t: t["status"] == "input_required")
    (key, asked), *_ = waiting["inputRequests"].items()
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["message"] == "Delete a.txt?"
    answer = {"action": "accept", "content": {"confirm": True}}
    ack = _result(
        send("tasks/update", _params({"taskId": created["taskId"], "inputResponses": {key: answer}}))
    )
    assert ack["resultType"] == "complete"
    assert "status" not in ack
    done = _until(send, created["taskId"], lambda t: t["status"] in ("completed", "failed"))
    assert done["result"]["content"][0]["text"] == "a.txt deleted"


@pytest.mark.timeout(180)
def test_task_cancelled(send: Send) -> None:
    created = _result(send("tools/call", _params({"name": "slow_compute", "arguments": {"seconds": 60}})))
    ack = _result(send("tasks/cancel", _params({"taskId": created["taskId"]})))
    assert ack["resultType"] == "complete"
    assert _result(send("tasks/get", _params({"taskId": created["taskId"]})))["status"] == "cancelled"
    # Cancelling again is acknowledged the same way.
    assert _result(send("tasks/cancel", _params({"taskId": created["taskId"]})))["resultType"] == "complete"


@pytest.mark.timeout(180)
def test_tool_error_completes_protocol_error_fails(send: Send) -> None:
    failing = _result(send("tools/call", _params({"name": "failing_job", "arguments": {}})))
    broken = _result(send("tools/call", _params({"name": "protocol_error_job", "arguments": {}})))
    tool_error = _until(send, failing["taskId"], lambda t: t["status"] != "working")
    protocol_error = _until(send, broken["taskId"], lambda t: t["status"] != "working")
    assert tool_error["status"] == "completed"
    assert tool_error["result"]["isError"] is True
    assert protocol_error["status"] == "failed"
    assert "result" not in protocol_error
    assert protocol_error["error"] == {"code": -32603, "message": "protocol_error_job: internal failure"}


@pytest.mark.timeout(180)
def test_required_task_and_task_methods_need_the_extension(send: Send) -> None:
    required = send("tools/call", _params({"name": "failing_job", "arguments": {}}, tasks=False))
    assert required["error"]["code"] == -32021, required
    assert required["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert send("tasks/get", _params({"taskId": "x"}, tasks=False))["error"]["code"] == -32021
    assert send("tasks/get", _params({"taskId": "no-such-task"}))["error"]["code"] == -32602
    # Without the extension an optional task tool simply runs inside the request.
    plain = _result(
        send("tools/call", _params({"name": "slow_compute", "arguments": {"seconds": 0}}, tasks=False))
    )
    assert plain["resultType"] == "complete"
    assert plain["content"][0]["text"] == "Computed result after 0s"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["stateful_send", "stateless_send"])
def test_task_status_streams_on_subscriptions_listen(mode: str, request: pytest.FixtureRequest) -> None:
    """A listen stream naming the task hears each change as notifications/tasks, up to completion."""
    send: Send = request.getfixturevalue(mode)
    created = _result(
        send("tools/call", _params({"name": "confirm_delete", "arguments": {"filename": "b.txt"}}))
    )
    task_id = created["taskId"]
    waiting = _until(send, task_id, lambda t: t["status"] == "input_required")
    (key,) = waiting["inputRequests"]
    server_url = request.getfixturevalue(mode.replace("_send", "_url"))
    listen = {
        "jsonrpc": "2.0",
        "id": 77,
        "method": "subscriptions/listen",
        "params": _params({"notifications": {"taskIds": [task_id]}}),
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": "subscriptions/listen",
    }
    heard: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", server_url, json=listen, headers=headers) as stream,
    ):
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data:") and line[5:].strip():
                ack = json.loads(line[5:])
                break
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"]["taskIds"] == [task_id]
        answer = {"action": "accept", "content": {"confirm": True}}
        _result(send("tasks/update", _params({"taskId": task_id, "inputResponses": {key: answer}})))
        for line in lines:
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if message.get("method") == "notifications/tasks":
                    heard.append(message["params"])
                    if message["params"]["status"] == "completed":
                        break
    assert heard[-1]["taskId"] == task_id
    assert heard[-1]["result"]["content"][0]["text"] == "b.txt deleted"
    assert heard[-1]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 77
    assert "working" in [h["status"] for h in heard]
