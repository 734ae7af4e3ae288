"""The client transport: Streamable HTTP, falling back to legacy SSE, on the SDK's client transports.

The SDK transports do the wire work, including reconnecting a broken SSE stream
after the server's ``retry`` delay with ``Last-Event-ID``. This module picks the
transport, builds the httpx2 client (headers, auth, connect and read timeouts), and
in ``auto`` mode sends the first message over Streamable HTTP and switches to SSE
when the server answers that POST with 404 or 405 (or 400 to ``initialize``), as the
specification's backwards-compatibility section describes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
)
from pydantic import ValidationError

from toolkernel.errors import ConfigError
from toolkernel_http._options import HTTPClientOptions

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

    from toolkernel.transports import ClientTransportOptions, TransportStreams

FALLBACK_STATUSES = (400, 404, 405)
"""Statuses of the first POST that mean "not a Streamable HTTP endpoint": try legacy SSE."""

_CLOSE_GRACE_S = 5.0


@contextlib.asynccontextmanager
async def http_client(
    target: str | list[str], options: ClientTransportOptions
) -> AsyncIterator[TransportStreams]:
    """Connect to the MCP endpoint at URL ``target`` and yield the SDK's ``(read, write)`` streams."""
    if not isinstance(target, str) or "://" not in target:
        raise ConfigError(f"toolkernel-http: expected an http(s) URL, got {target!r}")
    try:
        settings = HTTPClientOptions.model_validate(dict(options.extra))
    except ValidationError as exc:
        raise ConfigError(f"toolkernel-http: client options (ClientTransportOptions.extra): {exc}") from None
    connection = _Connection(target, options, settings)
    if settings.transport == "sse":
        async with connection.sse() as streams:
            yield streams
    elif settings.transport == "streamable":
        async with connection.client() as client, connection.streamable(client) as (read, write):
            yield cast("TransportStreams", (_Reworded(read, connection.explain), write))
    else:
        async with connection.auto() as streams:
            yield streams


class _Connection:
    """Everything one connection needs to open either transport."""

    def __init__(self, url: str, options: ClientTransportOptions, settings: HTTPClientOptions) -> None:
        self.url = url
        self.options = options
        self.settings = settings
        self.headers = dict(options.headers)
        self.factory: Any = settings.http_client_factory or create_mcp_http_client
        self.refusal: tuple[int, str, bool] | None = None
        self.lost: dict[Any, int] = {}
        """Requests a gateway answered 502/503/504 without a JSON-RPC body, by id: their server went away."""

    def client(self) -> httpx2.AsyncClient:
        """A fresh httpx2 client with the connection's headers, auth and timeouts."""
        timeout = httpx2.Timeout(self.options.connect_timeout, read=self.options.read_timeout)
        client: httpx2.AsyncClient = self.factory(
            headers=self.headers, timeout=timeout, auth=self.settings.auth
        )
        hooks = [*client.event_hooks["response"], self._note_refusal]
        limit = self.settings.max_json_body_size
        if limit is not None:
            hooks.append(_json_body_cap(limit))
        client.event_hooks = {**client.event_hooks, "response": hooks}
        return client

    async def _note_refusal(self, response: httpx2.Response) -> None:
        """Remember whether the last POST was refused for want of a token (401) or of scopes (403),
        and whether it carried one; and which requests a gateway could not deliver (502/503/504
        with no JSON-RPC body)."""
        if response.request.method == "POST":
            status = response.status_code
            sent = "authorization" in response.request.headers
            challenge = response.headers.get("www-authenticate", "")
            self.refusal = (status, challenge, sent) if status in (401, 403) else None
            if status in _GATEWAY_LOST and "json" not in response.headers.get("content-type", ""):
                with contextlib.suppress(ValueError, AttributeError):
                    self.lost[json.loads(response.request.content).get("id")] = status

    def explain(self, message: SessionMessage | Exception) -> SessionMessage | Exception:
        """``message``, or the SDK's bare error for a refused or undelivered POST said in words."""
        if not isinstance(message, SessionMessage):
            return message
        error = message.message
        if isinstance(error, JSONRPCError) and (status := self.lost.pop(error.id, None)) is not None:
            return _explain_lost(message, status, self.url)
        if self.refusal is not None:
            return _explain_refusal(message, *self.refusal, self.url)
        return message

    def streamable(
        self, client: httpx2.AsyncClient
    ) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        """The SDK's Streamable HTTP transport over ``client``."""
        return streamable_http_client(
            self.url,
            http_client=client,
            terminate_on_close=self.settings.terminate_on_close,
            max_sse_event_size=self.settings.max_sse_event_size,
        )

    def sse(self) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        """The SDK's legacy SSE transport (GET the URL, POST to the endpoint it names)."""
        return cast(
            "contextlib.AbstractAsyncContextManager[TransportStreams]",
            sse_client(
                self.url,
                headers=self.headers,
                timeout=self.options.connect_timeout,
                sse_read_timeout=self.options.read_timeout,
                httpx_client_factory=self.factory,
                auth=self.settings.auth,
            ),
        )

    @contextlib.asynccontextmanager
    async def auto(self) -> AsyncIterator[TransportStreams]:
        """Streams relayed to whichever transport the server answers on."""
        to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage](0)
        to_user_send, to_user_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._relay, to_server_recv, to_user_send, done)
            try:
                yield cast("TransportStreams", (to_user_recv, to_server_send))
            finally:
                # Closing our side lets the relay leave its transport cleanly (DELETE the session).
                await to_server_send.aclose()
                await to_user_recv.aclose()
                with anyio.move_on_after(_CLOSE_GRACE_S, shield=True):
                    await done.wait()
                tg.cancel_scope.cancel()

    async def _relay(
        self,
        outgoing: MemoryObjectReceiveStream[SessionMessage],
        incoming: MemoryObjectSendStream[SessionMessage | Exception],
        done: anyio.Event,
    ) -> None:
        try:
            async with outgoing, incoming:
                try:
                    first = await outgoing.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                refused = await self._try_streamable(first, outgoing, incoming)
                if refused is None:
                    return
                try:
                    async with self.sse() as (read, write):
                        await write.send(first)
                        await _pump(read, write, outgoing, incoming)
                except httpx2.HTTPError:
                    # Neither transport works: the caller gets the Streamable HTTP answer.
                    await incoming.send(refused)
        finally:
            done.set()

    async def _try_streamable(
        self,
        first: SessionMessage,
        outgoing: MemoryObjectReceiveStream[SessionMessage],
        incoming: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> SessionMessage | None:
        """Serve over Streamable HTTP; return the refusal of ``first`` if the server does not speak it."""
        statuses: list[int] = []

        async def record(response: httpx2.Response) -> None:
            if not statuses and response.request.method == "POST":
                statuses.append(response.status_code)

        client = self.client()
        client.event_hooks = {**client.event_hooks, "response": [*client.event_hooks["response"], record]}
        async with client, self.streamable(client) as (read, write):
            await write.send(first)
            if not isinstance(first.message, JSONRPCRequest):
                await _pump(read, write, outgoing, incoming, self.explain)
                return None
            reply = await read.receive()
            if (
                isinstance(reply, SessionMessage)
                and isinstance(reply.message, JSONRPCError)
                and statuses[:1]
                and _means_no_streamable_http(statuses[0], first.message.method)
            ):
                return reply
            await incoming.send(self.explain(reply))
            await _pump(read, write, outgoing, incoming, self.explain)
            return None


def _json_body_cap(limit: int) -> Any:
    """A response hook making a JSON body over ``limit`` bytes fail as it is read, before it is buffered."""

    async def cap(response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            response.stream = _CappedStream(response.stream, limit, response.headers.get("content-length"))

    return cap


class _CappedStream(httpx2.AsyncByteStream):
    """A response body that raises ``httpx2.StreamError`` (its request then fails) past ``limit`` bytes."""

    def __init__(self, inner: Any, limit: int, declared: str | None) -> None:
        self._inner = inner
        self._limit = limit
        self._declared = int(declared) if declared is not None and declared.isdigit() else None

    def _refuse(self, size: int) -> httpx2.StreamError:
        return httpx2.StreamError(
            f"the server's JSON body is larger than max_json_body_size ({size} > {self._limit} bytes)"
        )

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared is not None and self._declared > self._limit:
            raise self._refuse(self._declared)
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise self._refuse(seen)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _explain_refusal(
    reply: SessionMessage, status: int, challenge: str, sent: bool, url: str
) -> SessionMessage:
    """A 401/403 said in words: a token is needed, or the one sent was refused (the SDK reports
    it as a bare internal error, or passes on the server's JSON-RPC error)."""
    error = reply.message
    if status not in (401, 403) or not isinstance(error, JSONRPCError):
        return reply
    why = challenge or "no WWW-Authenticate"
    if error.error.code != INTERNAL_ERROR:
        why = f"{error.error.message}; {why}"
    if sent and status == 401:
        text = (
            f"{url} refused the token (HTTP 401: {why}): it is expired, revoked or meant for "
            "another server; get a new one (`toolkernel auth login URL`)"
        )
    elif sent:
        text = f"{url} refused the token for this request (HTTP 403: {why}): it needs more scopes"
    else:
        needed = "a token" if status == 401 else "a token with more scopes"
        text = (
            f"{url} answered HTTP {status}: it needs {needed} ({why}); "
            "send one with --header 'Authorization: Bearer TOKEN', or log in with toolkernel-oauth "
            "(`toolkernel auth login URL`)"
        )
    data = ErrorData(code=INVALID_REQUEST, message=text)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=error.id, error=data))


_GATEWAY_LOST = (502, 503, 504)


def _explain_lost(reply: SessionMessage, status: int, url: str) -> SessionMessage:
    """A request a gateway answered 502/503/504 for: its server went away, as a lost connection does.

    Said with the code of a closed connection, so the request may be sent again where that
    is safe (MCPClient retries idempotent tools); a server's own error keeps its code.
    """
    error = reply.message
    if not isinstance(error, JSONRPCError) or error.error.code != INTERNAL_ERROR:
        return reply
    text = f"{url} answered HTTP {status}: the server behind it went away before answering"
    data = ErrorData(code=CONNECTION_CLOSED, message=text)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=error.id, error=data))


class _Reworded:
    """A read stream whose messages pass through ``explain`` (every other attribute is the stream's)."""

    def __init__(self, stream: Any, explain: Callable[[Any], Any]) -> None:
        self._stream = stream
        self._explain = explain

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def receive(self) -> Any:
        return self._explain(await self._stream.receive())

    def __aiter__(self) -> _Reworded:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Reworded:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._stream.__aexit__(*exc)


def _means_no_streamable_http(status: int, method: str) -> bool:
    """Whether the refusal of the first POST says the server only speaks legacy SSE.

    404 and 405 always do. A 400 does only for ``initialize``: a handshake-era Streamable
    HTTP server answers a 2026-07-28 ``server/discover`` probe with 400 (no session yet),
    and the client must then fall back to ``initialize`` on the same transport, not to SSE.
    """
    return status in (404, 405) or (status in FALLBACK_STATUSES and method == "initialize")


async def _pump(
    read: ReadStream[SessionMessage | Exception],
    write: WriteStream[SessionMessage],
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
    explain: Callable[[SessionMessage | Exception], SessionMessage | Exception] | None = None,
) -> None:
    """Relay both ways until either side closes (``explain`` may reword what comes back)."""
    async with anyio.create_task_group() as tg:

        async def upstream() -> None:
            async for message in outgoing:
                await write.send(message)
            tg.cancel_scope.cancel()

        tg.start_soon(upstream)
        try:
            async for message in read:
                await incoming.send(explain(message) if explain is not None else message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        tg.cancel_scope.cancel()
