"""One server's connection: a state machine run as a task, reconnecting by the policy.

States: ``pending`` → (``authenticating``, HTTP only) → ``connecting`` → ``connected`` →
``discovering`` → ``ready``; ``failed`` from any of them; ``closed`` once removed. A
lost connection goes ``failed`` and, while the restart policy allows, back to
``connecting`` after a backoff. Every wait is bounded: connecting and discovering by
the connect timeout, a request by its timeout (which progress can extend up to the
policy's hard cap), a liveness probe by the request timeout.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio

from toolkernel._logging import get_logger
from toolkernel.client.config import HTTPServerConfig, RestartPolicy, StdioServerConfig
from toolkernel.client.errors import (
    CONNECTION_CLOSED,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
    ProtocolError,
    RequestTimeout,
)
from toolkernel.errors import ConfigError, MCPClientError

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.client import Client
    from mcp.client.session import ClientRequestContext

    from toolkernel.client._client import MCPClient
    from toolkernel.transports import TransportStreams

ServerState = Literal[
    "pending", "authenticating", "connecting", "connected", "discovering", "ready", "failed", "closed"
]
T = TypeVar("T")
ProgressCallback = Callable[[float, float | None, str | None], Any]

_PAGE_CAP = 100
"""Pages of one list the client follows before it stops (a guard against a server that never ends)."""


class _LazyLogger:
    """structlog, loaded (and logging configured) on the first line logged, not at import."""

    def __getattr__(self, name: str) -> Any:
        return getattr(get_logger("toolkernel.client"), name)


_log: Any = _LazyLogger()


@dataclass(frozen=True)
class StateChange:
    """A server moved from ``old`` to ``new``; ``error`` says why when ``new`` is ``failed``."""

    server: str
    old: ServerState
    new: ServerState
    error: str | None = None
    attempt: int = 0


@dataclass(frozen=True)
class ServerSnapshot:
    """What :meth:`MCPClient.get_servers` reports for one server, as of the call."""

    name: str
    state: ServerState
    config: StdioServerConfig | HTTPServerConfig
    error: str | None = None
    attempt: int = 0
    protocol_version: str | None = None
    server_info: types.Implementation | None = None
    capabilities: types.ServerCapabilities | None = None
    instructions: str | None = None
    tools: list[types.Tool] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)
    resource_templates: list[types.ResourceTemplate] = field(default_factory=list)


class _WatchedWrite:
    """The transport's write stream, remembering the highest request id sent (to tell wrong ids)."""

    def __init__(self, inner: Any) -> None:
        from mcp_types import JSONRPCRequest

        self._inner = inner
        self._request_type = JSONRPCRequest
        self.highest_id = -1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any) -> None:
        message = item.message
        if type(message) is self._request_type and type(message.id) is int and message.id > self.highest_id:
            self.highest_id = message.id
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWrite:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _WatchedRead:
    """The transport's read stream, telling the connection when it ends or the server breaks the protocol.

    A message that is not JSON-RPC, an answer to a request never sent, or an error for no
    request at all ends the stream at once (``on_violation`` says why): the requests in
    flight then fail now, instead of each waiting out its timeout for an answer that
    cannot come.
    """

    def __init__(
        self, inner: Any, on_end: Callable[[], None], on_violation: Callable[[str], None], sent: _WatchedWrite
    ) -> None:
        from mcp_types import JSONRPCError, JSONRPCResponse

        self._inner = inner
        self._on_end = on_end
        self._on_violation = on_violation
        self._sent = sent
        self._answers = (JSONRPCResponse, JSONRPCError)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        problem = self._violation(item)
        if problem is not None:
            self._on_violation(problem)
            raise anyio.EndOfStream
        _complete_by_default(item)
        return item

    def _violation(self, item: Any) -> str | None:
        if isinstance(item, ValueError):  # a line or a body that is not a JSON-RPC message
            return f"the server sent a message that is not JSON-RPC: {_what_was_wrong(item)}"
        message: Any = getattr(item, "message", None)
        if type(message) not in self._answers:
            return None
        request_id = message.id
        if request_id is None:
            return f"the server refused a message: {message.error.message} (code {message.error.code})"
        if type(request_id) is not int or request_id > self._sent.highest_id:
            return f"the server answered request id {request_id!r}, which was never sent"
        return None

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._on_end()
        await self.aclose()


def _complete_by_default(item: Any) -> None:
    """A result without ``resultType`` is a complete one (2026-07-28, SEP-2322): say so for the SDK.

    The SDK validates 2026-era results against a schema that requires the field, so a
    server that leaves it out (as the specification allows) would fail every call.
    """
    from mcp_types import JSONRPCResponse

    message = getattr(item, "message", None)
    if isinstance(message, JSONRPCResponse) and "resultType" not in message.result:
        message.result["resultType"] = "complete"


@contextlib.asynccontextmanager
async def _watched(
    transport: contextlib.AbstractAsyncContextManager[TransportStreams],
    on_end: Callable[[], None],
    on_violation: Callable[[str], None],
) -> AsyncIterator[Any]:
    async with transport as (read, write):
        sent = _WatchedWrite(write)
        yield _WatchedRead(read, on_end, on_violation, sent), sent


class ServerConnection:
    """Runs, watches and re-runs one server's connection; requests go through :meth:`request`."""

    def __init__(self, name: str, config: StdioServerConfig | HTTPServerConfig, owner: MCPClient) -> None:
        self.name = name
        self.config = config
        self.owner = owner
        self.state: ServerState = "pending"
        self.error: str | None = None
        self.attempt = 0
        self.exhausted = False
        self.client: Client | None = None
        self.tools: list[types.Tool] = []
        self.prompts: list[types.Prompt] = []
        self.resources: list[types.Resource] = []
        self.resource_templates: list[types.ResourceTemplate] = []
        self.subscriptions: set[str] = set()
        self.log_level: types.LoggingLevel | None = None
        self.capabilities: types.ServerCapabilities | None = None
        self._closing = False
        self.progress_routes: dict[
            str | int, Callable[[float, float | None, str | None], Awaitable[None]]
        ] = {}
        self._changed = anyio.Event()
        self._lost = anyio.Event()
        self._lost_reason = "connection lost"
        self.violation: str | None = None
        """How the server broke the protocol, once it has (the connection is then lost)."""
        self._attempts = 0
        self._probe_now = anyio.Event()
        self._stale: set[str] = set()
        self._stale_event = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self.done = anyio.Event()
        self._http_kind: str | None = None
        self._relisten = anyio.Event()
        self._listened_with: frozenset[str] | None = None
        self._listen_changed = anyio.Event()
        self._auth: Any = None

    # -- timing -------------------------------------------------------------------------

    @property
    def timeout(self) -> float:
        """Default request timeout for this server."""
        return self.config.timeout or self.owner.config.timeout

    @property
    def connect_timeout(self) -> float:
        """Seconds to connect and discover."""
        return self.config.connect_timeout or self.owner.config.connect_timeout

    @property
    def restart_policy(self) -> RestartPolicy:
        if self.config.restart is not None:
            return self.config.restart
        policy = self.owner.config.policy
        return policy.stdio_restart if isinstance(self.config, StdioServerConfig) else policy.http_reconnect

    # -- state ----------------------------------------------------------------------------

    def _set_state(self, new: ServerState, error: str | None = None) -> None:
        old = self.state
        self.state = new
        self.error = error if new == "failed" else None
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        if old != new:
            level = "warning" if new == "failed" else "debug"
            getattr(_log, level)("server state", server=self.name, old=old, new=new, error=error)
            self.owner._post("state", StateChange(self.name, old, new, self.error, self.attempt))

    def snapshot(self) -> ServerSnapshot:
        client = self.client
        session = client.session if client is not None and client._session is not None else None
        return ServerSnapshot(
            name=self.name,
            state=self.state,
            config=self.config,
            error=self.error,
            attempt=self.attempt,
            protocol_version=session.protocol_version if session else None,
            server_info=session.server_info if session else None,
            capabilities=(self.capabilities or session.server_capabilities) if session else None,
            instructions=session.instructions if session else None,
            tools=list(self.tools),
            prompts=list(self.prompts),
            resources=list(self.resources),
            resource_templates=list(self.resource_templates),
        )

    async def wait_settled(self, limit: float) -> None:
        """Wait (at most ``limit`` seconds) until the server is ready, or failed with no retry left."""
        with anyio.move_on_after(limit):
            while not (self.state in ("ready", "closed") or (self.state == "failed" and self.exhausted)):
                await self._changed.wait()

    async def ready_client(self, wait: float) -> Client:
        """The live SDK client, waiting up to ``wait`` seconds for a reconnect in progress."""
        with anyio.move_on_after(wait):
            while True:
                if self.state == "ready" and self.client is not None:
                    return self.client
                if self.state == "closed" or (self.state == "failed" and self.exhausted):
                    break
                await self._changed.wait()
        detail = f": {self.error}" if self.error else ""
        if self.state == "closed":
            raise MCPClientError(self.name, "server was removed", CONNECTION_CLOSED)
        if self.exhausted:
            raise MCPClientError(self.name, f"server is unavailable (failed, no retry left){detail}")
        raise MCPClientError(
            self.name, f"server not ready after {wait:.1f}s (state {self.state}{detail})", REQUEST_TIMEOUT
        )

    def report_lost(self, reason: str) -> None:
        """A request saw the connection go: tear it down and reconnect."""
        if self.state == "ready" and not self._lost.is_set() and not self._closing:
            self._lost_reason = reason
            self._lost.set()
            # At once, not after the teardown: a retry must wait for the next connection.
            self._set_state("failed", reason)

    # -- the task ---------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, serve, reconnect by the policy, until cancelled or out of attempts."""
        try:
            with anyio.CancelScope() as self._scope:
                task_status.started()
                await self._loop()
        finally:
            self.client = None
            self.done.set()

    def cancel(self) -> None:
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()

    async def _loop(self) -> None:
        failures = 0
        while True:
            self.exhausted = False
            reached_ready = False
            try:
                reached_ready = await self._connect_and_serve()
                error = self._lost_reason
            except ConfigError as exc:
                self.exhausted = True
                self._set_state("failed", str(exc))
                return
            except Exception as exc:
                error = _describe(exc)
            failures = 1 if reached_ready else failures + 1
            policy = self.restart_policy
            self.attempt = failures
            if failures > policy.max_attempts:
                self.exhausted = True
                tried = f" (gave up after {policy.max_attempts} reconnects)" if policy.max_attempts else ""
                self._set_state("failed", f"{error}{tried}")
                return
            self._set_state("failed", error)
            await anyio.sleep(policy.backoff(failures))

    async def _connect_and_serve(self) -> bool:
        """One connection's life; returns whether it got to ready (then it was lost)."""
        self._lost = anyio.Event()
        self._lost_reason = "connection lost"
        owner = self.owner
        connected = False
        with anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout) as connect_scope:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if isinstance(self.config, HTTPServerConfig):
                        self._set_state("authenticating")
                    self._set_state("connecting")
                    client = await self._enter_client(stack)
                    self.client = client
                    stack.callback(self._forget_client)
                    connected = True
                    self._set_state("connected")
                    self._set_state("discovering")
                    await self._discover(client)
                    connect_scope.deadline = math.inf
                    self._set_state("ready")
                    owner._post("tools_changed", self.name)
                    await self._watch(client)
                    return True
            except BaseException as exc:
                if isinstance(exc, ConfigError) or isinstance(_leaf(exc), ConfigError):
                    raise _leaf(exc) from None
                leaf = _leaf(exc)
                if leaf is not exc and isinstance(leaf, Exception):
                    raise leaf from None
                raise
        phase = "discovering" if connected else "connecting"
        raise TimeoutError(f"{phase} timed out after {self.connect_timeout:.1f}s")

    def _forget_client(self) -> None:
        self.client = None

    async def _enter_client(self, stack: contextlib.AsyncExitStack) -> Client:
        """An initialized SDK client; for an HTTP server on ``auto``, over whichever transport answers.

        ``auto`` tries Streamable HTTP, then legacy SSE, each with the SDK's own protocol
        negotiation, and remembers the one that worked for the next reconnect.
        """
        config = self.config
        if isinstance(config, HTTPServerConfig) and config.transport == "auto":
            kinds = ["streamable", "sse"] if self._http_kind != "sse" else ["sse", "streamable"]
        elif isinstance(config, HTTPServerConfig):
            kinds = ["streamable" if config.transport == "streamable-http" else "sse"]
        else:
            kinds = ["stdio"]
        first_error: Exception | None = None
        for kind in kinds:
            inner = contextlib.AsyncExitStack()
            client = self._make_client(kind)
            try:
                await inner.enter_async_context(client)
            except Exception as exc:
                await inner.aclose()
                # The refused attempt's stream ended; that says nothing about the next one.
                self._lost = anyio.Event()
                leaf = _leaf(exc)
                if isinstance(leaf, ConfigError):
                    raise leaf from None
                first_error = first_error or (leaf if isinstance(leaf, Exception) else exc)
                continue
            self._http_kind = kind
            stack.push_async_callback(inner.aclose)
            return client
        assert first_error is not None
        raise first_error

    def _make_client(self, kind: str) -> Client:
        from mcp.client import Client
        from mcp.client.extension import advertise

        from toolkernel.client._skills import SKILLS_EXTENSION
        from toolkernel.client._tasks import extension as tasks_extension

        owner = self.owner
        return Client(
            _watched(self._open_transport(kind), self._stream_end_callback(), self._on_violation),
            mode=self.config.protocol,
            read_timeout_seconds=owner.config.policy.max_timeout + 5,
            sampling_callback=self._sampling if owner._sampling_handler else None,
            elicitation_callback=self._elicitation if owner._elicitation_handler else None,
            list_roots_callback=self._roots if owner._roots is not None else None,
            logging_callback=self._logging,
            message_handler=self._on_message,
            client_info=owner._client_info,
            extensions=[advertise(SKILLS_EXTENSION), tasks_extension()],
            cache=None,
        )

    def _open_transport(self, kind: str) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        from toolkernel.transports import ClientTransportOptions

        config = self.config
        kernel = self.owner.kernel
        if isinstance(config, StdioServerConfig):
            options = ClientTransportOptions(
                env=config.env,
                cwd=config.cwd,
                connect_timeout=self.connect_timeout,
                extra={
                    "exit_grace_s": config.exit_grace,
                    **({"stderr": "devnull"} if config.stderr == "devnull" else {}),
                },
            )
            return kernel.client_transport([config.command, *config.args], options, name="stdio")
        options = ClientTransportOptions(
            headers=config.headers,
            connect_timeout=self.connect_timeout,
            read_timeout=config.sse_read_timeout,
            extra={"transport": kind, "auth": self._http_auth()},
        )
        try:
            name = kernel.client_transports.for_target(config.url)
        except LookupError as exc:
            raise ConfigError(str(exc)) from None
        return kernel.client_transport(config.url, options, name=name)

    def _on_violation(self, problem: str) -> None:
        """The server broke the protocol: the connection is lost, and requests in flight say why."""
        self.violation = problem
        self._lost_reason = problem
        self.report_lost(problem)

    def _http_auth(self) -> Any:
        """The ``httpx2.Auth`` for this server: the one passed to the client, else one built once
        from the config's ``auth`` table by the plugin registered for its ``type``."""
        given = self.owner._auth.get(self.name)
        config = self.config
        if given is not None or not isinstance(config, HTTPServerConfig) or config.auth is None:
            return given
        if self._auth is None:
            kind = str(config.auth.get("type", ""))
            try:
                factory = self.owner.kernel.client_auth.get(kind)
            except LookupError as exc:
                hint = " (pip install toolkernel-oauth)" if kind == "oauth" else ""
                raise ConfigError(f"servers.{self.name}.auth: {exc}{hint}") from None
            try:
                self._auth = factory(config.url, dict(config.auth))
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"servers.{self.name}.auth: {exc}") from None
        return self._auth

    def _stream_end_callback(self) -> Callable[[], None]:
        """What the end of this attempt's stream does: nothing once a later attempt has started."""
        self._attempts += 1
        attempt = self._attempts

        def on_end() -> None:
            if attempt == self._attempts:
                self._on_stream_end()

        return on_end

    def _on_stream_end(self) -> None:
        self.report_lost("the server closed the connection")
        if self.state != "ready" and not self._closing:
            self._lost_reason = "the server closed the connection"
            self._lost.set()

    async def _discover(self, client: Client) -> None:
        caps = client.server_capabilities
        if self.config.protocol not in ("auto", "legacy"):
            # A pinned version skips the SDK's probe, which leaves the capabilities empty: ask.
            import mcp_types as types

            raw = await client.session.send_discover(self.config.protocol)
            caps = types.DiscoverResult.model_validate(raw, by_name=False).capabilities
        self.capabilities = caps
        self.tools = await paged(client.list_tools, "tools") if caps.tools is not None else []
        if caps.prompts is not None:
            self.prompts = await paged(client.list_prompts, "prompts")
        else:
            self.prompts = []
        if caps.resources is not None:
            self.resources = await paged(client.list_resources, "resources")
            self.resource_templates = await paged(client.list_resource_templates, "resource_templates")
        else:
            self.resources, self.resource_templates = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _deprecation())
            if self.modern:
                return
            if self.log_level is not None:
                await client.session.set_logging_level(self.log_level)
            for uri in sorted(self.subscriptions):
                await client.session.subscribe_resource(uri)

    async def _watch(self, client: Client) -> None:
        policy = self.owner.config.policy
        probing = policy.heartbeat_interval is not None and (
            isinstance(self.config, HTTPServerConfig) or policy.heartbeat_stdio
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._refresher, client)
            if probing:
                tg.start_soon(self._heartbeat, client)
            if self.modern:
                tg.start_soon(self._listener, client)
            await self._lost.wait()
            tg.cancel_scope.cancel()

    @property
    def modern(self) -> bool:
        """Whether the live connection speaks 2026-07-28 or later (changes come by subscriptions/listen)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        client = self.client
        return client is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def resubscribe(self) -> None:
        """Re-open the listen stream with the current subscriptions and wait (bounded) for its ack."""
        wanted = frozenset(self.subscriptions)
        self._relisten.set()
        with anyio.move_on_after(self.timeout):
            while self._listened_with != wanted:
                await self._listen_changed.wait()
        if self._listened_with != wanted:
            raise MCPClientError(self.name, "subscriptions/listen did not acknowledge the new subscriptions")

    async def _listener(self, client: Client) -> None:
        """Keep a ``subscriptions/listen`` stream open (2026-07-28): list changes and resource updates.

        Opened only for what the server announces (``listChanged`` flags, ``subscribe``
        with URIs to watch); with nothing to listen to, or a server that does not know
        the method, it waits until the subscriptions change. Re-opened when they do;
        its events are handled here, not in :meth:`_on_message` (the SDK passes only
        some of them on as notifications).
        """
        from mcp.shared.exceptions import MCPError
        from mcp_types import METHOD_NOT_FOUND

        caps = self.capabilities or client.server_capabilities
        while True:
            self._relisten = anyio.Event()
            uris = frozenset(self.subscriptions)
            wanted = _listen_flags(caps, uris)
            if not any(wanted.values()):
                self._mark_listening(uris)
                await self._relisten.wait()
                continue
            scope = anyio.CancelScope(deadline=anyio.current_time() + self.timeout)
            try:
                with scope:
                    async with client.listen(**wanted) as subscription:
                        scope.deadline = math.inf
                        self._mark_listening(uris)
                        async with anyio.create_task_group() as tg:

                            async def drain() -> None:
                                async for event in subscription:
                                    self._on_event(event)
                                tg.cancel_scope.cancel()

                            tg.start_soon(drain)
                            await self._relisten.wait()
                            tg.cancel_scope.cancel()
                if scope.cancelled_caught:
                    _log.warning("subscriptions/listen was not acknowledged in time", server=self.name)
            except MCPError as exc:
                self._mark_listening(None)
                if exc.code != METHOD_NOT_FOUND:
                    _log.warning("subscriptions/listen failed", server=self.name, error=_describe(exc))
                    with anyio.move_on_after(1.0):
                        await self._relisten.wait()
                    continue
                _log.info("the server does not support subscriptions/listen", server=self.name)
                await self._relisten.wait()
            except Exception as exc:
                _log.warning("subscriptions/listen failed", server=self.name, error=_describe(exc))
                self._mark_listening(None)
                with anyio.move_on_after(1.0):
                    await self._relisten.wait()

    def _on_event(self, event: Any) -> None:
        from mcp.client.subscriptions import (
            PromptsListChanged,
            ResourcesListChanged,
            ResourceUpdated,
            ToolsListChanged,
        )

        if isinstance(event, ResourceUpdated):
            self.owner._post("resource_updated", (self.name, event.uri))
        elif isinstance(event, ToolsListChanged):
            self._mark_stale("tools")
        elif isinstance(event, PromptsListChanged):
            self._mark_stale("prompts")
        elif isinstance(event, ResourcesListChanged):
            self._mark_stale("resources")

    def _mark_listening(self, uris: frozenset[str] | None) -> None:
        self._listened_with = uris
        changed, self._listen_changed = self._listen_changed, anyio.Event()
        changed.set()

    async def _heartbeat(self, client: Client) -> None:
        interval = self.owner.config.policy.heartbeat_interval or 10.0
        while True:
            with anyio.move_on_after(interval):
                await self._probe_now.wait()
            self._probe_now = anyio.Event()
            try:
                with anyio.fail_after(min(self.timeout, max(interval, 5.0))):
                    await self._probe(client)
            except Exception as exc:
                self.report_lost(f"liveness probe failed: {_describe(exc)}")
                return

    async def _probe(self, client: Client) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        if client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", _deprecation())
                await client.session.send_ping()
        else:
            await client.list_tools(cache_mode="bypass")

    async def _refresher(self, client: Client) -> None:
        while True:
            await self._stale_event.wait()
            self._stale_event = anyio.Event()
            stale, self._stale = self._stale, set()
            try:
                with anyio.fail_after(self.timeout):
                    if "tools" in stale:
                        self.tools = await paged(client.list_tools, "tools")
                        self.owner._post("tools_changed", self.name)
                        self.owner._post("tool_list_changed", self.name)
                    if "prompts" in stale:
                        self.prompts = await paged(client.list_prompts, "prompts")
                        self.owner._post("prompt_list_changed", self.name)
                    if "resources" in stale:
                        self.resources = await paged(client.list_resources, "resources")
                        self.resource_templates = await paged(
                            client.list_resource_templates, "resource_templates"
                        )
                        self.owner._post("resource_list_changed", self.name)
            except Exception as exc:
                _log.warning("refreshing lists failed", server=self.name, error=_describe(exc))

    # -- what the server sends --------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        import mcp_types as types

        if isinstance(message, Exception):
            _log.debug("transport reported an error", server=self.name, error=_describe(message))
            self._probe_now.set()
            return
        if isinstance(message, types.ProgressNotification):
            p = message.params
            route = self.progress_routes.get(p.progress_token)
            if route is not None:
                await route(p.progress, p.total, p.message)
            self.owner._post("progress", (self.name, p))
        elif self.modern:
            return  # changes arrive on the listen stream (_listener)
        elif isinstance(message, types.ResourceUpdatedNotification):
            self.owner._post("resource_updated", (self.name, str(message.params.uri)))
        elif isinstance(message, types.ToolListChangedNotification):
            self._mark_stale("tools")
        elif isinstance(message, types.PromptListChangedNotification):
            self._mark_stale("prompts")
        elif isinstance(message, types.ResourceListChangedNotification):
            self._mark_stale("resources")

    def _mark_stale(self, what: str) -> None:
        self._stale.add(what)
        self._stale_event.set()

    async def _logging(self, params: types.LoggingMessageNotificationParams) -> None:
        self.owner._post("log", (self.name, params))

    async def _sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        return await self.owner._answer(self.name, "sampling", params)

    async def _elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        return await self.owner._answer(self.name, "elicitation", params)

    async def _roots(self, context: ClientRequestContext) -> Any:
        import mcp_types as types

        return types.ListRootsResult(roots=list(self.owner._roots or []))

    # -- requests ---------------------------------------------------------------------------

    async def request(
        self,
        what: str,
        op: Callable[[Client, dict[str, Any]], Awaitable[T]],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        run_id: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> T:
        """Run ``op(client, meta)`` with a bounded wait; ``meta`` carries the progress token.

        The timeout restarts on each progress notification (when the policy says so), never
        past the policy's ``max_timeout``. Errors come out as :class:`MCPClientError`.
        """
        policy = self.owner.config.policy
        limit = timeout if timeout is not None else self.timeout
        cap = max(policy.max_timeout, limit)
        start = anyio.current_time()
        client = await self.ready_client(min(limit, self.connect_timeout))
        token = run_id if run_id is not None else uuid.uuid4().hex
        if token in self.progress_routes or str(token) in self.owner._runs:
            raise ConfigError(f"run id {token!r} is already in use by a request in flight")
        scope = anyio.CancelScope(deadline=anyio.current_time() + limit)
        cancelled_by_user = False

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            if policy.progress_extends_timeout:
                scope.deadline = min(anyio.current_time() + limit, start + cap)
            if on_progress is not None:
                try:
                    result = on_progress(progress, total, message)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    _log.exception("progress callback failed", server=self.name)

        def cancel() -> None:
            nonlocal cancelled_by_user
            cancelled_by_user = True
            scope.cancel()

        self.progress_routes[token] = progressed
        self.owner._runs[str(token)] = cancel
        try:
            with scope:
                return await op(client, {"progressToken": token})
        except MCPClientError:
            raise
        except ConfigError:
            raise
        except Exception as exc:
            raise self._translate(exc, what) from exc
        finally:
            self.progress_routes.pop(token, None)
            self.owner._runs.pop(str(token), None)
        if cancelled_by_user:
            raise MCPClientError(self.name, f"{what} was cancelled (run id {token})", REQUEST_CANCELLED)
        elapsed = anyio.current_time() - start
        raise RequestTimeout(self.name, f"{what} timed out after {elapsed:.1f}s", REQUEST_TIMEOUT)

    def _translate(self, exc: Exception, what: str) -> MCPClientError:
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        closed = isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream)
        if (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED) or closed:
            if self.violation is not None:
                return ProtocolError(self.name, f"{what}: {self.violation}", CONNECTION_CLOSED)
            self.report_lost("the connection closed during a request")
            return MCPClientError(self.name, f"{what}: connection closed", CONNECTION_CLOSED)
        if isinstance(exc, MCPError):
            return MCPClientError(self.name, f"{what}: {exc.message}", exc.code)
        if isinstance(exc, RuntimeError) and "async context manager" in str(exc):
            return MCPClientError(self.name, f"{what}: connection closed", CONNECTION_CLOSED)
        if isinstance(exc, ValidationError):
            return MCPClientError(self.name, f"{what}: the server sent an invalid result: {exc}")
        return MCPClientError(self.name, f"{what}: {_describe(exc)}")


async def paged(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    """Every item of a paginated list: ``fetch(cursor=...)`` again while a ``nextCursor`` comes back."""
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_PAGE_CAP):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            return items
        if cursor in seen:
            _log.warning("a list repeated its nextCursor; stopped there", list=attr, cursor=cursor)
            return items
        seen.add(cursor)
    _log.warning("a list had more pages than the client follows; stopped", list=attr, pages=_PAGE_CAP)
    return items


def _listen_flags(caps: types.ServerCapabilities, uris: frozenset[str]) -> dict[str, Any]:
    """The ``client.listen`` arguments for what ``caps`` announce (all false: nothing to listen to)."""
    resources = caps.resources
    return {
        "tools_list_changed": bool(caps.tools and caps.tools.list_changed),
        "prompts_list_changed": bool(caps.prompts and caps.prompts.list_changed),
        "resources_list_changed": bool(resources and resources.list_changed),
        "resource_subscriptions": sorted(uris) if resources and resources.subscribe else [],
    }


def supports_subscribe(caps: types.ServerCapabilities | None) -> bool:
    """Whether the server announced ``resources.subscribe``."""
    return bool(caps and caps.resources and caps.resources.subscribe)


def _deprecation() -> type[Warning]:
    """The SDK's warning for 2025-era features (subscribe, logging, ping, roots) we still speak."""
    from mcp.shared.exceptions import MCPDeprecationWarning

    return MCPDeprecationWarning


def _what_was_wrong(exc: ValueError) -> str:
    """The first problem of a refused message, with the start of what was sent when there is one."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)[:200] or type(exc).__name__
    first = exc.errors(include_url=False)[0]
    sent = first.get("input")
    shown = (
        f" in {bytes(sent[:80]) if isinstance(sent, bytes | bytearray) else str(sent)[:80]!r}" if sent else ""
    )
    return f"{first['msg']}{shown}"


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    from mcp.shared.exceptions import MCPError

    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return f"{exc.message} (code {exc.code})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
