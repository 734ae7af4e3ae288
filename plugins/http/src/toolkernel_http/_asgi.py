"""The ASGI application: Streamable HTTP and legacy SSE, behind request checks.

Stateful 2025-era sessions are served by :mod:`toolkernel_http._sessions`; stateless
2025-era requests (through :mod:`toolkernel_http._fastpath` where it can) and every
2026-07-28 request by the SDK's session manager, which also runs the server's lifespan.
This module adds what a deployable endpoint needs around them: Host/Origin checks derived
from the bind address, a body-size limit, ``Content-Type`` checks, JSON-RPC error bodies
on every refusal, CORS for browser clients, and a lifespan a parent Starlette/FastAPI app
can run.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http import EventStore
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.datastructures import Headers, State
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkernel.context import use_state_key
from toolkernel.errors import ConfigError
from toolkernel.shared_state import StoreUnavailable
from toolkernel_http import _fastpath
from toolkernel_http._events import InMemoryEventStore
from toolkernel_http._front import GUARDED_HEADERS, FrontDoor
from toolkernel_http._options import LOOPBACK_HOSTS, HTTPServerOptions
from toolkernel_http._replicas import Replicas
from toolkernel_http._responses import screen, send_error, send_refusal, send_too_large
from toolkernel_http._sessions import SessionTable

if TYPE_CHECKING:
    from toolkernel.server import MCPServer
    from toolkernel.shared_state import SharedState
    from toolkernel.transports import ServingApp

logger = logging.getLogger("toolkernel.http")

_WILDCARD_HOSTS = ("0.0.0.0", "::", "")
_NO_SDK_CHECKS = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class MCPHTTPApp(Starlette):
    """The Starlette app :func:`asgi_app` returns; ``lifespan`` lets a parent app start it when mounted."""

    session_manager: StreamableHTTPSessionManager
    sessions: SessionTable | None
    options: HTTPServerOptions
    endpoint_path: str
    shared_state: SharedState | None
    serving: ServingApp | None
    door: Callable[[ASGIApp], FrontDoor] | None = None
    """Builds the front door around the middleware stack; ``None``: no door (stateful, auth, SSE only)."""
    door_middleware: list[Any] | None = None
    """The middleware :func:`asgi_app` added: middleware added after it keeps the door shut."""

    def build_middleware_stack(self) -> ASGIApp:
        """Starlette's stack, behind the front door of :mod:`toolkernel_http._front` when it may open.

        The door skips the stack's layers, so it opens only when they are the ones
        :func:`asgi_app` put there: no middleware or exception handler added since.
        """
        stack = super().build_middleware_stack()
        if self.door is None or self.user_middleware != self.door_middleware or self.exception_handlers:
            return stack
        return self.door(stack)

    def end_streams(self) -> None:
        """End open GET streams now, so a stopping server need not wait out their clients.

        ``toolkernel serve`` calls this when uvicorn begins to shut down; an application
        that mounts the app can call it from its own shutdown.
        """
        if self.sessions is not None:
            self.sessions.end_streams()

    @contextlib.asynccontextmanager
    async def lifespan(self, parent: Any = None) -> AsyncIterator[None]:
        """Run the session manager; pass as ``Starlette(lifespan=mcp_app.lifespan)`` when mounting.

        Mounted with its endpoint at ``path="/"`` (``Mount("/mcp", app)``), the parent would
        answer ``POST /mcp`` with a 307 to ``/mcp/`` (Starlette's slash redirect), which many
        clients do not follow for a POST; the mount path itself is routed here instead.
        """
        if self.endpoint_path == "/":
            _route_mount_paths(parent, self)
        async with contextlib.AsyncExitStack() as stack:
            if self.shared_state is not None:
                await stack.enter_async_context(self.shared_state.run())
                if self.shared_state.shared and "TOOLKERNEL_STATE_SECRET" not in os.environ:
                    # A multi-round (requestState) call may continue on any replica.
                    try:
                        use_state_key(await self.shared_state.secret("request-state"))
                    except StoreUnavailable as exc:
                        logger.warning("requestState stays signed per replica: %s", exc)
                worker = getattr(self.serving, "task_worker", None)
                if self.shared_state.queue is not None and worker is not None:
                    await stack.enter_async_context(worker(self.shared_state.queue))
            await stack.enter_async_context(self.session_manager.run())
            if self.sessions is not None:
                await stack.enter_async_context(self.sessions.run())
            self.state.started = True
            try:
                yield
            finally:
                self.state.started = False


class _MountPath:
    """The bare mount path (``/mcp``), answered by the mounted app as its root (``/mcp/``)."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope = {**scope, "path": scope["path"] + "/"}
        if scope.get("raw_path"):
            scope["raw_path"] = scope["raw_path"] + b"/"
        _, child = self.mount.matches(scope)
        scope.update(child)
        await self.mount.app(scope, receive, send)


def _route_mount_paths(parent: Any, app: MCPHTTPApp) -> None:
    """In the parent app's routes, put a route for the bare path of each ``Mount`` of ``app``."""
    routes = getattr(getattr(parent, "router", None), "routes", None)
    if not isinstance(routes, list):
        return
    for index, route in reversed(list(enumerate(routes))):
        if isinstance(route, Mount) and route.app is app and route.path:
            bare = [r for r in routes if isinstance(r, Route) and r.path == route.path]
            if not bare:
                routes.insert(index, Route(route.path, endpoint=_MountPath(route)))


def asgi_app(
    server: MCPServer | ServingApp | Server[Any],
    options: HTTPServerOptions | None = None,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    streamable: bool = True,
    authenticated: bool = False,
    **overrides: Any,
) -> MCPHTTPApp:
    """Build the ASGI app serving ``server`` over Streamable HTTP at ``path``, and legacy SSE.

    :param server: a :class:`toolkernel.MCPServer`, a kernel ``ServingApp``, or an ``mcp``
        SDK low-level ``Server``.
    :param options: :class:`HTTPServerOptions`; keyword ``overrides`` replace single fields.
    :param path: URL path of the Streamable HTTP endpoint.
    :param host: the address the app is reachable at; it decides the default allowed
        Host/Origin values (loopback: ``localhost``, ``127.0.0.1``, ``[::1]`` on any port).
    :param streamable: ``False`` serves only the legacy SSE endpoints.
    :param authenticated: every request passes authentication before it reaches this app
        (auth middleware in front of it). Off loopback, the app is built only when this is
        true, ``allowed_hosts`` is set, or ``insecure`` is on.
    :raises ConfigError: ``host`` is not loopback and none of those holds.
    """
    opts = options or HTTPServerOptions()
    if overrides:
        opts = HTTPServerOptions.model_validate({**dict(opts), **overrides})
    check_exposure(opts, host, authenticated=authenticated or opts.auth is not None)
    shared: SharedState | None = None
    if opts.shared_state is not None:
        server, shared = _share(server, opts.shared_state)
    protocol_server, serving = _resolve(server)
    if opts.stateless and hasattr(protocol_server, "notification_options"):
        # No session, no GET stream: list-changed notifications could never reach a client.
        protocol_server.notification_options = NotificationOptions()

    # The SDK's manager serves stateless 2025-era requests and every 2026-07-28 request, and
    # runs the server's lifespan; stateful 2025-era sessions are this plugin's own (_sessions).
    manager = StreamableHTTPSessionManager(
        protocol_server,
        json_response=opts.json_response,
        stateless=True,
        security_settings=_NO_SDK_CHECKS,
        max_request_body_size=opts.max_body_bytes,
    )
    sessions: SessionTable | None = None
    if not opts.stateless:
        event_store: EventStore | None = None
        if opts.resumable and not opts.json_response:  # a JSON body can never be resumed
            shared_events = (
                shared.event_store(
                    max_events=10_000,
                    max_bytes=opts.event_retention_bytes,
                    max_session_bytes=opts.session_event_bytes,
                    max_age_s=opts.event_retention_s,
                )
                if shared is not None and opts.event_store is None
                else None
            )
            event_store = (
                opts.event_store
                if opts.event_store is not None
                else shared_events
                if shared_events is not None
                else InMemoryEventStore(
                    max_bytes=opts.event_retention_bytes,
                    max_session_bytes=opts.session_event_bytes,
                    max_age_s=opts.event_retention_s,
                )
            )
        sessions = SessionTable(
            protocol_server,
            serving,
            json_response=opts.json_response,
            event_store=event_store,
            retry_ms=opts.retry_ms,
            idle_timeout=opts.session_idle_timeout,
            max_sessions=opts.max_sessions,
            max_sessions_per_client=opts.max_sessions_per_client,
            unused_timeout=opts.unused_session_timeout,
            max_streams_per_session=opts.max_streams_per_session,
            lifespan_state=lambda: manager._lifespan_state,
            replicas=Replicas(shared) if shared is not None and shared.shared else None,
        )

    app = MCPHTTPApp()
    routes: list[BaseRoute] = []
    if streamable:
        endpoint = _StreamableEndpoint(manager, sessions, app.state, opts.max_body_bytes)
        routes.append(Route(path, endpoint=endpoint))
    if opts.legacy_sse or not streamable:
        sse = SseServerTransport(
            opts.messages_path, security_settings=_NO_SDK_CHECKS, max_request_body_size=opts.max_body_bytes
        )
        legacy = _LegacySSEEndpoint(sse, protocol_server, serving, sessions, opts.max_sessions)
        if sessions is not None:
            sessions.held_elsewhere = legacy.count
        routes.append(Route(opts.sse_path, endpoint=legacy, methods=["GET"]))
        routes.append(Mount(opts.messages_path, app=sse.handle_post_message))

    if opts.auth is not None:
        routes = _auth_layer(opts.auth, serving).protect(routes, path=path, serving=serving)
    app.router.routes.extend(routes)
    app.endpoint_path = path if streamable else ""
    app.session_manager = manager
    app.sessions = sessions
    app.options = opts
    app.shared_state = shared
    app.serving = serving
    app.state.started = False
    app.router.lifespan_context = app.lifespan
    hosts, origins = _allowed(opts, host)
    if opts.cors:
        app.add_middleware(CORSMiddleware, **_cors(origins))
    app.add_middleware(_Guard, hosts=hosts, origins=origins, max_body_bytes=opts.max_body_bytes)
    app.add_middleware(_JSONRPCErrors)
    if streamable and opts.stateless and opts.auth is None:
        guard = _Guard(None, hosts=hosts, origins=origins, max_body_bytes=opts.max_body_bytes)
        app.door = functools.partial(
            FrontDoor, path=path, endpoint=endpoint, router=app.router, verdict=guard.verdict, cors=opts.cors
        )
        app.door_middleware = list(app.user_middleware)
    return app


def _auth_layer(auth: Any, serving: ServingApp | None) -> Any:
    """What guards the MCP routes: the object given, or toolkernel-oauth's layer for a provider name."""
    if not isinstance(auth, str):
        return auth
    try:
        from toolkernel_oauth.resource import ResourceServer
    except ImportError:
        from toolkernel.errors import ConfigError

        raise ConfigError(f"auth {auth!r} needs toolkernel-oauth: pip install toolkernel-oauth") from None
    if serving is None:
        from toolkernel.errors import ConfigError

        raise ConfigError("auth by provider name needs a toolkernel MCPServer (its kernel has the providers)")
    return ResourceServer.from_kernel(serving.kernel, auth)


def _share(target: Any, url: str) -> tuple[ServingApp, SharedState]:
    """``target`` as a serving app whose notification bus and tasks are on the store at ``url``.

    Runs before the SDK server is built: its ``subscriptions/listen`` handler takes the
    bus it finds then.
    """
    from toolkernel.server import MCPServer
    from toolkernel.shared_state import BroadcastSubscriptionBus

    app = target.kernel.serving_app(target) if isinstance(target, MCPServer) else target
    server = getattr(app, "server", None)
    if not isinstance(server, MCPServer) or not hasattr(app, "tasks"):
        raise ConfigError("shared_state needs a toolkernel MCPServer (its kernel has the backends)")
    if "protocol_server" in vars(app):
        raise ConfigError("shared_state must be set before the server's protocol handlers are built")
    state = server.kernel.shared_state(url)
    if state.shared:
        server.subscription_bus = BroadcastSubscriptionBus(state.broadcast)
        app.tasks.share(state.tasks, state.broadcast, state.queue)
    return app, state


def _resolve(target: Any) -> tuple[Server[Any], ServingApp | None]:
    """The SDK server to run, and the kernel's serving app when there is one (for session hooks)."""
    if isinstance(target, Server):
        return target, None
    if hasattr(target, "protocol_server") and hasattr(target, "run_session"):
        return target.protocol_server, target
    from toolkernel.server import MCPServer

    if isinstance(target, MCPServer):
        app = target.kernel.serving_app(target)
        return app.protocol_server, app
    raise TypeError(
        "asgi_app: expected a toolkernel.MCPServer, a ServingApp or an mcp Server, "
        f"got {type(target).__name__}"
    )


class _StreamableEndpoint:
    """ASGI endpoint handing requests on the MCP path to the session manager (or the direct path)."""

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        sessions: SessionTable | None,
        state: State,
        max_body_bytes: int,
    ) -> None:
        self.manager = manager
        self.sessions = sessions
        self.state = state
        self.max_body_bytes = max_body_bytes
        self.direct = sessions is None
        self.sse = not manager.json_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.direct and scope["method"] != "POST":
            # Stateless: every request stands alone, so there is no stream to GET or session to DELETE.
            await send_error(
                send,
                405,
                "Method Not Allowed: stateless server, POST only",
                INVALID_REQUEST,
                [(b"allow", b"POST")],
            )
            return
        if not self.state.started:
            await send_error(
                send,
                500,
                "toolkernel-http app is not started: run its lifespan "
                "(Starlette(..., lifespan=mcp_app.lifespan) when mounting it)",
                INTERNAL_ERROR,
            )
            return
        body = b""
        if scope["method"] == "POST":
            # Read once, here, whoever serves the request: the limit also holds for chunked bodies.
            read = await _fastpath.read_body(receive, self.max_body_bytes)
            if read is None:
                await send_too_large(send, self.max_body_bytes)
                return
            body = read
        version = _fastpath.takes(scope, self.sse) if self.direct else None
        if version is not None and (request := _fastpath.parse(body)) is not None:
            state = self.manager._lifespan_state
            await _fastpath.serve(self.manager.app, state, request, version, self.sse, scope, receive, send)
            return
        if self.sessions is not None and _handshake_era(scope):
            await self.sessions.handle(scope, receive, send, body)
            return
        if version is not None:
            # Stateless 2025 era, not a request the direct path serves: refuse what is not a
            # valid message here, as the SDK would take a request with a bad id for a notification.
            message, refused = screen(body)
            if message is None:
                await send_refusal(send, refused)
                return
        # A request carrying the 2026-07-28 envelope goes to the SDK, which refuses an unknown
        # version itself, with the request's id and the supported versions as data (SEP-2575).
        if not _enveloped(body) and (unsupported := _unsupported_version(scope)) is not None:
            supported = ", ".join(SUPPORTED_PROTOCOL_VERSIONS)
            await send_error(
                send,
                400,
                f"Bad Request: unsupported MCP-Protocol-Version {unsupported!r}; supported: {supported}",
            )
            return
        if scope["method"] == "POST":
            receive = _fastpath.replaying(body, receive)
            scope = _trimmed(scope)
        await self.manager.handle_request(scope, receive, send)


class _LegacySSEEndpoint:
    """ASGI endpoint for the legacy SSE stream; each stream is one session through the kernel's hooks."""

    def __init__(
        self,
        sse: SseServerTransport,
        server: Server[Any],
        serving: ServingApp | None,
        sessions: SessionTable | None,
        max_sessions: int | None,
    ) -> None:
        self.sse = sse
        self.server = server
        self.serving = serving
        self.sessions = sessions
        self.max_sessions = max_sessions
        self.open = 0

    def count(self) -> int:
        """Legacy streams open now: each is a session, counted against ``max_sessions``."""
        return self.open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stateful = len(self.sessions.sessions) if self.sessions is not None else 0
        if (
            self.max_sessions is not None
            and self.open + stateful >= self.max_sessions
            and not (self.sessions is not None and self.sessions.reclaim_unused())
        ):
            await send_error(send, 503, "Too many open sessions", INTERNAL_ERROR)
            return
        self.open += 1
        try:
            async with self.sse.connect_sse(scope, receive, send) as (read, write):
                if self.serving is not None:
                    await self.serving.run_session(read, write, transport="sse")
                else:
                    await self.server.run(read, write, self.server.create_initialization_options())
        finally:
            self.open -= 1


def _enveloped(body: bytes) -> bool:
    """Whether ``body`` is a request with the 2026-07-28 per-request ``_meta`` envelope."""
    return b'"io.modelcontextprotocol/protocolVersion"' in body


def _unsupported_version(scope: Scope) -> str | None:
    """The request's ``MCP-Protocol-Version`` when it names no version this server speaks."""
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version":
            version = value.decode("latin-1")
            return None if version in SUPPORTED_PROTOCOL_VERSIONS else version
    return None


_OWS = b" \t"


def _trimmed(scope: Scope) -> Scope:
    """``scope`` with leading and trailing whitespace cut from its header values.

    RFC 9110 §5.5: a field value's surrounding whitespace is not part of it. Some HTTP
    parsers (httptools) keep it, and the SDK would then see ``Mcp-Name: " x "`` disagree
    with the body's ``"x"``. Copies the scope only when a value needs trimming.
    """
    headers = scope["headers"]
    if not any(v[:1] in (b" ", b"\t") or v[-1:] in (b" ", b"\t") for _, v in headers):
        return scope
    return {**scope, "headers": [(k, v.strip(_OWS)) for k, v in headers]}


def _handshake_era(scope: Scope) -> bool:
    """Whether a request is for the 2025 (handshake) era: no ``MCP-Protocol-Version``, or one of it."""
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version":
            return value.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
    return True


def check_exposure(opts: HTTPServerOptions, host: str, *, authenticated: bool = False) -> None:
    """Refuse to serve off loopback unless something stops arbitrary web pages from driving the tools.

    Without ``allowed_hosts`` a wide bind has no Host/Origin check (any page can reach it by
    DNS rebinding, and CORS allows every origin); without authentication anyone who can
    reach the address can call the tools. ``authenticated`` is the seam for auth-enabled
    servers: an app behind auth middleware is safe to expose with the derived checks.
    """
    if host in LOOPBACK_HOSTS or authenticated or opts.insecure or not _is_address(host):
        return  # a name (tools.example.com) is the name clients use: the checks allow it alone
    if opts.allowed_hosts is not None and opts.dns_rebinding_protection:
        return
    raise ConfigError(
        f"toolkernel-http: refusing to serve on {host!r} with no allowed_hosts and no authentication: "
        "any web page could reach the tools. Set allowed_hosts to the names clients use "
        "([plugins.http] allowed_hosts in toolkernel.toml, TOOLKERNEL_HTTP_ALLOWED_HOSTS, or "
        "asgi_app(allowed_hosts=...)), put authentication in front, or pass --insecure "
        "(insecure=true) to serve anyway"
    )


def _is_address(host: str) -> bool:
    """Whether ``host`` is an IP address or a wildcard bind, rather than a name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host in _WILDCARD_HOSTS
    return True


def _allowed(opts: HTTPServerOptions, host: str) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """Host and Origin allow-lists (``None``: not checked) from the options and the bind host."""
    if not opts.dns_rebinding_protection:
        return None, None
    hosts = opts.allowed_hosts
    if hosts is None:
        if host in _WILDCARD_HOSTS:
            logger.warning(
                "bound to %r with no allowed_hosts: Host/Origin checks are off; set allowed_hosts "
                "to the names clients use to protect against DNS rebinding",
                host,
            )
            return None, opts.allowed_origins
        names = ["127.0.0.1", "localhost", "[::1]"]
        if host not in LOOPBACK_HOSTS:
            names.insert(0, f"[{host}]" if ":" in host else host)
        hosts = tuple(n for name in names for n in (name, f"{name}:*"))
    origins = opts.allowed_origins
    if origins is None:
        origins = tuple(f"{scheme}://{h}" for h in hosts for scheme in ("http", "https"))
    return hosts, origins


_CORS_REQUEST_HEADERS = (
    "accept",
    "authorization",
    "content-type",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
)
_CORS_EXPOSED_HEADERS = ("mcp-session-id", "mcp-protocol-version", "www-authenticate")


def _cors(origins: tuple[str, ...] | None) -> dict[str, Any]:
    """CORSMiddleware settings for ``origins`` (``x:*`` patterns as regexes; ``None``: any origin)."""
    settings: dict[str, Any] = {
        "allow_methods": ("GET", "POST", "DELETE"),
        "allow_headers": _CORS_REQUEST_HEADERS,
        "expose_headers": _CORS_EXPOSED_HEADERS,
    }
    if origins is None:
        return {**settings, "allow_origins": ("*",)}
    exact = tuple(o for o in origins if not o.endswith(":*"))
    ported = [re.escape(o[:-2]) + r":\d+" for o in origins if o.endswith(":*")]
    regex = "|".join(ported) if ported else None
    return {**settings, "allow_origins": exact, "allow_origin_regex": regex}


def _matches(value: str, allowed: Sequence[str]) -> bool:
    """Whether ``value`` is in ``allowed``, where ``x:*`` stands for ``x`` on any port."""
    value = value.lower()
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern.endswith(":*"):
            base = pattern[:-1]
            if value.startswith(base) and value[len(base) :].isdigit():
                return True
        elif value == pattern:
            return True
    return False


class _Guard:
    """Refuses what must never reach a session: foreign Host/Origin, non-JSON POSTs, oversized bodies."""

    def __init__(
        self,
        app: Any,
        *,
        hosts: tuple[str, ...] | None,
        origins: tuple[str, ...] | None,
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins
        self.max_body_bytes = max_body_bytes
        self._hosts_seen: dict[bytes, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused == 413:
            await send_too_large(send, self.max_body_bytes)
        elif refused is not None:
            await send_error(send, refused, _GUARD_REFUSALS[refused])
        else:
            await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> int | None:
        """The status refusing the HTTP request ``scope`` (421, 403, 415, 413), or ``None`` to let it in."""
        found: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            if key in GUARDED_HEADERS and key not in found:  # the first of each, as Headers.get
                found[key] = value
        return self.verdict(scope["method"], found)

    def verdict(self, method: str, found: dict[bytes, bytes]) -> int | None:
        """:meth:`refusal` for a request with the first value of each guarded header in ``found``."""
        if self.hosts is not None:
            host = found.get(b"host", b"")
            allowed = self._hosts_seen.get(host)
            if allowed is None:
                allowed = _matches(host.decode("latin-1"), self.hosts)
                if len(self._hosts_seen) >= _HOSTS_REMEMBERED:
                    self._hosts_seen.clear()
                self._hosts_seen[host] = allowed
            if not allowed:
                return 421
        origin = found.get(b"origin")
        if (
            origin is not None
            and self.origins is not None
            and not _matches(origin.decode("latin-1"), self.origins)
        ):
            return 403
        if method == "POST":
            content_type = found.get(b"content-type", b"").split(b";")[0].strip().lower()
            if content_type != b"application/json":
                return 415
            length = found.get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                return 413
        return None


_HOSTS_REMEMBERED = 64
"""Host values whose verdict a guard keeps (clients send one or two; a flood of others only refills it)."""


_GUARD_REFUSALS = {
    421: "Misdirected Request: Host header not allowed",
    403: "Forbidden: Origin not allowed",
    415: "Unsupported Media Type: Content-Type must be application/json",
}


class _JSONRPCErrors:
    """Rewrites the plain-text refusals of the SDK and Starlette into JSON-RPC error bodies, status kept."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        body = bytearray()

        async def rewrite(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                content_type = Headers(raw=message.get("headers", [])).get("content-type", "")
                if message["status"] >= 400 and not content_type.startswith("application/json"):
                    held = message
                    return
            elif held is not None and message["type"] == "http.response.body":
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                text = body.decode("utf-8", "replace").strip() or "Request refused"
                status = held["status"]
                extra = [(k, v) for k, v in held.get("headers", []) if k.lower() not in _REPLACED_HEADERS]
                await send_error(
                    send, status, text, INTERNAL_ERROR if status >= 500 else INVALID_REQUEST, extra
                )
                held = None
                return
            await send(message)

        await self.app(scope, receive, rewrite)


_REPLACED_HEADERS = (b"content-type", b"content-length")
