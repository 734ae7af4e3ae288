"""Connection limits uvicorn lacks: a deadline for request headers and a cap on open connections.

uvicorn's keep-alive timer stops at the first byte a client sends, so a client that sends
its headers a byte at a time (slowloris) holds a connection forever, and nothing bounds
how many connections are open. This protocol (uvicorn's httptools one) answers a request
whose headers are not complete ``header_timeout_s`` after the connection opened (or after
the previous response) with ``408`` and closes it, and answers a connection past
``max_connections`` with ``503`` at once. Both bodies are JSON-RPC errors, as every refusal.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _refusal(status: str, message: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a connection cap (class attributes)."""

    header_timeout_s: float | None = None
    max_connections: int | None = None
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.max_connections is not None and len(self.connections) >= self.max_connections:
            self.transport = transport  # connection_lost closes it
            message = f"Service Unavailable: {len(self.connections)} connections are open (max_connections)"
            transport.write(_refusal("503 Service Unavailable", message))
            transport.close()
            return
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request's headers are due within the deadline too

    def _arm(self) -> None:
        if self.header_timeout_s is not None:
            self._disarm()
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            message = (
                f"Request Timeout: headers not complete within {self.header_timeout_s}s (header_timeout_s)"
            )
            self.transport.write(_refusal("408 Request Timeout", message))
            self.transport.close()


def guarded_protocol(header_timeout_s: float | None, max_connections: int | None) -> type[Any]:
    """A :class:`GuardedProtocol` class with these limits, for ``uvicorn.Config(http=...)``."""
    limits = {"header_timeout_s": header_timeout_s, "max_connections": max_connections}
    return type("GuardedProtocol", (GuardedProtocol,), limits)
