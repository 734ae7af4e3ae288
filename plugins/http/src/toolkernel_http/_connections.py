"""Connection limits uvicorn lacks: a deadline, a size and a count for request headers, and a
cap on open connections.

uvicorn's keep-alive timer stops at the first byte a client sends, so a client that sends
its headers a byte at a time (slowloris) holds a connection forever, and nothing bounds
how many connections are open. This protocol (uvicorn's httptools one) answers a request
whose headers are not complete ``header_timeout_s`` after the connection opened (or after
the previous response) with ``408`` and closes it, and answers a connection past
``max_connections`` with ``503`` at once. A request whose request line and headers pass
``max_header_bytes``, or whose headers number more than ``max_headers``, gets ``431`` and the
connection is closed, before any body is read or any token looked at: httptools gathers a
header by joining the pieces it has read, so one 128 MB header would otherwise cost seconds of
the event loop every client shares. All bodies are JSON-RPC errors, as every refusal.

It also writes a response's head and its first body chunk in one system call
(:class:`HeadWithBody`): uvicorn writes the head as soon as the app starts the response, so a
small JSON answer took two writes, two TCP segments and two wake-ups of the client. And it
keeps uvicorn's keep-alive deadline (an idle connection is closed ``timeout_keep_alive``
seconds after its last response) without the timer uvicorn makes after every response and
cancels when the next request comes: the loop's shared deadlines keep it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from toolkernel_http._deadlines import Deadlines, deadlines


def _refusal(status: str, message: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


LINGER_S = 2.0
"""Seconds a refused connection is kept open, reading nothing, so the client can read the answer."""


_Base = HttpToolsProtocol
"""Called directly rather than through ``super()``: these callbacks run several times a request."""


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a connection cap (class attributes)."""

    header_timeout_s: float | None = None
    max_connections: int | None = None
    max_header_bytes: int | None = None
    max_headers: int | None = None
    _header_timer: asyncio.TimerHandle | None = None
    _head_since = 0.0
    """Loop time from which the current request's headers are due."""
    _awaiting_head = False
    _head_bytes = 0
    """Bytes received since the current request began, while its headers are incomplete."""
    _in_head = True
    _refused = False
    _read = 0
    """Bytes of the read being parsed."""
    _first_read = 0
    """Bytes of the read in which the current request began (its head is at most that plus
    ``_head_bytes``)."""
    _idle: Deadlines | None = None
    """The loop's keep-alive deadlines, where this connection waits between requests."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.max_connections is not None and len(self.connections) >= self.max_connections:
            self.transport = transport  # connection_lost closes it
            message = f"Service Unavailable: {len(self.connections)} connections are open (max_connections)"
            transport.write(_refusal("503 Service Unavailable", message))
            transport.close()
            return
        super().connection_made(HeadWithBody(transport, self.loop))
        self._idle = deadlines(self.loop, self.timeout_keep_alive)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        if self._idle is not None:
            self._idle.clear(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        read = self._read = len(data)
        if self._in_head:
            self._head_bytes += read
        _Base.data_received(self, data)
        # Headers still incomplete after this read: refuse once they pass the limit, so at
        # most one read (256 KiB) past it is ever parsed.
        if self._in_head and not self._refused:
            if self._over_bytes(self._head_bytes):
                self._refuse_headers(f"request headers over {self.max_header_bytes} bytes (max_header_bytes)")
            else:
                self._check_header_count()

    def on_message_begin(self) -> None:
        self._in_head, self._head_bytes = True, 0
        self._first_read = self._read
        _Base.on_message_begin(self)

    def on_url(self, url: bytes) -> None:
        if not self._refused:
            _Base.on_url(self, url)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._refused:
            return
        if self._check_header_count():
            return
        # Counted exactly only when the reads the head came in could hold more than the limit.
        if self._over_bytes(self._first_read + self._head_bytes):
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if self._over_bytes(size):
                self._refuse_headers(f"request headers over {self.max_header_bytes} bytes (max_header_bytes)")
                return
        self._awaiting_head = False  # the headers came: no deadline until the response re-arms it
        _Base.on_headers_complete(self)

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            _Base.on_body(self, body)

    def on_message_complete(self) -> None:
        if not self._refused:
            _Base.on_message_complete(self)

    def _check_header_count(self) -> bool:
        """Refuse the request once it has sent more than ``max_headers`` headers; whether it did.

        Counted after each read and when the headers are complete, not header by header (a
        call each): a read adds at most what fits in it.
        """
        if self.max_headers is not None and len(self.headers) > self.max_headers:
            self._refuse_headers(f"more than {self.max_headers} request headers (max_headers)")
            return True
        return False

    def _over_bytes(self, size: int) -> bool:
        return self.max_header_bytes is not None and size > self.max_header_bytes

    def _refuse_headers(self, reason: str) -> None:
        """Answer 431: no application, body or token sees this request.

        The write side is closed at once and whatever else the client sends is dropped unread
        for up to :data:`LINGER_S`: closing with unread data would reset the connection, and a
        client still sending would lose the answer.
        """
        self._refused = True
        self._stop_timer()
        message = f"Request Header Fields Too Large: {reason}"
        self.transport.write(_refusal("431 Request Header Fields Too Large", message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()

    def on_response_complete(self) -> None:
        # uvicorn's, except for the keep-alive deadline: a shared one rather than a timer made now
        # and cancelled by the next request.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self._idle is not None:
            self._idle.set(self, self.timeout_keep_alive_handler, self.loop)
        self._arm()  # the next request's headers are due within the deadline too

    def _unset_keepalive_if_required(self) -> None:
        # uvicorn's cancels its keep-alive timer, which this protocol never makes.
        if self._idle is not None:
            self._idle.clear(self)

    def _arm(self) -> None:
        """Headers are due from now: the connection's one timer checks them when it fires.

        A timer made and cancelled for every request would cost several microseconds of each;
        the connection keeps one, which re-arms itself for the deadline it finds.
        """
        timeout = self.header_timeout_s
        if timeout is None:
            return
        self._head_since = self.loop.time()
        self._awaiting_head = True
        if self._header_timer is None:
            self._header_timer = self.loop.call_at(self._head_since + timeout, self._check_head)

    def _stop_timer(self) -> None:
        self._awaiting_head = False
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _check_head(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.header_timeout_s is None:
            return
        now = self.loop.time()
        if not self._awaiting_head:  # a request is being served: look again a timeout from now
            self._header_timer = self.loop.call_at(now + self.header_timeout_s, self._check_head)
            return
        due = self._head_since + self.header_timeout_s
        if now < due:  # headers of a later request, due later
            self._header_timer = self.loop.call_at(due, self._check_head)
            return
        message = f"Request Timeout: headers not complete within {self.header_timeout_s}s (header_timeout_s)"
        self.transport.write(_refusal("408 Request Timeout", message))
        self.transport.close()


class HeadWithBody(asyncio.Transport):
    """A connection's transport as uvicorn's protocol and its response cycles see it: a response
    head is held until the response's first body chunk, and both go out in one write.

    A head is what uvicorn writes on ``http.response.start``: a status line and headers ending in
    a blank line, nothing after it. Informational heads (``100 Continue``) go out at once. A head
    whose body does not follow in the same step of the app (a stream) goes out on the loop's next
    turn, before anything else written later, and before ``close``/``write_eof``.
    """

    __slots__ = ("_head", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
        elif data[-4:] == b"\r\n\r\n" and data[:9] == b"HTTP/1.1 " and data[9:10] != b"1":
            self._head = bytes(data)
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Write a held head now."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._head or b"")

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)


def guarded_protocol(
    header_timeout_s: float | None,
    max_connections: int | None,
    max_header_bytes: int | None = None,
    max_headers: int | None = None,
) -> type[Any]:
    """A :class:`GuardedProtocol` class with these limits, for ``uvicorn.Config(http=...)``."""
    limits = {
        "header_timeout_s": header_timeout_s,
        "max_connections": max_connections,
        "max_header_bytes": max_header_bytes,
        "max_headers": max_headers,
    }
    return type("GuardedProtocol", (GuardedProtocol,), limits)
