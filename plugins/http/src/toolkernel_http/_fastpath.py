"""A direct path for stateless, JSON-response requests of the 2025 protocol era.

For each such POST the SDK's stateless mode builds a whole session transport, a task,
a JSON-RPC dispatcher and memory streams, and tears them down again: most of the
per-request cost. The request needs none of it: there is no session, no back-channel
(``can_send_request`` is false) and no wire for notifications in JSON mode. This module
answers it the way the SDK answers a 2026-07-28 request: the server's handler chain
(``serve_one``, middleware included) runs once in the ASGI task and its result is the
JSON body. Replies match the SDK's stateless JSON mode: HTTP 200, the JSON-RPC result
or error. Anything else (``initialize``, notifications, batches, malformed bodies,
2026-07-28 requests) goes to the SDK unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_one
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from toolkernel_http._responses import send_json

logger = logging.getLogger("toolkernel.http")


@dataclass
class _JSONExchange:
    """The dispatch context of one stateless JSON-mode request: no back-channel, notifications dropped."""

    transport: TransportContext
    request_id: RequestId
    message_metadata: MessageMetadata
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Refuse: a stateless request has nowhere to receive the client's answer."""
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        """Drop: a JSON body carries only the response (as in the SDK's JSON mode)."""

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Drop, for the same reason as :meth:`notify`."""


def takes(scope: Scope) -> str | None:
    """The protocol version to serve ``scope`` at on the direct path, or ``None`` to leave it to the SDK."""
    if scope["method"] != "POST":
        return None
    version: str | None = None
    accepts_json = False
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version":
            version = value.decode("latin-1")
        elif key == b"mcp-session-id":
            return None
        elif key == b"accept":
            accept = value.decode("latin-1").lower()
            accepts_json = any(t in accept for t in ("application/json", "application/*", "*/*"))
    if not accepts_json or (version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS):
        return None
    return version or DEFAULT_NEGOTIATED_VERSION


def parse(body: bytes) -> JSONRPCRequest | None:
    """The request in ``body`` if it is one the direct path serves (a single request, not initialize)."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(decoded, dict) or "id" not in decoded or decoded.get("method") in (None, "initialize"):
        return None
    try:
        return JSONRPCRequest.model_validate(decoded, by_name=False)
    except ValidationError:
        return None


async def serve(
    server: Server[Any],
    lifespan_state: Any,
    request: JSONRPCRequest,
    version: str,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """Run ``request`` through the server's handler chain and answer with one JSON body."""
    http_request = Request(scope, receive)
    dctx = _JSONExchange(
        transport=TransportContext(kind="streamable-http", can_send_request=False),
        request_id=request.id,
        message_metadata=ServerMessageMetadata(request_context=http_request, can_send_request=False),
    )
    connection = Connection.from_envelope(version, None, None)
    reply: JSONRPCResponse | JSONRPCError
    try:
        result = await serve_one(
            server, dctx, request.method, request.params, connection=connection, lifespan_state=lifespan_state
        )
        reply = JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
    except Exception as exc:
        error = handler_exception_to_error_data(exc)
        if error is None:
            logger.exception("handler for %r raised", request.method)
            error = ErrorData(code=0, message=str(exc))
        reply = JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
    await send_json(send, 200, reply.model_dump_json(by_alias=True, exclude_unset=True).encode())


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` when it grows past ``limit`` bytes."""
    chunks = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(chunks)
        chunks.extend(message.get("body", b""))
        if len(chunks) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read ``body`` once, then defers to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
