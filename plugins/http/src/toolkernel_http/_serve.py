"""The ``http`` and ``sse`` server transports: the ASGI app under uvicorn, on a socket bound up front."""

from __future__ import annotations

import contextlib
import gc
import signal
import socket
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from toolkernel.errors import ConfigError
from toolkernel_http._options import HTTPServerOptions

if TYPE_CHECKING:
    from toolkernel.transports import ServeOptions, ServingApp
    from toolkernel_http._asgi import MCPHTTPApp


class HTTPServerTransport:
    """Serves Streamable HTTP at ``options.path`` (plus legacy SSE unless ``legacy_sse`` is off)."""

    name = "http"
    streamable = True

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        try:
            self.http_options = HTTPServerOptions.model_validate(dict(options.extra))
        except ValidationError as exc:
            raise ConfigError(f"toolkernel-http: serve options (ServeOptions.extra): {exc}") from None
        self.port: int | None = None

    async def serve(self, app: ServingApp) -> None:
        """Bind, announce the URL on stderr, and serve until cancelled; then shut down gracefully."""
        import uvicorn

        from toolkernel_http._asgi import asgi_app

        self.http_options = _with_settings(app, self.options.extra)
        asgi = asgi_app(
            app, self.http_options, path=self.options.path, host=self.options.host, streamable=self.streamable
        )
        sock = _bind(self.options.host, self.options.port, reuse_port=self.options.reuse_port)
        self.port = sock.getsockname()[1]
        from toolkernel_http._connections import guarded_protocol

        opts = self.http_options
        config = uvicorn.Config(
            asgi,
            http=guarded_protocol(
                opts.header_timeout_s, opts.max_connections, opts.max_header_bytes, opts.max_headers
            ),
            log_level=self.http_options.log_level,
            # Below "info" no access line is shown; uvicorn would still format one per request.
            access_log=self.http_options.log_level.lower() in ("info", "debug", "trace"),
            lifespan="on",
            # uvicorn's ProxyHeadersMiddleware puts the client named by a trusted proxy in the scope.
            proxy_headers=True,
            forwarded_allow_ips=None if opts.forwarded_allow_ips is None else list(opts.forwarded_allow_ips),
            timeout_graceful_shutdown=int(self.http_options.shutdown_grace_s),
        )
        server = _uvicorn_server(config, asgi)
        finished = anyio.Event()

        async def run() -> None:
            # Shielded: on cancellation uvicorn is asked to stop and given time to drain,
            # rather than torn down mid-request with its lifespan (and sessions) left open.
            with anyio.CancelScope(shield=True):
                try:
                    await server.serve([sock])
                finally:
                    sock.close()
                    finished.set()

        print(f"toolkernel-http: serving {self._describe()} on {self.url()}", file=sys.stderr, flush=True)
        with _declared_async_library():
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                try:
                    await finished.wait()
                finally:
                    server.should_exit = True
        if server.stopped_by == signal.SIGINT:
            # uvicorn stops on Ctrl-C whatever the process inherited, then raises SIGINT again
            # once drained. Inherited as ignored (a background job of a shell script), that second
            # SIGINT does nothing and serving would end as if nothing had stopped it (exit 0).
            raise KeyboardInterrupt

    def check_workers(self, app: ServingApp) -> None:
        """Refuse to run as several processes where they could not behave as one server.

        Stateless mode shares nothing and needs nothing; stateful mode needs a shared
        store, or a session opened by one worker would be unknown to the others.
        """
        opts = _with_settings(app, self.options.extra)
        if opts.stateless:
            return
        hint = (
            "set TOOLKERNEL_HTTP_SHARED_STATE=redis://HOST:PORT/DB ([plugins.http] shared_state, "
            "pip install toolkernel-redis) or serve stateless (TOOLKERNEL_HTTP_STATELESS=true)"
        )
        if opts.shared_state is None:
            raise ConfigError(
                f"--workers {self.options.workers}: stateful sessions need a store the workers share; {hint}"
            )
        if not app.kernel.shared_state(opts.shared_state).shared:
            raise ConfigError(
                f"--workers {self.options.workers}: shared_state {opts.shared_state!r} is not shared "
                f"between processes; {hint}"
            )
        if not self.streamable or opts.legacy_sse:
            # Legacy SSE's stream and its POSTs must meet in one process: say so, keep serving it.
            print(
                "toolkernel-http: legacy SSE clients need sticky routing across workers",
                file=sys.stderr,
            )

    def url(self) -> str:
        """The endpoint URL clients use (the bound port once serving)."""
        host = self.options.host
        shown = f"[{host}]" if ":" in host else host
        path = self.options.path if self.streamable else self.http_options.sse_path
        return f"http://{shown}:{self.port if self.port is not None else self.options.port}{path}"

    def _describe(self) -> str:
        if not self.streamable:
            return f"legacy SSE ({self._auth().removeprefix(', ')})"
        mode = "stateless" if self.http_options.stateless else "stateful"
        body = "JSON" if self.http_options.json_response else "SSE"
        legacy = f", legacy SSE at {self.http_options.sse_path}" if self.http_options.legacy_sse else ""
        return f"Streamable HTTP ({mode}, {body} responses{legacy}{self._auth()})"

    def _auth(self) -> str:
        """How callers are authenticated, for the start-up line."""
        auth = self.http_options.auth
        if auth is None:
            return ", no authentication"
        name = auth if isinstance(auth, str) else type(auth).__name__
        return f", authentication on: {name} tokens required"


class LegacySSEServerTransport(HTTPServerTransport):
    """Serves only the 2024-11-05 SSE transport: GET ``sse_path`` and POST ``messages_path``."""

    name = "sse"
    streamable = False


def _uvicorn_server(config: Any, app: MCPHTTPApp) -> Any:
    """uvicorn's server, freezing what start-up built, ending the app's open GET streams as
    soon as it starts shutting down, and remembering which signal stopped it.

    ``toolkernel serve`` freezes its start-up objects before the transport runs, but the HTTP
    transport then imports uvicorn and most of the SDK's server and builds the app: without a
    second freeze once the lifespan has started, every full collection while serving walks
    them all again. uvicorn waits for open connections before it runs the lifespan's
    shutdown; a client holding a session's GET stream would otherwise make every stop take
    the whole grace period.
    """
    import uvicorn

    class Server(uvicorn.Server):
        stopped_by: int | None = None
        """The first signal that stopped the server (SIGINT, SIGTERM), if one did."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.stopped_by is None:
                self.stopped_by = sig
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            gc.freeze()

        async def shutdown(self, sockets: Any = None) -> None:
            app.end_streams()
            await super().shutdown(sockets)

    return Server(config)


@contextlib.contextmanager
def _declared_async_library() -> Iterator[None]:
    """Tell sniffio which library runs this thread's event loop, while the server runs.

    anyio asks sniffio which library it runs on for each cancel scope and event it makes,
    several per request; undeclared, sniffio finds out by looking up the current asyncio
    task every time, about a tenth of a stateless call's CPU. The process serving is the one
    running the loop, so it may declare it (what sniffio's ``thread_local`` is for).
    """
    try:
        import sniffio
    except ImportError:  # anyio then asks asyncio directly, which is cheap
        yield
        return
    previous = sniffio.thread_local.name
    sniffio.thread_local.name = sniffio.current_async_library()
    try:
        yield
    finally:
        sniffio.thread_local.name = previous


def _bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks one), with a clear error when taken.

    ``reuse_port``: one of several worker processes binding the same port (SO_REUSEPORT).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"toolkernel-http: cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _with_settings(app: ServingApp, extra: Mapping[str, Any]) -> HTTPServerOptions:
    """The kernel's ``http`` settings (config, env), overridden by ``ServeOptions.extra``."""
    kernel = app.kernel
    settings = kernel.settings("http") if "http" in kernel.settings_models else None
    return HTTPServerOptions.model_validate({**dict(settings or {}), **extra})
