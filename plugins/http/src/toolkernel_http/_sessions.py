"""Stateful Streamable HTTP sessions of the 2025 protocol era, served without the SDK's HTTP transport.

The protocol itself stays the SDK's: every session runs ``mcp.server.runner.serve_loop``
(its JSON-RPC dispatcher, handshake, cancellation, timeouts, error mapping). What this
module replaces is the SDK's per-session HTTP transport, which put every request through
two memory streams, a router task and an sse-starlette response of five tasks. Here a
POST hands its message to the session's dispatcher and the session's outbox writes each
outgoing message straight onto the HTTP response it belongs to, as an SSE event (stored
first when the session is resumable), so a tool call costs a fraction of the server CPU.

Wire behaviour follows the SDK transport's: ``Mcp-Session-Id`` sessions, SSE or JSON
responses, one GET stream per session (409 for a second), ``Last-Event-ID`` replay that
also re-attaches a request still in flight, priming events and ``retry`` for clients at
2025-11-25 or later, ``close_sse_stream`` callbacks, DELETE, idle timeout, a session cap,
sessions bound to the credential that opened them.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import anyio
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.runner import serve_loop
from mcp.server.streamable_http import REQUEST_CANCELLED, EventStore, check_accept_headers
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from mcp_types.version import is_version_at_least
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from toolkernel.shared_state import SessionRecord, StoreUnavailable
from toolkernel.transports import ReadStreamBase, WriteStreamBase
from toolkernel.wire import encode_message
from toolkernel_http._disconnect import DisconnectWatch
from toolkernel_http._events import SessionScopedEventStore
from toolkernel_http._replicas import (
    LIST_CHANGED,
    WATCH_WRITER_S,
    Replicas,
    TouchClock,
    request_id_of,
    serve_adopted,
)
from toolkernel_http._responses import SSE_HEADERS, screen, send_error, send_json, send_refusal, sse_event

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

    from toolkernel.transports import ServingApp

logger = logging.getLogger("toolkernel.http")

GET_STREAM = "_GET_stream"
"""The stream id of a session's standalone GET stream (the SDK's name, so stored events match)."""
_INBOX_BUFFER = 32
_NO_SESSION = "Not Found: Invalid or expired session ID"
_MISSING_SESSION = "Bad Request: Missing session ID"


class _Sink:
    """An open SSE response that one stream's events are written to.

    ``closed`` is set once nothing more goes to it: its last event was written, another
    response took the stream over (a resume), or the session ended. Its owner (the
    request's task) then ends the HTTP response with :meth:`end`, if a last write has not.
    """

    def __init__(self, send: Send, *, is_get: bool = False) -> None:
        self.send = send
        self.is_get = is_get
        self.closed = anyio.Event()
        self._ended = False

    async def write(self, data: bytes, *, last: bool = False) -> None:
        if self._ended:
            return
        try:
            await self.send({"type": "http.response.body", "body": data, "more_body": not last})
        except OSError:  # the client went away; a resumable session has the event stored
            last = True
        if last:
            self._ended = True
            self.closed.set()

    async def end(self) -> None:
        await self.write(b"", last=True)


class _JSONSink:
    """JSON-response mode: waits for the one response of its request; everything else has no wire."""

    def __init__(self) -> None:
        self.closed = anyio.Event()
        self.answer: bytes | None = None

    def deliver(self, answer: bytes) -> None:
        self.answer = answer
        self.closed.set()


class _Inbox(ReadStreamBase):
    """The session's read stream: messages from POSTs, each with the context it was sent from.

    The dispatcher runs a request's handler in ``last_context`` (as with the SDK's
    context streams), so context variables set by HTTP middleware reach the handler.
    """

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[
            tuple[contextvars.Context, SessionMessage | Exception]
        ](_INBOX_BUFFER)
        self.last_context: contextvars.Context | None = None

    async def put(self, message: SessionMessage) -> None:
        await self._send.send((contextvars.copy_context(), message))

    async def receive(self) -> SessionMessage | Exception:
        self.last_context, item = await self._receive.receive()
        return item

    async def aclose(self) -> None:
        self._send.close()
        self._receive.close()


class Refused(Exception):
    """A new session is refused: ``status`` and ``message`` say why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SessionGone(Exception):
    """The session ended while a request for it was being taken in."""


@dataclass(eq=False)
class Session(WriteStreamBase):
    """One stateful session: its dispatcher's inbox, where each stream's events go, its event store."""

    id: str
    owner: AuthorizationContext | None
    client: str
    """Who opened it, for the per-client quota: the token's principal, else the peer address."""
    json_response: bool
    event_store: SessionScopedEventStore | None
    retry_ms: int | None
    inbox: _Inbox = field(default_factory=_Inbox)
    sinks: dict[str, _Sink | _JSONSink] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    """Streams of requests still being handled (their response not yet routed)."""
    opening: str | None = None
    """The stream of the ``initialize`` request that opened the session, until it is answered."""
    in_flight: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    terminated: bool = False
    failed_to_open: bool = False
    proven: bool = False
    """Made a request after ``initialize`` (or opened its GET stream): a client is using it."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    """Orders storing and writing events against replays, as the SDK's single router task does."""
    replicas: Replicas | None = None
    """The other replicas sharing this session, when the server runs on a shared store."""
    adopted: SessionRecord | None = None
    """The record of a session another replica opened, which this replica serves a copy of."""
    touched: TouchClock = field(default_factory=TouchClock)

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return [(b"mcp-session-id", self.id.encode())]

    # -- the dispatcher's write stream ------------------------------------------------------

    async def send(self, item: SessionMessage, /) -> None:
        """Route one outgoing message to its stream: store it, write it where that stream is open."""
        message = item.message
        stream: str
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            stream = str(message.id)
        elif (related := _related_request(item)) is not None:
            if self.json_response:
                return  # a JSON body carries only the response: no wire, nothing to replay
            stream = str(related)
        else:
            stream = GET_STREAM
        final = stream != GET_STREAM and isinstance(message, JSONRPCResponse | JSONRPCError)
        # Encode before anything changes: a result that cannot be encoded raises, and the
        # dispatcher sends its error down the same, still open, stream.
        data = encode_message(message)
        async with self.lock:
            sink = self.sinks.get(stream)
            if (
                sink is None
                and self.replicas is not None
                and stream == GET_STREAM
                and getattr(message, "method", None) in LIST_CHANGED
            ):
                return  # the replica holding the GET stream sends its own
            store = self.event_store if not self.terminated else None
            event_id = None
            if store is not None:
                try:
                    event_id = await store.store_event(stream, message, len(data))
                except StoreUnavailable as exc:
                    # The response is under way: deliver it, though no one can resume from it.
                    logger.warning("session %s: event not stored: %s", self.id, exc)
            if final:
                self.sinks.pop(stream, None)
                self.live.discard(stream)
                if stream == self.opening:
                    self.opening = None
                    self.failed_to_open = isinstance(message, JSONRPCError)
            if isinstance(sink, _JSONSink):
                if final:
                    sink.deliver(data)
            elif sink is not None:
                await sink.write(sse_event(data, event_id), last=final)
                if sink.closed.is_set():
                    self.sinks.pop(stream, None)
            elif self.replicas is not None and not self.terminated and stream == GET_STREAM:
                # Another replica may hold this session's GET stream: it writes the event.
                event = {"t": "sse", "s": self.id, "id": event_id, "d": data.decode()}
                with contextlib.suppress(StoreUnavailable):
                    await self.replicas.publish(event)

    async def deliver_remote(self, event_id: str | None, data: str) -> None:
        """Write an event another replica produced for this session's GET stream, if it is open here."""
        async with self.lock:
            sink = self.sinks.get(GET_STREAM)
            if isinstance(sink, _Sink):
                await sink.write(sse_event(data.encode(), event_id))

    # -- streams ------------------------------------------------------------------------------

    def attach(self, stream: str, sink: _Sink | _JSONSink) -> None:
        """Send ``stream``'s events to ``sink`` from now on (at once closed if the session has ended)."""
        if self.terminated:
            sink.closed.set()
        else:
            self.sinks[stream] = sink

    async def put(self, message: SessionMessage) -> None:
        """Hand ``message`` to the session's dispatcher; :class:`SessionGone` once the session has ended."""
        try:
            await self.inbox.put(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise SessionGone(self.id) from None

    async def close_stream(self, stream: str) -> None:
        """End ``stream``'s open response (the client reconnects and replays: SSE polling)."""
        async with self.lock:
            sink = self.sinks.get(stream)
            if not isinstance(sink, _Sink):
                return
            del self.sinks[stream]
        await sink.end()

    async def prime(self, stream: str, version: str) -> bytes | None:
        """The priming event for a new response on ``stream``, stored; ``None`` before 2025-11-25."""
        if self.event_store is None or not is_version_at_least(version, "2025-11-25"):
            return None
        event_id = await self.event_store.store_event(stream, None)
        return sse_event(None, event_id, self.retry_ms)

    def end_get_streams(self) -> None:
        """Mark the GET responses open on this session ended; their owners close them."""
        for sink in self.sinks.values():
            if isinstance(sink, _Sink) and sink.is_get:
                sink.closed.set()

    def close_all(self) -> None:
        """Mark every open stream ended (the session is going away)."""
        for sink in self.sinks.values():
            sink.closed.set()
        self.sinks.clear()


class SessionTable:
    """Every stateful session of one app: opens them on ``initialize``, serves their POST/GET/DELETE."""

    def __init__(
        self,
        server: Server[Any],
        serving: ServingApp | None,
        *,
        json_response: bool,
        event_store: EventStore | None,
        retry_ms: int | None,
        idle_timeout: float | None,
        max_sessions: int | None,
        lifespan_state: Callable[[], Any],
        unused_timeout: float | None = None,
        max_sessions_per_client: int | None = None,
        max_streams_per_session: int | None = None,
        replicas: Replicas | None = None,
    ) -> None:
        self.server = server
        self.replicas = replicas
        self.serving = serving
        self.json_response = json_response
        self.event_store = event_store
        self.retry_ms = retry_ms
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self.lifespan_state = lifespan_state
        self.unused_timeout = unused_timeout
        self.max_sessions_per_client = max_sessions_per_client
        self.max_streams_per_session = max_streams_per_session
        self.held_elsewhere: Callable[[], int] = lambda: 0
        """Sessions the app holds outside this table (legacy SSE streams), for ``max_sessions``."""
        self.sessions: dict[str, Session] = {}
        self.unproven: dict[str, Session] = {}
        """Sessions that have made no request since ``initialize``, oldest first."""
        self.clients: dict[str, dict[str, Session]] = {}
        """Each client's sessions, oldest first."""
        self._task_group: anyio.abc.TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the sessions' loops (and the idle reaper) for the app's lifetime; end them all on exit."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            if self.idle_timeout is not None or self.unused_timeout is not None:
                tg.start_soon(self._reap_idle)
            stop_listening = self.replicas.listen(self._on_broadcast) if self.replicas is not None else None
            try:
                yield
            finally:
                if stop_listening is not None:
                    stop_listening()
                for session in list(self.sessions.values()):
                    self._terminate(session)  # with a shared store, the sessions live on elsewhere
                tg.cancel_scope.cancel()
                self._task_group = None

    def end_streams(self) -> None:
        """End every open GET stream (the server is stopping): clients reconnect, requests finish."""
        for session in self.sessions.values():
            session.end_get_streams()

    async def handle(self, scope: Scope, receive: Receive, send: Send, body: bytes = b"") -> None:
        """Serve one request on the MCP path of a stateful app; ``body``: a POST's, already read."""
        request = Request(scope, receive)
        method = scope["method"]
        session_id = request.headers.get("mcp-session-id")
        session = self.sessions.get(session_id) if session_id is not None else None
        if self.replicas is not None and session_id is not None:
            try:
                session = await self._shared(session_id, session, scope)
            except StoreUnavailable as exc:
                await send_error(send, 503, f"Service Unavailable: {exc}", INTERNAL_ERROR)
                return
        if session is not None and session.owner != _requestor(scope):
            # A session answers only the credential that opened it; to others it does not exist.
            session = None
        if method == "POST":
            await self._post(request, body, session_id, session, send)
        elif method in ("GET", "DELETE"):
            if session_id is None:
                await send_error(send, 400, _MISSING_SESSION)
            elif session is None:
                await send_error(send, 404, _NO_SESSION)
            elif method == "GET":
                await self._get(request, session, send)
            else:
                try:
                    await self._end(session)
                except StoreUnavailable as exc:
                    await send_error(send, 503, f"Service Unavailable: {exc}", INTERNAL_ERROR)
                    return
                await send_json(send, 200, b"", session.headers)
        else:
            await send_error(send, 405, "Method Not Allowed", -32600, [(b"allow", b"GET, POST, DELETE")])

    # -- POST -------------------------------------------------------------------------------

    async def _post(
        self, request: Request, body: bytes, session_id: str | None, session: Session | None, send: Send
    ) -> None:
        has_json, has_sse = check_accept_headers(request)
        if not has_json or not (has_sse or self.json_response):
            need = "application/json" if self.json_response else "both application/json and text/event-stream"
            await send_error(send, 406, f"Not Acceptable: Client must accept {need}", -32600)
            return
        message, refused = screen(body)
        if message is None:
            await send_refusal(send, refused)
            return
        opening = (
            isinstance(message, JSONRPCRequest) and message.method == "initialize" and session_id is None
        )
        if opening:
            try:
                session = await self._open(request, message.params or {})  # type: ignore[union-attr]
            except Refused as refused:
                code = INTERNAL_ERROR if refused.status >= 500 else INVALID_REQUEST
                await send_error(send, refused.status, refused.message, code)
                return
        elif session_id is None:
            await send_error(send, 400, _MISSING_SESSION)
            return
        elif session is None:
            await send_error(send, 404, _NO_SESSION)
            return
        if not isinstance(message, JSONRPCRequest):
            # Notifications and the client's answers to our requests: accepted, then dispatched.
            metadata = ServerMessageMetadata(request_context=request)
            if self.replicas is not None:
                # The request answered (or cancelled) may be running on another replica's copy.
                try:
                    await self.replicas.publish({"t": "client", "s": session.id, "m": body.decode()})
                except StoreUnavailable as exc:
                    await send_error(send, 503, f"Service Unavailable: {exc}", INTERNAL_ERROR)
                    return
            try:
                await session.put(SessionMessage(message, metadata=metadata))
            except SessionGone:
                await send_error(send, 404, _NO_SESSION)
                return
            await send_json(send, 202, b"", session.headers)
            return
        if not session.proven and not opening:
            self._prove(session)
        if self.max_streams_per_session is not None and session.in_flight >= self.max_streams_per_session:
            await self._too_many_streams(session, send, message.id)
            return
        version = (
            str((message.params or {}).get("protocolVersion", DEFAULT_NEGOTIATED_VERSION))
            if opening
            else request.headers.get("mcp-protocol-version", DEFAULT_NEGOTIATED_VERSION)
        )
        session.in_flight += 1
        try:
            await self._serve_request(session, request, message, version, send, opening=opening)
        except SessionGone:
            await send_error(send, 404, _NO_SESSION)
        except StoreUnavailable as exc:  # raised before the response started (storing its priming event)
            await send_error(send, 503, f"Service Unavailable: {exc}", INTERNAL_ERROR)
        finally:
            session.in_flight -= 1
            session.idle_since = time.monotonic()
        if session.failed_to_open:
            with contextlib.suppress(StoreUnavailable):
                await self._end(session)  # an initialize that failed leaves no session behind

    async def _serve_request(
        self,
        session: Session,
        request: Request,
        message: JSONRPCRequest,
        version: str,
        send: Send,
        *,
        opening: bool,
    ) -> None:
        stream = str(message.id)
        metadata = self._metadata(session, request, message, stream, version)
        if opening:
            # Only the initialize that opened the session decides its fate; a later one is
            # refused by the server and leaves the session as it was.
            session.opening = stream
        session.live.add(stream)

        async def abandon() -> None:
            # The answer can reach no one: cancel the request as its client would have.
            params = {"requestId": message.id, "reason": "the client disconnected"}
            cancel = JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params)
            with contextlib.suppress(SessionGone):
                await session.put(
                    SessionMessage(cancel, metadata=ServerMessageMetadata(request_context=request))
                )

        if self.json_response:
            waiter = _JSONSink()
            session.attach(stream, waiter)
            await session.put(SessionMessage(message, metadata=metadata))
            with DisconnectWatch(request.receive, abandon):
                await waiter.closed.wait()
            if waiter.answer is None:
                await send_error(send, 500, "Session terminated before the request completed", INTERNAL_ERROR)
            else:
                await send_json(send, 200, waiter.answer, session.headers)
            return
        priming = await session.prime(stream, version)
        await _start_sse(send, session)
        sink = _Sink(send)
        if priming is not None:
            await sink.write(priming)
        session.attach(stream, sink)
        try:
            await session.put(SessionMessage(message, metadata=metadata))
            if session.event_store is None:  # nothing stored to resume from
                with DisconnectWatch(request.receive, abandon):
                    await sink.closed.wait()
            else:
                await sink.closed.wait()
        finally:
            await sink.end()

    def _metadata(
        self, session: Session, request: Request, message: JSONRPCRequest, stream: str, version: str
    ) -> ServerMessageMetadata:
        """What the dispatcher hands the handler: the HTTP request, stream callbacks, the unanswered hook."""

        async def end_unanswered() -> None:
            # The 2025 wire ends a request's stream only with a response for its id.
            error = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
            await session.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))

        closers: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        resumable = session.event_store is not None and not self.json_response
        if resumable and is_version_at_least(version, "2025-11-25"):
            # Only SSE clients that understood the priming event can come back for the rest.

            async def close_sse_stream() -> None:
                await session.close_stream(stream)

            async def close_standalone_sse_stream() -> None:
                await session.close_stream(GET_STREAM)

            closers = {
                "close_sse_stream": close_sse_stream,
                "close_standalone_sse_stream": close_standalone_sse_stream,
            }
        return ServerMessageMetadata(
            request_context=request,
            on_request_unanswered=end_unanswered,
            can_send_request=not self.json_response,
            **closers,  # type: ignore[arg-type]
        )

    # -- GET ----------------------------------------------------------------------------------

    async def _get(self, request: Request, session: Session, send: Send) -> None:
        if not check_accept_headers(request)[1]:
            await send_error(send, 406, "Not Acceptable: Client must accept text/event-stream", -32600)
            return
        # Without an event store there is nothing to replay: the header is ignored.
        last_event_id = request.headers.get("last-event-id") if session.event_store is not None else None
        version = request.headers.get("mcp-protocol-version", DEFAULT_NEGOTIATED_VERSION)
        if last_event_id is None and GET_STREAM in session.sinks:
            await send_error(
                send, 409, "Conflict: Only one SSE stream is allowed per session", -32600, session.headers
            )
            return
        if not session.proven:
            self._prove(session)
        if self.max_streams_per_session is not None and session.in_flight >= self.max_streams_per_session:
            await self._too_many_streams(session, send, None)
            return
        await _start_sse(send, session)
        sink = _Sink(send, is_get=True)
        resumed: bool | Callable[[], Coroutine[Any, Any, None]] = True
        if last_event_id is None:
            session.attach(GET_STREAM, sink)
        else:
            try:
                resumed = await self._resume(session, sink, last_event_id, version)
            except StoreUnavailable as exc:
                logger.warning("cannot resume a stream of session %s: %s", session.id, exc)
                resumed = False
        if resumed is False:
            await sink.end()
            return
        session.in_flight += 1
        try:
            async with anyio.create_task_group() as tg:
                # The stream lives until the client leaves or the stream is closed from our side.
                tg.start_soon(_until_disconnected, request.receive, tg.cancel_scope)
                if callable(resumed):
                    tg.start_soon(resumed)
                await sink.closed.wait()
                tg.cancel_scope.cancel()
        finally:
            session.in_flight -= 1
            session.idle_since = time.monotonic()
            async with session.lock:
                for stream, open_sink in list(session.sinks.items()):
                    if open_sink is sink:
                        del session.sinks[stream]
            await sink.end()

    async def _too_many_streams(self, session: Session, send: Send, request_id: Any) -> None:
        message = (
            f"Too Many Requests: {session.in_flight} requests and streams are open on this session "
            f"(max_streams_per_session={self.max_streams_per_session})"
        )
        error = JSONRPCError(
            jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_REQUEST, message=message)
        )
        await send_json(send, 429, encode_message(error), session.headers)

    async def _resume(
        self, session: Session, sink: _Sink, last_event_id: str, version: str
    ) -> bool | Callable[[], Coroutine[Any, Any, None]]:
        """Replay what came after ``last_event_id``; keep ``sink`` open if its stream is still live.

        Returns whether ``sink`` stays attached, or (a request served by another replica)
        what follows that replica's further events onto ``sink``.
        """
        assert session.event_store is not None
        last = last_event_id
        answered = False

        async def replay(event: Any) -> None:
            nonlocal last, answered
            await sink.write(sse_event(encode_message(event.message), event.event_id))
            last = event.event_id
            answered = answered or isinstance(event.message, JSONRPCResponse | JSONRPCError)

        async with session.lock:
            stream = await session.event_store.replay_events_after(last_event_id, replay)
            if stream is None or sink.closed.is_set():
                return False
            if stream != GET_STREAM and stream not in session.live:
                if self.replicas is None or answered:
                    return False  # the request was answered and its response replayed: nothing to wait for
                return await self._follower(session, sink, stream, last)
            previous = session.sinks.get(stream)
            if previous is not None:
                previous.closed.set()  # its owner ends that response; this one carries the stream now
            session.attach(stream, sink)
        priming = await session.prime(stream, version)
        if priming is not None:
            await sink.write(priming)
        return True

    async def _follower(
        self, session: Session, sink: _Sink, stream: str, last: str
    ) -> bool | Callable[[], Coroutine[Any, Any, None]]:
        """What carries on a request stream another replica serves: its events from the store as
        they come, or an error for the request once that replica is gone."""
        replicas, store = self.replicas, self.event_store
        assert replicas is not None
        follow = getattr(store, "follow", None)
        last_writer = getattr(store, "last_writer", None)
        writer = await last_writer(session.id, stream) if last_writer is not None else None

        async def lost() -> None:
            message = (
                f"the server replica handling this request stopped before answering (shared state "
                f"{replicas.store}); send the request again"
            )
            # The code of a lost connection: clients send idempotent requests again on it.
            lost_code = ErrorData(code=CONNECTION_CLOSED, message=message)
            error = JSONRPCError(jsonrpc="2.0", id=request_id_of(stream), error=lost_code)
            await sink.write(sse_event(encode_message(error)), last=True)

        if follow is None or not await replicas.writer_alive(writer):
            await lost()
            return False

        async def carry() -> None:
            try:
                async for event in follow(last, int(WATCH_WRITER_S * 1000)):
                    if event is None:
                        if not await replicas.writer_alive(writer):
                            await lost()
                            return
                        continue
                    final = isinstance(event.message, JSONRPCResponse | JSONRPCError)
                    await sink.write(sse_event(encode_message(event.message), event.event_id), last=final)
                    if final:
                        return
            except StoreUnavailable as exc:
                logger.warning("stopped following a stream of session %s: %s", session.id, exc)
            await sink.end()

        return carry

    # -- lifecycle ----------------------------------------------------------------------------

    async def _open(self, request: Request, initialize: dict[str, Any]) -> Session:
        """A new session for ``request``'s client; :class:`Refused` when it may not have one."""
        if self._task_group is None:
            raise RuntimeError("toolkernel-http: the session table is not running")
        owner = _requestor(request.scope)
        client = _client_key(request.scope, owner)
        mine = self.clients.get(client, {})
        quota = self.max_sessions_per_client
        if quota is not None and len(mine) >= quota and not self._reclaim(mine.values()):
            raise Refused(
                429,
                f"Too Many Requests: this client has {len(mine)} sessions open "
                f"(max_sessions_per_client={quota}); end one with DELETE",
            )
        held = len(self.sessions) + self.held_elsewhere()
        full = self.max_sessions is not None and held >= self.max_sessions
        if full and not self.reclaim_unused():
            logger.warning("refusing a new session: %d sessions are open", len(self.sessions))
            raise Refused(503, "Too many open sessions")
        session_id = uuid4().hex
        store = (
            SessionScopedEventStore(self.event_store, session_id) if self.event_store is not None else None
        )
        session = Session(
            session_id, owner, client, self.json_response, store, self.retry_ms, replicas=self.replicas
        )
        if self.replicas is not None:
            # Recorded before the client learns the id: its next request may reach any replica.
            record = SessionRecord(session_id, dict(owner) if owner else None, client, dict(initialize))
            ttl = self.unused_timeout if self.unused_timeout is not None else self.idle_timeout
            try:
                await self.replicas.state.sessions.save(record, ttl)
            except StoreUnavailable as exc:
                raise Refused(503, f"Service Unavailable: {exc}") from None
        self.sessions[session_id] = session
        self.unproven[session_id] = session
        self.clients.setdefault(client, {})[session_id] = session
        await self._task_group.start(self._serve_session, session)
        return session

    async def _shared(self, session_id: str, session: Session | None, scope: Scope) -> Session | None:
        """The session ``session_id`` as this replica serves it: adopted from the registry when another
        replica opened it; ``None`` once it ended anywhere. Keeps its registry entry alive."""
        assert self.replicas is not None
        registry = self.replicas.state.sessions
        if session is None:
            record = await registry.load(session_id)
            if record is None or record.owner != _requestor(scope):
                return None
            session = self.sessions.get(session_id)  # adopted by a request that came meanwhile
            if session is None:
                session = await self._adopt(record)
        else:
            fresh = session.proven and not session.touched.due(self.idle_timeout)
            if fresh or session.owner != _requestor(scope):
                return session
        if not await registry.touch(session_id, self.idle_timeout):
            self._terminate(session)  # ended, or expired, elsewhere
            return None
        session.touched = TouchClock()
        return session

    async def _adopt(self, record: SessionRecord) -> Session:
        """Serve a copy of a session another replica opened (see :mod:`toolkernel_http._replicas`)."""
        if self._task_group is None:
            raise RuntimeError("toolkernel-http: the session table is not running")
        session_id = record.session_id
        store = (
            SessionScopedEventStore(self.event_store, session_id) if self.event_store is not None else None
        )
        owner: Any = record.owner
        session = Session(
            session_id,
            owner,
            record.client,
            self.json_response,
            store,
            self.retry_ms,
            replicas=self.replicas,
            adopted=record,
            proven=True,
        )
        self.sessions[session_id] = session
        self.clients.setdefault(record.client, {})[session_id] = session
        await self._task_group.start(self._serve_session, session)
        return session

    async def _end(self, session: Session) -> None:
        """End ``session`` for good: here, and with a shared store on every replica."""
        self._terminate(session)
        if self.replicas is None:
            return
        await self.replicas.state.sessions.drop(session.id)
        forget = getattr(self.event_store, "forget", None)
        if forget is not None:
            await forget(session.id)
        await self.replicas.publish({"t": "end", "s": session.id})

    def _on_broadcast(self, message: dict[str, Any]) -> None:
        """Another replica ended a session, wrote an event for a GET stream, or passed on a client message."""
        assert self.replicas is not None
        session = self.sessions.get(str(message.get("s")))
        if session is None:
            return
        kind = message.get("t")
        if kind == "end":
            self._terminate(session)
        elif kind == "sse":
            self.replicas.spawn(session.deliver_remote(message.get("id"), str(message.get("d"))))
        elif kind == "client":
            item = SessionMessage(jsonrpc_message_adapter.validate_json(str(message.get("m")), by_name=False))
            self.replicas.spawn(_put_quietly(session, item))

    def reclaim_unused(self) -> bool:
        """End the oldest session that never made a second request and is idle; whether there was one."""
        return self._reclaim(self.unproven.values())

    def _reclaim(self, candidates: Iterable[Session]) -> bool:
        """End the oldest of ``candidates`` that never made a second request and is idle; whether one was."""
        for session in candidates:
            if not session.proven and session.in_flight == 0:
                logger.info("session %s ends unused to make room for a new one", session.id)
                self._terminate(session)
                return True
        return False

    def _prove(self, session: Session) -> None:
        """``session`` is in use: from now on only the idle timeout ends it."""
        session.proven = True
        self.unproven.pop(session.id, None)

    async def _serve_session(self, session: Session, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The session's protocol loop: the SDK's dispatcher, fed by POSTs, writing to ``session``."""
        hooks = self.serving.session(transport="http", session_id=session.id) if self.serving else None
        async with hooks or contextlib.nullcontext():
            try:
                with session.scope:
                    task_status.started()
                    if session.adopted is not None:
                        await serve_adopted(
                            self.server,
                            session.inbox,
                            session,
                            lifespan_state=self.lifespan_state(),
                            session_id=session.id,
                            initialize=session.adopted.initialize,
                            on_connection=self._track,
                        )
                    else:
                        await serve_loop(
                            self.server,
                            session.inbox,
                            session,
                            lifespan_state=self.lifespan_state(),
                            session_id=session.id,
                        )
            except Exception:
                logger.exception("session %s crashed", session.id)
            finally:
                self._terminate(session)
                session.close_all()  # after the loop: its last answers (connection closed) go first

    def _track(self, connection: Any) -> None:
        """An adopted session's connection hears list-change notifications like one opened here."""
        server = getattr(self.serving, "server", None)
        if server is not None:
            server.track_connection(connection)

    def _terminate(self, session: Session) -> None:
        """End ``session`` here: later requests get 404 (or, with a shared store, adopt it again),
        its loop and open streams stop."""
        if session.terminated:
            return
        session.terminated = True
        self.sessions.pop(session.id, None)
        self.unproven.pop(session.id, None)
        mine = self.clients.get(session.client)
        if mine is not None:
            mine.pop(session.id, None)
            if not mine:
                del self.clients[session.client]
        session.scope.cancel()
        if session.event_store is not None and self.replicas is None:
            session.event_store.release()  # nobody can resume an ended session

    async def _reap_idle(self) -> None:
        """End sessions idle (nothing in flight, no open stream) for ``idle_timeout`` seconds, and
        sessions that never made a second request for ``unused_timeout`` seconds."""
        timeouts = [t for t in (self.idle_timeout, self.unused_timeout) if t is not None]
        while True:
            await anyio.sleep(min(min(timeouts) / 4, 30.0))
            now = time.monotonic()
            if self.unused_timeout is not None:
                for session in list(self.unproven.values()):
                    if session.in_flight == 0 and now - session.idle_since > self.unused_timeout:
                        logger.info("session %s unused: closed", session.id)
                        self._terminate(session)
            if self.idle_timeout is not None:
                due: list[str] = []
                for session in list(self.sessions.values()):
                    if session.in_flight == 0 and now - session.idle_since > self.idle_timeout:
                        logger.info("session %s idle timeout", session.id)
                        self._terminate(session)
                    elif self.replicas is not None and session.touched.due(self.idle_timeout):
                        # A long GET stream is use too: keep the session alive for other replicas.
                        session.touched = TouchClock()
                        due.append(session.id)
                if due and self.replicas is not None:
                    self.replicas.spawn(_touch_all(self.replicas, due, self.idle_timeout))


async def _touch_all(replicas: Replicas, session_ids: list[str], ttl_s: float | None) -> None:
    """Restart the registry entries' time to live one after another: sessions opened together come
    due together, and a burst of one store call per session would crowd out the requests' own."""
    for session_id in session_ids:
        await replicas.state.sessions.touch(session_id, ttl_s)


async def _put_quietly(session: Session, item: SessionMessage) -> None:
    with contextlib.suppress(SessionGone):
        await session.put(item)


async def _start_sse(send: Send, session: Session) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *session.headers]})


def _related_request(item: SessionMessage) -> Any:
    """The id of the request an outgoing message belongs to, if the dispatcher said."""
    metadata = item.metadata
    return metadata.related_request_id if isinstance(metadata, ServerMessageMetadata) else None


async def _until_disconnected(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _client_key(scope: Scope, owner: AuthorizationContext | None) -> str:
    """Whom a session is counted against: the token's principal when there is one, else the client's address.

    The address is the scope's ``client``: the peer, or behind a trusted proxy the client that
    proxy names in X-Forwarded-For (uvicorn's proxy headers, ``forwarded_allow_ips``), so the
    clients of a load balancer do not share one quota.
    """
    if owner is not None:
        return f"principal:{owner['issuer']}|{owner['subject'] or owner['client_id']}"
    peer = scope.get("client")
    return f"address:{peer[0] if peer else '?'}"


def _requestor(scope: Scope) -> AuthorizationContext | None:
    user = scope.get("user")
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None
