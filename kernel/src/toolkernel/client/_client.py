"""MCPClient: one client for many MCP servers."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from toolkernel.client import _tasks as tasks
from toolkernel.client._connection import (
    ProgressCallback,
    ServerConnection,
    ServerSnapshot,
    StateChange,
    _deprecation,
    _log,
    paged,
    supports_subscribe,
)
from toolkernel.client._content import ToolOutput, map_result
from toolkernel.client._names import ToolRef, build_table
from toolkernel.client._skills import (
    SKILLS_EXTENSION,
    LoadedSkill,
    Skill,
    file_bytes,
    verify_file,
    verify_frontmatter,
    wire_types,
)
from toolkernel.client._tasks import call_as_task, server_runs_tool_tasks, task_support
from toolkernel.client.config import (
    HTTPServerConfig,
    MCPClientConfig,
    ServerConfig,
    StdioServerConfig,
    validate_config,
    validate_server,
)
from toolkernel.client.errors import CONNECTION_CLOSED, ToolError
from toolkernel.client.storage import MemoryServerStore, ServerStore, SqliteServerStore
from toolkernel.errors import ConfigError, MCPClientError

if TYPE_CHECKING:
    import mcp_types as types

    from toolkernel._kernel import Kernel

_LIVE: set[str] = set()
"""Store keys of the clients running in this process (a second one with the same key is an error)."""
_CLOSE_GRACE_S = 10.0
PROMPT_VERSION_META = "toolkernel/version"
"""The request ``_meta`` key that selects a prompt version on toolkernel servers."""
PROMPT_VERSIONS_META = "toolkernel/versions"
"""The listed prompt's ``_meta`` key with every version the server has."""

SamplingHandler = Callable[[str, "types.CreateMessageRequestParams"], Any]
"""``async (server, params) -> CreateMessageResult``."""
ElicitationHandler = Callable[[str, "types.ElicitRequestParams"], Any]
"""``async (server, params) -> ElicitResult``."""


class NamespacedTool:
    """A server's tool under its client-wide name."""

    __slots__ = ("name", "server", "tool")

    def __init__(self, name: str, server: str, tool: types.Tool) -> None:
        self.name = name
        self.server = server
        self.tool = tool

    @property
    def original_name(self) -> str:
        """The tool's name on its server."""
        return self.tool.name

    @property
    def description(self) -> str | None:
        return self.tool.description

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.tool.input_schema

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return self.tool.output_schema

    @property
    def annotations(self) -> types.ToolAnnotations | None:
        return self.tool.annotations

    @property
    def retryable(self) -> bool:
        """Annotated idempotent or read-only: safe to send again after a lost connection."""
        a = self.tool.annotations
        return a is not None and bool(a.idempotent_hint or a.read_only_hint)

    def __repr__(self) -> str:
        return f"NamespacedTool({self.name!r} -> {self.server}:{self.tool.name})"


class MCPClient:
    """Connects to many MCP servers at once and presents their tools, resources and prompts as one.

    Use it as an async context manager::

        async with MCPClient({"servers": {"docs": {"url": "http://localhost:8000/mcp"}}}) as client:
            tools = await client.list_tools()
            out = await client.call_tool("docs_search", {"query": "backoff"})

    :param config: an :class:`MCPClientConfig` or a mapping validated into one.
    :param kernel: the kernel whose client transports open connections (default: a
        kernel with entry-point plugins, so ``toolkernel-http`` supplies URLs).
    :param store: where servers added at run time are saved (default: SQLite at
        :func:`~toolkernel.client.storage.default_store_path`); ``persist=False`` keeps
        them in memory only.
    :param sampling_handler: ``async (server, CreateMessageRequestParams) -> CreateMessageResult``;
        advertised to servers when set before they connect.
    :param elicitation_handler: ``async (server, ElicitRequestParams) -> ElicitResult``.
    :param roots: the roots offered to servers (``None``: no roots capability).
    :param auth: URL server name → an ``httpx2.Auth`` (an OAuth provider, a token refresher),
        used during the ``authenticating`` step and every request after; never stored.
    """

    def __init__(
        self,
        config: MCPClientConfig | Mapping[str, Any] | None = None,
        *,
        kernel: Kernel | None = None,
        store: ServerStore | None = None,
        persist: bool = True,
        sampling_handler: SamplingHandler | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        roots: list[types.Root] | None = None,
        auth: Mapping[str, Any] | None = None,
        client_name: str = "toolkernel-mcp-client",
    ) -> None:
        self.config = validate_config(config if config is not None else {})
        self._kernel = kernel
        if store is not None and not isinstance(store, ServerStore):
            raise ConfigError("store must implement ServerStore (load, save, delete, close)")
        self._store: ServerStore = store or (SqliteServerStore() if persist else MemoryServerStore())
        self._sampling_handler = sampling_handler
        self._elicitation_handler = elicitation_handler
        self._roots = list(roots) if roots is not None else None
        self._auth = dict(auth or {})
        self._client_name = client_name
        self._connections: dict[str, ServerConnection] = {}
        self._listeners: dict[str, list[Callable[..., Any]]] = {}
        self._runs: dict[str, Callable[[], None]] = {}
        self._table: dict[str, ToolRef] | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._events: MemoryObjectSendStream[tuple[str, Any]] | None = None
        self._key = self._store_key()

    # -- identity -------------------------------------------------------------------------

    def _store_key(self) -> str:
        if self.config.id is not None:
            return self.config.id
        dump = self.config.model_dump(mode="json")
        return "config-" + hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def id(self) -> str:
        """The client's id, or one derived from its config (the key of its stored registry)."""
        return self._key

    @property
    def kernel(self) -> Kernel:
        if self._kernel is None:
            from toolkernel._kernel import Kernel

            self._kernel = Kernel()
        return self._kernel

    @property
    def _client_info(self) -> types.Implementation:
        from importlib.metadata import PackageNotFoundError, version

        import mcp_types as types

        try:
            ver = version("toolkernel")
        except PackageNotFoundError:
            ver = "0"
        return types.Implementation(name=self._client_name, version=ver)

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> MCPClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Restore saved servers, connect to every server, and wait until each is ready or failed.

        Enter and leave the client in one task (``async with`` does). Raises
        :class:`ConfigError` when another live client has the same id (or, without an id,
        the same config), and with ``throw_on_load_error`` the first server's failure.
        """
        if self._stack is not None:
            raise ConfigError("this MCPClient is already started")
        if self._key in _LIVE:
            raise ConfigError(
                "another MCPClient with "
                + (f"id {self._key!r}" if self.config.id else "the same configuration and no id")
                + " is already running in this process; reuse it, close it first, or pass a unique `id`"
            )
        _LIVE.add(self._key)
        stack = contextlib.AsyncExitStack()
        try:
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            send, receive = anyio.create_memory_object_stream[tuple[str, Any]](math.inf)
            self._events = send
            self._tg.start_soon(self._dispatch, receive)
            self._stack = stack
            servers: dict[str, ServerConfig] = {}
            for name, raw in (await self._store.load(self._key)).items():
                try:
                    servers[name] = validate_server(name, raw)
                except ConfigError as exc:
                    _log.warning("a saved server was left out", server=name, error=str(exc))
            servers.update(self.config.servers)
            for name, server_config in servers.items():
                await self._launch(name, server_config)
            await self._settle(list(self._connections.values()))
            if self.config.throw_on_load_error:
                self._raise_load_errors()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Disconnect every server (bounded), stop background work, release the store."""
        stack, self._stack = self._stack, None
        if stack is None:
            return
        try:
            for conn in self._connections.values():
                conn.cancel()
            with anyio.move_on_after(_CLOSE_GRACE_S, shield=True):
                for conn in list(self._connections.values()):
                    await conn.done.wait()
            if self._events is not None:
                self._events.close()
            if self._tg is not None:
                # Shield the group's own scope (a new scope here would break LIFO exit).
                self._tg.cancel_scope.cancel()
                self._tg.cancel_scope.shield = True
            await stack.aclose()
            with anyio.CancelScope(shield=True):
                await self._store.close()
        finally:
            self._tg = None
            self._events = None
            _LIVE.discard(self._key)

    async def _launch(self, name: str, config: StdioServerConfig | HTTPServerConfig) -> ServerConnection:
        if self._tg is None:
            raise ConfigError("start the MCPClient first (async with MCPClient(...) as client)")
        conn = ServerConnection(name, config, self)
        self._connections[name] = conn
        self._table = None
        await self._tg.start(conn.run)
        return conn

    async def _settle(self, conns: list[ServerConnection]) -> None:
        async with anyio.create_task_group() as tg:
            for conn in conns:
                tg.start_soon(conn.wait_settled, conn.connect_timeout + 1.0)

    def _raise_load_errors(self) -> None:
        for conn in self._connections.values():
            if conn.state != "ready":
                raise MCPClientError(conn.name, f"could not be loaded: {conn.error or conn.state}")

    # -- servers at run time -------------------------------------------------------------------

    async def add_server(
        self,
        name: str,
        config: ServerConfig | Mapping[str, Any],
        *,
        persist: bool = True,
        wait: bool = True,
    ) -> ServerSnapshot:
        """Connect to another server now; saved to the store unless ``persist=False``.

        With ``wait`` (default) returns once the server is ready or failed (bounded by its
        connect timeout); ``throw_on_load_error`` then raises on failure.
        """
        server_config = validate_server(name, config)
        if self._tg is None:
            raise ConfigError("start the MCPClient first (async with MCPClient(...) as client)")
        if name in self._connections:
            raise ConfigError(f"servers.{name}: a server with this name is already registered")
        if persist:
            await self._store.save(self._key, name, server_config.model_dump(mode="json", exclude_unset=True))
        conn = await self._launch(name, server_config)
        if wait:
            await conn.wait_settled(conn.connect_timeout + 1.0)
            if self.config.throw_on_load_error and conn.state != "ready":
                raise MCPClientError(name, f"could not be loaded: {conn.error or conn.state}")
        return conn.snapshot()

    async def remove_server(self, name: str) -> None:
        """Disconnect server ``name`` and forget it (in the store too)."""
        conn = self._connections.pop(name, None)
        if conn is None:
            raise ConfigError(
                f"servers.{name}: no such server; known: {', '.join(self._connections) or 'none'}"
            )
        self._table = None
        conn.cancel()
        with anyio.move_on_after(_CLOSE_GRACE_S, shield=True):
            await conn.done.wait()
        conn._set_state("closed")
        await self._store.delete(self._key, name)

    async def reconnect(self, name: str) -> ServerSnapshot:
        """Drop server ``name``'s connection and connect again, with a fresh restart budget."""
        conn = self._conn(name)
        conn.cancel()
        with anyio.move_on_after(_CLOSE_GRACE_S, shield=True):
            await conn.done.wait()
        fresh = await self._launch(name, conn.config)
        await fresh.wait_settled(fresh.connect_timeout + 1.0)
        return fresh.snapshot()

    def get_servers(self) -> dict[str, ServerSnapshot]:
        """Each server's state, capabilities, instructions, tools, prompts and resources, now."""
        return {name: conn.snapshot() for name, conn in self._connections.items()}

    async def wait_ready(
        self,
        name: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
    ) -> None:
        """Wait until server ``name`` (default: every server) is ready; MCPClientError if not in time."""
        conns = [self._conn(name)] if name is not None else list(self._connections.values())
        for conn in conns:
            await conn.ready_client(timeout if timeout is not None else conn.connect_timeout)

    def _conn(self, name: str) -> ServerConnection:
        try:
            return self._connections[name]
        except KeyError:
            known = ", ".join(sorted(self._connections)) or "none"
            raise MCPClientError(name, f"no such server; known: {known}") from None

    # -- tools --------------------------------------------------------------------------------

    def _tool_table(self) -> dict[str, ToolRef]:
        if self._table is None:
            pairs = [(c.name, t.name) for c in self._connections.values() for t in c.tools]
            self._table = build_table(
                pairs,
                prefix_with_server=self.config.prefix_tool_name_with_server_name,
                extra_prefix=self.config.additional_tool_name_prefix,
            )
        return self._table

    async def _loaded(self) -> list[ServerConnection]:
        conns = list(self._connections.values())
        await self._settle([c for c in conns if c.state not in ("ready", "failed")])
        if self.config.throw_on_load_error:
            self._raise_load_errors()
        for conn in conns:
            if conn.state != "ready":
                _log.warning(
                    "server left out: not ready", server=conn.name, state=conn.state, error=conn.error
                )
        return [c for c in conns if c.state == "ready"]

    async def list_tools(self) -> list[NamespacedTool]:
        """Every ready server's tools under client-wide names (``server_tool``, ≤ 64 characters)."""
        await self._loaded()
        return [tool for tools in self._toolsets().values() for tool in tools]

    async def list_toolsets(self) -> dict[str, list[NamespacedTool]]:
        """The same tools grouped by server."""
        await self._loaded()
        return self._toolsets()

    def _toolsets(self) -> dict[str, list[NamespacedTool]]:
        by_pair = {(ref.server, ref.tool): name for name, ref in self._tool_table().items()}
        out: dict[str, list[NamespacedTool]] = {}
        for conn in self._connections.values():
            if conn.state != "ready":
                continue
            out[conn.name] = [
                NamespacedTool(by_pair[(conn.name, t.name)], conn.name, t)
                for t in conn.tools
                if (conn.name, t.name) in by_pair
            ]
        return out

    def resolve_tool(self, name: str) -> ToolRef:
        """The server and tool a client-wide tool name leads to; :class:`ToolError` if none."""
        ref = self._tool_table().get(name)
        if ref is None:
            known = ", ".join(sorted(self._tool_table())[:20]) or "none"
            raise ToolError(self._key, f"unknown tool {name!r}; known: {known}", tool=name)
        return ref

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        run_id: str | None = None,
        on_progress: ProgressCallback | None = None,
        raise_on_error: bool = True,
        task: bool | None = None,
    ) -> ToolOutput:
        """Call a tool by its client-wide name.

        :param timeout: seconds (default: the server's); progress notifications restart it
            up to the policy's ``max_timeout``.
        :param run_id: becomes the request's progress token, and :meth:`cancel` takes it.
        :param on_progress: ``(progress, total, message)`` for this call's progress.
        :param raise_on_error: a result the tool marks as an error raises :class:`ToolError`.
        :param task: on 2025-11-25 servers, run the tool as a task: ``None`` (default) when
            the tool requires it, ``True`` also when it allows it. On 2026-07-28 servers the
            server decides (the client offers the tasks extension). Either way the call waits
            for the task, reporting each status change as progress; cancelling the call or
            timing out cancels the task on the server.
        Tools annotated idempotent or read-only are sent again after a lost connection, up
        to the policy's ``tool_retries``; others fail with the connection.
        """
        if name not in self._tool_table():
            await self._loaded()
        ref = self.resolve_tool(name)
        return await self.call_server_tool(
            ref.server,
            ref.tool,
            arguments,
            timeout=timeout,
            run_id=run_id,
            on_progress=on_progress,
            raise_on_error=raise_on_error,
            task=task,
        )

    async def call_server_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        run_id: str | None = None,
        on_progress: ProgressCallback | None = None,
        raise_on_error: bool = True,
        task: bool | None = None,
    ) -> ToolOutput:
        """Call ``tool`` on ``server`` by its own name (see :meth:`call_tool`)."""
        conn = self._conn(server)
        known = next((t for t in conn.tools if t.name == tool), None)
        args = dict(arguments or {})
        support = task_support(known)
        if conn.modern:
            # 2026-07-28: the server decides; a task it creates is followed by the tasks extension.
            op = self._modern_op(conn, tool, args)
            retryable = known is not None and NamespacedTool("", server, known).retryable
        elif support == "required" or (task and support == "optional"):
            if task is False:
                raise ToolError(
                    server, f"tool {tool!r} runs only as a task (taskSupport: required)", tool=tool
                )
            op = self._task_op(conn, tool, args)
            retryable = False
        else:

            async def op(client: Any, meta: dict[str, Any]) -> Any:
                return await client.call_tool(tool, args, meta=meta)

            retryable = known is not None and NamespacedTool("", server, known).retryable
        tries = 1 + (self.config.policy.tool_retries if retryable else 0)
        for attempt in range(tries):
            try:
                result = await conn.request(
                    f"tools/call {tool}",
                    op,
                    timeout=timeout,
                    run_id=run_id,
                    on_progress=on_progress,
                )
                break
            except MCPClientError as exc:
                if exc.code != CONNECTION_CLOSED or attempt + 1 >= tries:
                    raise
                _log.info("retrying an idempotent tool after a lost connection", server=server, tool=tool)
        output = map_result(server, tool, result, dict(self.config.output_handling))
        if output.is_error and raise_on_error:
            raise ToolError(
                server, f"tool {tool!r} failed: {output.text or 'no details'}", tool=tool, output=output
            )
        return output

    @staticmethod
    def _status_reporter(conn: ServerConnection, token: str | int) -> Callable[[Any], Any]:
        """Each task status as progress of the call with progress token ``token``."""
        route = conn.progress_routes.get(token)
        steps = 0

        async def on_status(state: Any) -> None:
            nonlocal steps
            steps += 1
            detail = f": {state.status_message}" if state.status_message else ""
            _log.debug("task status", server=conn.name, task=state.task_id, status=state.status)
            if route is not None:
                await route(steps, None, f"task {state.task_id} {state.status}{detail}")

        return on_status

    @classmethod
    def _modern_op(cls, conn: ServerConnection, tool: str, args: dict[str, Any]) -> Any:
        """A 2026-07-28 ``tools/call``; a task the server makes of it reports statuses as progress."""

        async def op(client: Any, meta: dict[str, Any]) -> Any:
            reset = tasks.status_callback.set(cls._status_reporter(conn, meta["progressToken"]))
            try:
                return await client.call_tool(tool, args, meta=meta)
            finally:
                tasks.status_callback.reset(reset)

        return op

    @classmethod
    def _task_op(cls, conn: ServerConnection, tool: str, args: dict[str, Any]) -> Any:
        """The request that runs ``tool`` as a task, its status changes reported as the call's progress."""
        if not server_runs_tool_tasks(conn.capabilities):
            raise ToolError(
                conn.name,
                f"tool {tool!r} must run as a task, but the server does not offer tool tasks "
                "(capabilities.tasks.requests.tools.call)",
                tool=tool,
            )

        async def op(client: Any, meta: dict[str, Any]) -> Any:
            on_status = cls._status_reporter(conn, meta["progressToken"])
            return await call_as_task(client, tool, args, meta=meta, on_status=on_status)

        return op

    async def get_task(self, server: str, task_id: str) -> Any:
        """Poll a task on ``server`` (``tasks/get``): ``task_id``, ``status``, ``status_message``.

        On 2026-07-28 the answer also inlines the ``result``, ``error`` or ``input_requests``.
        """
        return await self._conn(server).request(
            f"tasks/get {task_id}", lambda client, meta: tasks.get(client, task_id)
        )

    async def cancel_task(self, server: str, task_id: str) -> Any:
        """Ask ``server`` to cancel a task (``tasks/cancel``); 2025-11-25 answers with its state."""
        return await self._conn(server).request(
            f"tasks/cancel {task_id}", lambda client, meta: tasks.cancel(client, task_id)
        )

    def cancel(self, run_id: str) -> bool:
        """Cancel the in-flight request started with ``run_id``; whether there was one.

        A tool running as a task is cancelled on the server too (``tasks/cancel``).
        """
        cancel = self._runs.get(run_id)
        if cancel is None:
            return False
        cancel()
        return True

    # -- resources ------------------------------------------------------------------------------

    async def list_resources(self) -> dict[str, list[types.Resource]]:
        """Each ready server's resources (as last listed; refreshed on list_changed)."""
        return {c.name: list(c.resources) for c in await self._loaded()}

    async def list_resource_templates(self) -> dict[str, list[types.ResourceTemplate]]:
        """Each ready server's resource templates."""
        return {c.name: list(c.resource_templates) for c in await self._loaded()}

    async def read_resource(
        self,
        server: str,
        uri: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        run_id: str | None = None,
    ) -> types.ReadResourceResult:
        """Read ``uri`` (a resource or a filled-in template) from ``server``."""
        return await self._conn(server).request(
            f"resources/read {uri}",
            lambda client, meta: client.read_resource(uri, meta=meta),  # type: ignore[arg-type]
            timeout=timeout,
            run_id=run_id,
        )

    async def subscribe_resource(self, server: str, uri: str) -> None:
        """Get ``on_resource_updated`` events for ``uri``; renewed after every reconnect.

        2025-era servers get ``resources/subscribe``; 2026-07-28 servers a re-opened
        ``subscriptions/listen`` stream that names the URI.
        """
        conn = self._conn(server)
        await conn.ready_client(conn.connect_timeout)
        if not supports_subscribe(conn.capabilities):
            raise MCPClientError(
                server, "the server does not offer resource subscriptions (resources.subscribe)"
            )
        if conn.modern:
            conn.subscriptions.add(uri)
            await conn.resubscribe()
            return

        async def op(client: Any, meta: dict[str, Any]) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", _deprecation())
                return await client.session.subscribe_resource(uri)

        await conn.request(f"resources/subscribe {uri}", op)
        conn.subscriptions.add(uri)

    async def unsubscribe_resource(self, server: str, uri: str) -> None:
        """Stop the updates for ``uri``."""
        conn = self._conn(server)
        conn.subscriptions.discard(uri)
        if conn.modern:
            await conn.resubscribe()
            return

        async def op(client: Any, meta: dict[str, Any]) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", _deprecation())
                return await client.session.unsubscribe_resource(uri)

        await conn.request(f"resources/unsubscribe {uri}", op)

    # -- prompts ----------------------------------------------------------------------------------

    async def list_prompts(self) -> dict[str, list[types.Prompt]]:
        """Each ready server's prompts."""
        return {c.name: list(c.prompts) for c in await self._loaded()}

    async def get_prompt(
        self,
        server: str,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        version: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
    ) -> types.GetPromptResult:
        """Prompt ``name`` from ``server``, filled in with ``arguments``.

        :param version: one of the prompt's versions (:meth:`prompt_versions`); the server's
            default when ``None``. Sent as ``_meta["toolkernel/version"]``, which toolkernel
            servers honour.
        """
        args = dict(arguments) if arguments is not None else None

        async def op(client: Any, meta: dict[str, Any]) -> Any:
            if version is not None:
                meta = {**meta, PROMPT_VERSION_META: version}
            return await client.get_prompt(name, args, meta=meta)

        return await self._conn(server).request(f"prompts/get {name}", op, timeout=timeout)

    async def prompt_versions(self, server: str, name: str) -> list[str]:
        """The versions ``server`` lists for prompt ``name`` (``_meta["toolkernel/versions"]``); [] if one."""
        prompts = (await self.list_prompts()).get(server, [])
        listed = next((p for p in prompts if p.name == name), None)
        if listed is None:
            raise MCPClientError(server, f"no prompt named {name!r}")
        versions = (listed.meta or {}).get(PROMPT_VERSIONS_META) or []
        return [str(v) for v in versions]

    async def complete(
        self,
        server: str,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: Mapping[str, str],
        context_arguments: Mapping[str, str] | None = None,
    ) -> types.CompleteResult:
        """Completions for a prompt or resource-template argument."""
        ctx = dict(context_arguments) if context_arguments is not None else None
        return await self._conn(server).request(
            "completion/complete",
            lambda client, meta: client.complete(ref, dict(argument), ctx),
        )

    # -- skills (SEP-2640) ------------------------------------------------------------------------

    async def list_skills(self, server: str) -> list[Skill]:
        """The skills ``server`` offers (every page); nothing of them is read yet."""
        conn = self._conn(server)
        await conn.ready_client(conn.connect_timeout)
        extensions = (conn.capabilities.extensions if conn.capabilities else None) or {}
        if SKILLS_EXTENSION not in extensions:
            raise MCPClientError(server, f"the server does not offer skills ({SKILLS_EXTENSION})")
        request, result = wire_types()

        async def fetch(cursor: str | None = None) -> Any:
            async def op(client: Any, meta: dict[str, Any]) -> Any:
                return await client.session.send_request(request(params={"cursor": cursor}), result)

            return await conn.request("skills/list", op)

        return await paged(fetch, "skills")

    async def load_skill(self, server: str, skill: Skill | str) -> LoadedSkill:
        """Read a skill's files, verified: sizes and digests as listed, ``SKILL.md`` frontmatter as listed.

        ``skill`` is an entry from :meth:`list_skills` or its ``SKILL.md`` URI. Files are
        read only now, ``SKILL.md`` first; the first check that fails raises
        :class:`MCPClientError` and nothing more is read.
        """
        if isinstance(skill, str):
            entry = next((s for s in await self.list_skills(server) if s.uri == skill), None)
            if entry is None:
                raise MCPClientError(server, f"no skill with the URI {skill!r}")
            skill = entry
        listed = {f.uri: f for f in skill.resources} if isinstance(skill.resources, list) else {}
        order = [skill.uri, *(uri for uri in listed if uri != skill.uri)]
        files: dict[str, bytes] = {}
        for uri in order:
            try:
                data = file_bytes(await self.read_resource(server, uri), uri)
            except ValueError as exc:
                raise MCPClientError(server, str(exc)) from None
            if uri in listed:
                verify_file(server, listed[uri], data)
            if uri == skill.uri:
                verify_frontmatter(server, skill, data.decode("utf-8", errors="replace"))
            files[uri] = data
        return LoadedSkill(server, skill, files)

    # -- logging and roots ------------------------------------------------------------------------

    async def set_logging_level(self, server: str, level: types.LoggingLevel) -> None:
        """Ask ``server`` for log messages at ``level`` and above (kept across reconnects)."""
        conn = self._conn(server)

        async def op(client: Any, meta: dict[str, Any]) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", _deprecation())
                return await client.session.set_logging_level(level)

        await conn.request("logging/setLevel", op)
        conn.log_level = level

    async def set_roots(self, roots: list[types.Root]) -> None:
        """Replace the roots offered to servers and tell connected ones that they changed."""
        self._roots = list(roots)
        for conn in self._connections.values():
            client = conn.client
            if conn.state == "ready" and client is not None:
                with warnings.catch_warnings(), contextlib.suppress(Exception):
                    warnings.simplefilter("ignore", _deprecation())
                    with anyio.fail_after(conn.timeout):
                        await client.session.send_roots_list_changed()

    def set_sampling_handler(self, handler: SamplingHandler | None) -> None:
        """Answer servers' sampling requests with ``handler`` (advertised on the next connect if new)."""
        self._sampling_handler = handler

    def set_elicitation_handler(self, handler: ElicitationHandler | None) -> None:
        """Answer servers' elicitation requests with ``handler`` (advertised on the next connect if new)."""
        self._elicitation_handler = handler

    async def _answer(self, server: str, kind: str, params: Any) -> Any:
        import mcp_types as types

        handler = self._sampling_handler if kind == "sampling" else self._elicitation_handler
        if handler is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message=f"{kind} is not supported by this client"
            )
        try:
            result = handler(server, params)
            if inspect.isawaitable(result):
                result = await result
            return result
        except Exception as exc:
            _log.exception(f"{kind} handler failed", server=server)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"{kind} handler failed: {exc}")

    # -- events -------------------------------------------------------------------------------------

    def _on(self, kind: str, callback: Callable[..., Any]) -> Callable[[], None]:
        self._listeners.setdefault(kind, []).append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners[kind].remove(callback)

        return unsubscribe

    def on_state_change(self, callback: Callable[[StateChange], Any]) -> Callable[[], None]:
        """``callback(StateChange)`` on every server state change; returns an unsubscribe function."""
        return self._on("state", callback)

    def on_resource_updated(self, callback: Callable[[str, str], Any]) -> Callable[[], None]:
        """``callback(server, uri)`` when a subscribed resource changed."""
        return self._on("resource_updated", callback)

    def on_resource_list_changed(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """``callback(server)`` after a server's resource list changed and was re-listed."""
        return self._on("resource_list_changed", callback)

    def on_prompt_list_changed(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """``callback(server)`` after a server's prompt list changed and was re-listed."""
        return self._on("prompt_list_changed", callback)

    def on_tool_list_changed(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """``callback(server)`` after a server's tool list changed and was re-listed."""
        return self._on("tool_list_changed", callback)

    def on_log(
        self, callback: Callable[[str, types.LoggingMessageNotificationParams], Any]
    ) -> Callable[[], None]:
        """``callback(server, params)`` for each log message a server sends."""
        return self._on("log", callback)

    def on_progress(
        self, callback: Callable[[str, types.ProgressNotificationParams], Any]
    ) -> Callable[[], None]:
        """``callback(server, params)`` for every progress notification (``params.progress_token``)."""
        return self._on("progress", callback)

    def _post(self, kind: str, payload: Any) -> None:
        if kind == "tools_changed":
            self._table = None
            return
        if self._events is None or not self._listeners.get(kind):
            return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._events.send_nowait((kind, payload))

    async def _dispatch(self, receive: MemoryObjectReceiveStream[tuple[str, Any]]) -> None:
        """Deliver events to listeners in order, one at a time; a failing listener is logged."""
        async with receive:
            async for kind, payload in receive:
                args = payload if isinstance(payload, tuple) else (payload,)
                for callback in list(self._listeners.get(kind, ())):
                    try:
                        result = callback(*args)
                        if inspect.isawaitable(result):
                            await result
                    except Exception:
                        _log.exception("MCPClient listener failed", event=kind)
