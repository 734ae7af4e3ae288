"""Whole HTTP responses the plugin writes itself: a JSON body, or a JSON-RPC error body."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mcp_types import INVALID_REQUEST
from starlette.types import Send


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
