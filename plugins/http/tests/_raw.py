"""A raw MCP-over-HTTP client for tests that must see exactly what the server sends."""

from __future__ import annotations

import json
from typing import Any

import httpx

ACCEPT = "application/json, text/event-stream"
HEADERS = {"accept": ACCEPT, "content-type": "application/json"}


def messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: its JSON body, or the data of its SSE events."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [json.loads(response.content)] if response.content else []
    found = []
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            found.append(json.loads(line[5:]))
    return found


def answer(response: httpx.Response, request_id: Any) -> dict[str, Any]:
    """The response or error for ``request_id`` in ``response``; fails when there is none."""
    for message in messages(response):
        if message.get("id") == request_id and ("result" in message or "error" in message):
            return message
    raise AssertionError(f"no answer for id {request_id!r} in {response.status_code} {response.text!r}")


async def open_session(
    client: httpx.AsyncClient, url: str, version: str = "2025-11-25", **headers: str
) -> dict[str, str]:
    """``initialize`` and ``notifications/initialized``; the headers later requests need."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    response = await client.post(url, content=json.dumps(init), headers={**HEADERS, **headers})
    assert response.status_code == 200, response.text
    assert "result" in answer(response, 0)
    session = {"mcp-protocol-version": version, **headers}
    if "mcp-session-id" in response.headers:
        session["mcp-session-id"] = response.headers["mcp-session-id"]
    notified = await client.post(
        url,
        content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        headers={**HEADERS, **session},
    )
    assert notified.status_code == 202, notified.text
    return session


async def post(
    client: httpx.AsyncClient, url: str, body: str | bytes | dict[str, Any], session: dict[str, str]
) -> httpx.Response:
    """POST ``body`` (a dict is JSON-encoded) with the session's headers."""
    content = json.dumps(body) if isinstance(body, dict) else body
    return await client.post(url, content=content, headers={**HEADERS, **session})
