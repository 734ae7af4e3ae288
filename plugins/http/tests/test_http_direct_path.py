"""The direct path for stateless requests answers exactly what the SDK's stateless modes answer."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from mcp.server.transport_security import TransportSecuritySettings

from toolkernel import MCPServer, ToolContext
from toolkernel_http import asgi_app

from .conftest import serving

pytestmark = pytest.mark.anyio
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _call(method: str, params: dict[str, Any] | None = None, request_id: Any = 7) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


REQUESTS = {
    "tool call": _call("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
    "string id": _call("tools/call", {"name": "echo", "arguments": {"text": "s"}}, request_id="abc"),
    "bad arguments": _call("tools/call", {"name": "echo", "arguments": {"text": 3}}),
    "unknown tool": _call("tools/call", {"name": "nope", "arguments": {}}),
    "tools/list": _call("tools/list", {}),
    "unknown method": _call("no/such/method", {}),
    "missing params": _call("tools/call"),
    "unknown resource": _call("resources/read", {"uri": "test://missing"}),
    "ping": _call("ping"),
}


def _answer(response: httpx.Response) -> Any:
    """The JSON-RPC answer in a JSON body or in the last ``data:`` line of an SSE stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        datas = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads([d for d in datas if d][-1])
    return response.json()


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
@pytest.mark.parametrize("version", [None, "2025-06-18", "2025-11-25"])
async def test_direct_path_matches_the_sdk(
    tk_server: MCPServer, version: str | None, json_response: bool
) -> None:
    """Same status, same JSON-RPC answer, for results and for each kind of error."""
    ours = asgi_app(tk_server, stateless=True, json_response=json_response)
    sdk = tk_server.kernel.serving_app(tk_server).protocol_server.streamable_http_app(
        stateless_http=True,
        json_response=json_response,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    headers = HEADERS | ({"mcp-protocol-version": version} if version else {})
    with anyio.fail_after(60):
        async with serving(ours) as ours_url, serving(sdk) as sdk_url, httpx.AsyncClient() as client:
            for name, message in REQUESTS.items():
                body = json.dumps(message)
                mine = await client.post(f"{ours_url}/mcp", content=body, headers=headers)
                theirs = await client.post(f"{sdk_url}/mcp", content=body, headers=headers)
                assert mine.status_code == theirs.status_code, name
                assert mine.headers["content-type"] == theirs.headers["content-type"], name
                assert _answer(mine) == _answer(theirs), name


async def test_stateless_sse_streams_progress_and_logs_before_the_answer(tk_server: MCPServer) -> None:
    @tk_server.tool
    async def steps(n: int, ctx: ToolContext) -> str:
        """Report progress and log each step."""
        for i in range(1, n + 1):
            await ctx.progress(i, total=n)
            await ctx.info(f"step {i}")
        return "done"

    call = _call("tools/call", {"name": "steps", "arguments": {"n": 2}, "_meta": {"progressToken": "p"}})
    sdk = tk_server.kernel.serving_app(tk_server).protocol_server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    with anyio.fail_after(60):
        async with (
            serving(asgi_app(tk_server, stateless=True)) as base,
            serving(sdk) as sdk_base,
            httpx.AsyncClient() as client,
        ):
            response = await client.post(f"{base}/mcp", content=json.dumps(call), headers=HEADERS)
            theirs = await client.post(f"{sdk_base}/mcp", content=json.dumps(call), headers=HEADERS)
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    sdk_messages = [json.loads(line[5:]) for line in theirs.text.splitlines() if line.startswith("data:")]
    assert messages == sdk_messages, "not what the SDK's stateless SSE mode sends"
    kinds = [(m.get("method"), m.get("params", {}).get("progress")) for m in messages[:-1]]
    assert kinds == [
        ("notifications/progress", 1),
        ("notifications/message", None),
        ("notifications/progress", 2),
        ("notifications/message", None),
    ]
    assert messages[-1]["result"]["content"][0]["text"] == "done"


@pytest.mark.parametrize(
    "body",
    [b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', b"[]", b"{oops"],
    ids=["notification", "batch", "malformed"],
)
async def test_what_the_direct_path_leaves_to_the_sdk(tk_server: MCPServer, body: bytes) -> None:
    """Notifications, batches and malformed bodies still reach the SDK and get its answers."""
    with anyio.fail_after(60):
        async with (
            serving(asgi_app(tk_server, stateless=True, json_response=True)) as base,
            httpx.AsyncClient() as client,
        ):
            response = await client.post(f"{base}/mcp", content=body, headers=HEADERS)
    assert response.status_code in (202, 400)
    if response.status_code == 400:
        assert response.json()["error"]["code"] in (-32700, -32602, -32600)
