"""A direct path for stateless requests of the 2025 protocol era.

For each such POST the SDK's stateless mode builds a whole session transport, a task,
a JSON-RPC dispatcher and memory streams, and tears them down again: most of the
per-request cost. The request needs none of it: there is no session and no back-channel
(``can_send_request`` is false). This module answers it the way the SDK answers a
2026-07-28 request: the server's handler chain (``serve_one``, middleware included) runs
once in the ASGI task. In JSON mode its result is the body; in SSE mode the request's
notifications (progress, log messages) are events ahead of the answer. Replies match
the SDK's stateless modes: HTTP 200, the JSON-RPC result or error. Anything else
(``initialize``, notifications, batches, malformed bodies, 2026-07-28 requests) goes to
the SDK unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner, _extract_meta, aclose_shielded
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    ProgressToken,
    RequestId,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from toolkernel.wire import encode_message, encode_result
from toolkernel_http._disconnect import DisconnectWatch
from toolkernel_http._responses import SSE_HEADERS, send_json, sse_event

logger = logging.getLogger("toolkernel.http")


@dataclass
class _Exchange:
    """The dispatch context of one stateless request: no back-channel for requests.

    With ``events`` (SSE responses) notifications tied to the request, progress and log
    messages, are written to the response ahead of the answer; a JSON body carries only
    the answer, so without ``events`` they are dropped (as in the SDK's JSON mode).
    """

    transport: TransportContext
    request_id: RequestId
    message_metadata: MessageMetadata
    events: Callable[[JSONRPCNotification], Awaitable[None]] | None = None
    progress_token: ProgressToken | None = None
    can_send_request: bool = False

    @cached_property
    def cancel_requested(self) -> anyio.Event:
        """Never set (a stateless request is cancelled by its client leaving); made when first read."""
        return anyio.Event()

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Refuse: a stateless request has nowhere to receive the client's answer."""
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        """Write the notification to an SSE response; drop it from a JSON one."""
        if self.events is not None:
            await self.events(JSONRPCNotification(jsonrpc="2.0", method=method, params=params))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress when the client sent a progress token (and the response is SSE)."""
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


def takes(scope: Scope, sse: bool) -> str | None:
    """The protocol version to serve ``scope`` at on the direct path, or ``None`` to leave it to the SDK.

    ``sse``: the app answers with SSE streams, so the client must accept them too.
    """
    if scope["method"] != "POST":
        return None
    version: bytes | None = None
    accept: bytes | None = None
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version":
            version = value
        elif key == b"mcp-session-id":
            return None
        elif key == b"accept":
            accept = value
    return version_for(version, accept, sse)


def version_for(version: bytes | None, accept: bytes | None, sse: bool) -> str | None:
    """What :func:`takes` answers for the last ``MCP-Protocol-Version`` and ``Accept`` header values."""
    if accept is None:
        return None
    accepted = _ACCEPTED.get((accept, sse))
    if accepted is None:
        text = accept.decode("latin-1").lower()
        accepted = any(t in text for t in ("application/json", "application/*", "*/*")) and (
            not sse or any(t in text for t in ("text/event-stream", "text/*", "*/*"))
        )
        if len(_ACCEPTED) >= _MEMO_SIZE:
            _ACCEPTED.clear()
        _ACCEPTED[(accept, sse)] = accepted
    if not accepted:
        return None
    if version is None:
        return DEFAULT_NEGOTIATED_VERSION
    return _VERSIONS.get(version)


_ACCEPTED: dict[tuple[bytes, bool], bool] = {}
"""``Accept`` values seen, and whether they admit the response (clients send the same few)."""
_MEMO_SIZE = 256
_VERSIONS = {v.encode("latin-1"): v for v in HANDSHAKE_PROTOCOL_VERSIONS}


def parse(body: bytes) -> JSONRPCRequest | None:
    """The request in ``body`` if it is one the direct path serves (a single request, not initialize)."""
    # pydantic's own JSON parser first: about 2 µs a request less than json.loads and a
    # validation. A body it refuses (a notification, a batch, a lone surrogate such as a
    # client's "\ud800", which json.loads accepts) is parsed again with json.loads.
    try:
        request = JSONRPCRequest.model_validate_json(body, by_name=False)
    except ValidationError:
        return _parse_as_python_does(body)
    return None if request.method == "initialize" else request


def _parse_as_python_does(body: bytes) -> JSONRPCRequest | None:
    """:func:`parse` with json.loads, which takes a few bodies pydantic's parser refuses."""
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
    sse: bool,
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Answer ``request`` with one JSON body or an SSE stream: directly when the server's kernel can
    (see :mod:`toolkernel._direct`), else through the server's handler chain.

    ``headers`` go on the response beside its own (the CORS ``Vary`` when the front door answers).
    """
    direct = getattr(server, "direct", None)
    answer = (
        direct.plan(request.method, request.params, version, request.id, scope)
        if direct is not None
        else None
    )
    events: Callable[[JSONRPCNotification], Awaitable[None]] | None = None
    if sse:
        await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *headers]})

        async def event(message: JSONRPCNotification) -> None:
            await send(
                {"type": "http.response.body", "body": sse_event(encode_message(message)), "more_body": True}
            )

        events = event
    context = _Context(server, lifespan_state, request, version, scope, receive, events)
    # The answer goes only to this connection: when the client leaves, the request's task is
    # cancelled (the asyncio way: an anyio cancel scope per request costs several times more).
    task = _current_task()
    gone = False

    async def stop() -> None:
        nonlocal gone
        if task is not None:
            gone = True
            task.cancel()

    try:
        with DisconnectWatch(receive, stop, None if task is None else task.get_loop()):
            body = await _answer(answer, server, lifespan_state, request, context)
        if gone:
            await asyncio.sleep(0)  # take the cancellation stop() asked for, if no await took it yet
        if sse:
            await send({"type": "http.response.body", "body": sse_event(body), "more_body": False})
        else:
            await send_json(send, 200, body, headers)
    except asyncio.CancelledError:
        if gone and task is not None and task.uncancel() == 0:
            return  # the client is gone: nobody to answer
        raise


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # not on asyncio (an ASGI server running trio): no disconnect watch either
        return None


async def _answer(
    answer: Any, server: Server[Any], lifespan_state: Any, request: JSONRPCRequest, context: _Context
) -> bytes:
    """The response body: the direct answer's result, else the handler chain's, or the error either raised."""
    try:
        try:
            if answer is not None:
                result = await answer(context)
            else:
                result = await _serve_one(
                    server, context.exchange(), request, context.connect(), lifespan_state
                )
        finally:
            connection = context.connection
            if connection is not None and connection.exit_stack._exit_callbacks:  # type: ignore[attr-defined]
                await aclose_shielded(connection)
        return encode_result(request.id, result)
    except Exception as exc:
        error = handler_exception_to_error_data(exc)
        if error is None:
            logger.exception("handler for %r raised", request.method)
            error = ErrorData(code=0, message=str(exc))
        return encode_message(JSONRPCError(jsonrpc="2.0", id=request.id, error=error))


class _Context:
    """What the SDK's runner makes for a request (exchange, connection, request context), made on demand.

    The direct answer asks for the request context only when the call reads it, which
    most calls never do; the handler chain asks for the exchange and the connection.
    """

    __slots__ = ("connection", "events", "lifespan_state", "receive", "request", "scope", "server", "version")

    def __init__(
        self,
        server: Server[Any],
        lifespan_state: Any,
        request: JSONRPCRequest,
        version: str,
        scope: Scope,
        receive: Receive,
        events: Callable[[JSONRPCNotification], Awaitable[None]] | None,
    ) -> None:
        self.server = server
        self.lifespan_state = lifespan_state
        self.request = request
        self.version = version
        self.scope = scope
        self.receive = receive
        self.events = events
        self.connection: Connection | None = None

    def exchange(self) -> _Exchange:
        """The request's dispatch context: no back-channel; notifications go to ``events``."""
        request = self.request
        return _Exchange(
            transport=_TRANSPORT,
            request_id=request.id,
            message_metadata=ServerMessageMetadata(
                request_context=Request(self.scope, self.receive), can_send_request=False
            ),
            events=self.events,
            progress_token=progress_token_from_params(request.params),
        )

    def connect(self) -> Connection:
        """The request's connection (unwound after the answer when a handler pushed onto its exit stack)."""
        self.connection = _connection(self.version)
        return self.connection

    def __call__(self) -> ServerRequestContext[Any, Any]:
        """The SDK's context of the request, as its runner makes it."""
        runner = ServerRunner(self.server, self.connect(), self.lifespan_state)
        request = self.request
        meta = _extract_meta(request.params)
        return runner._make_context(self.exchange(), request.method, request.params, meta, self.version)


_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)
_no_channel: Any = None


def _connection(version: str) -> Connection:
    """``Connection.from_envelope(version, None, None)``: born ready, no back-channel, no client info.

    Built directly: ``from_envelope`` validates the absent client info and capabilities
    into models, two failed validations (raised and caught) a request.
    """
    global _no_channel
    if _no_channel is None:
        _no_channel = Connection.from_envelope(version, None, None).outbound
    connection = Connection(_no_channel, protocol_version=version)
    connection.initialized.set()
    return connection


async def _serve_one(
    server: Server[Any],
    dctx: _Exchange,
    request: JSONRPCRequest,
    connection: Connection,
    lifespan_state: Any,
) -> dict[str, Any]:
    """The SDK's ``serve_one``, without the garbage it leaves on every request.

    ``serve_one`` calls ``runner.on_request``, a cached property holding the runner's own
    bound method: each runner, with its connection, events and exit stack, is then a reference
    cycle that only the cycle collector frees (nine objects a request; the collections cost
    more than a tenth of a stateless call). The caller unwinds the exit stack, as there, when a
    handler or middleware pushed something on it.
    """
    runner = ServerRunner(server, connection, lifespan_state)
    return await runner._on_request(dctx, request.method, request.params)


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
