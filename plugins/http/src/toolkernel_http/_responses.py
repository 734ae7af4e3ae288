"""What the plugin writes on the wire itself: JSON bodies, JSON-RPC error bodies, SSE events."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mcp_types import (
    INVALID_REQUEST,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.types import Send

from toolkernel.wire import encode_message, misplaced_id, refusal

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
]


async def send_json(
    send: Send, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Send a complete ``application/json`` response (an empty ``body`` for 202 and the like)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: int = INVALID_REQUEST,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send a complete response whose body is a JSON-RPC error with no id."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    await send_json(send, status, json.dumps(error).encode(), headers)


def screen(body: bytes) -> tuple[JSONRPCMessage | None, JSONRPCError | None]:
    """``body`` as a JSON-RPC message, or else the error answering it (neither: a malformed response).

    A request whose id has a type MCP does not allow validates as a notification; it is
    refused here, so it is never taken for one.
    """
    try:
        message = jsonrpc_message_adapter.validate_json(body, by_name=False)
    except ValidationError as exc:
        return None, refusal(body, exc)
    if type(message) is JSONRPCNotification and (error := misplaced_id(body)) is not None:
        return None, error
    return message, None


async def send_refusal(
    send: Send, error: JSONRPCError | None, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Answer a POST that is not a valid message: ``400`` with ``error``; ``202`` when none is due."""
    if error is None:
        await send_json(send, 202, b"", headers)
    else:
        await send_json(send, 400, encode_message(error), headers)


async def send_too_large(send: Send, limit: int, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Refuse a body over ``limit`` bytes: 413 with a JSON-RPC error saying the limit."""
    await send_error(send, 413, f"Payload Too Large: the limit is {limit} bytes", headers=headers)


def sse_event(data: bytes | None, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    """One SSE event: an encoded JSON-RPC message (``event: message``), or a priming event when ``None``."""
    lines = []
    if data is not None:
        lines.append(b"event: message")
    if event_id is not None:
        lines.append(b"id: " + event_id.encode())
    if retry_ms is not None:
        lines.append(b"retry: %d" % retry_ms)
    lines.append(b"data: " + (data or b""))
    return b"\n".join(lines) + b"\n\n"
