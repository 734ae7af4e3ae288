"""The front door of a stateless app: a plain stateless POST skips the middleware stack.

Each layer of the stack (the Host/Origin/Content-Type guard, CORS, the JSON-RPC error
rewriter, Starlette's error and exception middleware, the router) wraps ``send`` or reads
the headers again; together they cost a stateless tool call about as much as the call
itself. The door sits in front of the stack and lets through, straight to the direct path,
only a request the stack would hand to it unchanged: a POST to the endpoint that the guard
admits, with no ``Origin`` (a browser's request gets its CORS handling from the stack), a
body the direct path serves. Everything else, refusals included, goes to the stack, which
answers it as before. What the stack adds to a direct-path answer, the door adds too:
``Vary: Origin`` when CORS is on, and the router's scope keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_types import INTERNAL_ERROR
from starlette._utils import get_route_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkernel_http import _fastpath
from toolkernel_http._responses import send_error, send_too_large

GUARDED_HEADERS = frozenset((b"host", b"origin", b"content-type", b"content-length"))
"""The headers the app's guard checks (the first of each counts)."""


class FrontDoor:
    """ASGI app in front of ``stack``: serves the plain stateless POSTs, hands over everything else."""

    def __init__(
        self,
        stack: ASGIApp,
        *,
        path: str,
        endpoint: Any,
        router: Any,
        verdict: Callable[[str, dict[bytes, bytes]], int | None],
        cors: bool,
    ) -> None:
        self.stack = stack
        self.path = path
        self.endpoint = endpoint
        self.route_scope = {"router": router, "endpoint": endpoint, "path_params": {}}
        self.verdict = verdict
        self.headers = [(b"vary", b"Origin")] if cors else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoint
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or get_route_path(scope) != self.path
            or not endpoint.state.started
            or (version := self.admits(scope, endpoint.sse)) is None
        ):
            await self.stack(scope, receive, send)
            return
        body = await _fastpath.read_body(receive, endpoint.max_body_bytes)
        if body is None:
            await send_too_large(send, endpoint.max_body_bytes, self.headers)
            return
        request = _fastpath.parse(body)
        if request is None:
            await self.stack(scope, _fastpath.replaying(body, receive), send)
            return
        scope.update(self.route_scope)
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        manager = endpoint.manager
        try:
            await _fastpath.serve(
                manager.app,
                manager._lifespan_state,
                request,
                version,
                endpoint.sse,
                scope,
                receive,
                tracked,
                self.headers,
            )
        except Exception:
            # What Starlette's error middleware does, with a JSON-RPC body as on every refusal.
            if not started:
                await send_error(send, 500, "Internal Server Error", INTERNAL_ERROR, self.headers)
            raise

    def admits(self, scope: Scope, sse: bool) -> str | None:
        """The version the direct path serves the POST ``scope`` at, when the guard admits it and it has
        no ``Origin``; else ``None``. One pass over the headers for the guard's and the direct path's
        checks."""
        guarded: dict[bytes, bytes] = {}
        version: bytes | None = None
        accept: bytes | None = None
        for key, value in scope["headers"]:
            if key in GUARDED_HEADERS:
                if key == b"origin":
                    return None  # a browser's request: CORS is the stack's
                if key not in guarded:
                    guarded[key] = value
            elif key == b"accept":
                accept = value
            elif key == b"mcp-protocol-version":
                version = value
            elif key == b"mcp-session-id":
                return None
        if self.verdict("POST", guarded) is not None:
            return None
        return _fastpath.version_for(version, accept, sse)
