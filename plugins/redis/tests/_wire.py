"""Raw Streamable HTTP for the tests: open a session on one replica, send requests to others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx

VERSION = "2025-11-25"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
"""Client capabilities declaring the tasks extension."""


def initialize_body(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """An ``initialize`` request."""
    params = {
        "protocolVersion": VERSION,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def open_session(
    client: httpx.Client, url: str, capabilities: dict[str, Any] | None = None
) -> dict[str, str]:
    """``initialize`` at ``url``; the headers every later request of the session carries."""
    response = client.post(url, headers=ACCEPT, json=initialize_body(capabilities))
    assert response.status_code == 200, response.text
    headers = {
        **ACCEPT,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": VERSION,
    }
    done = client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    return headers


def call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    """A ``tools/call`` request body (asking for progress, with the request id as the token)."""
    params = {"name": name, "arguments": arguments, "_meta": {"progressToken": request_id}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def events(lines: Iterator[str]) -> Iterator[tuple[str | None, dict[str, Any] | None]]:
    """``(id, message)`` of each SSE event read from ``lines`` (``None`` message: a priming event)."""
    event_id: str | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data or event_id is not None:
                text = "\n".join(data)
                yield event_id, (json.loads(text) if text.strip() else None)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response in an SSE (or JSON) body."""
    assert response.status_code == 200, response.text
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    found = [m for _, m in events(iter([*response.text.splitlines(), ""])) if m is not None and "id" in m]
    return found[-1]


def result_text(message: dict[str, Any]) -> str:
    """The first text block of a ``tools/call`` response."""
    return str(message["result"]["content"][0]["text"])


MODERN = "2026-07-28"


def modern(
    client: httpx.Client, url: str, method: str, params: dict[str, Any], *, tasks: bool = True
) -> dict[str, Any]:
    """One 2026-07-28 request (no session; elicitation and, unless told, tasks declared)."""
    capabilities: dict[str, Any] = {"elicitation": {}, **(TASKS if tasks else {})}
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    name = params.get("name") or params.get("taskId")
    headers = {
        **ACCEPT,
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        **({"mcp-name": str(name)} if name else {}),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    return answer(client.post(url, headers=headers, json=body))
