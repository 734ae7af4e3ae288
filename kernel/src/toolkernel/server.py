"""MCPServer: tools, agents, workflows, resources and prompts, served over any transport.

An :class:`MCPServer` is a definition: constructing one loads no protocol code. The
kernel turns it into an ``mcp`` SDK low-level server when it is served
(:mod:`toolkernel._serving`), so both protocol eras come from the SDK.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from toolkernel.context import ToolContext
from toolkernel.errors import ConfigError, ToolExecutionError
from toolkernel.middleware import ToolMiddleware
from toolkernel.prompts import Prompt
from toolkernel.resources import Resource, ResourceTemplate
from toolkernel.tools import Tool, create_tool, tool

if TYPE_CHECKING:
    from pathlib import Path

    from toolkernel._kernel import Kernel
    from toolkernel.skills import Skill
    from toolkernel.tasks import TaskStore


__all__ = [
    "Agent",
    "AskInput",
    "MCPServer",
    "Package",
    "Remote",
    "Repository",
    "Workflow",
]


@runtime_checkable
class Agent(Protocol):
    """Anything with a description and an async ``generate``, exposed as ``ask_<key>``."""

    description: str

    def generate(self, message: str) -> Awaitable[Any]: ...


@runtime_checkable
class Workflow(Protocol):
    """A pydantic input model and an async ``run``, exposed as ``run_<key>``."""

    input_model: type[BaseModel]

    def run(self, input: Any) -> Awaitable[Any]: ...


class Repository(BaseModel):
    """Where the server's source lives (MCP registry metadata)."""

    model_config = ConfigDict(defer_build=True)

    url: str
    source: str = "github"
    id: str | None = None


class Package(BaseModel):
    """An installable package of the server (MCP registry metadata)."""

    model_config = ConfigDict(defer_build=True, populate_by_name=True)
    registry_name: str = Field(alias="registryName")
    name: str
    version: str


class Remote(BaseModel):
    """A hosted endpoint of the server (MCP registry metadata)."""

    model_config = ConfigDict(defer_build=True, populate_by_name=True)
    transport_type: str = Field(alias="transportType")
    url: str


class AskInput(BaseModel):
    """Input of an ``ask_<agent>`` tool."""

    model_config = ConfigDict(defer_build=True)

    message: str = Field(description="What to ask the agent.")


class MCPServer:
    """An MCP server definition.

    :param name: the server's name (``serverInfo.name``).
    :param version: its version.
    :param tools: :class:`Tool` objects or plain functions (wrapped with ``@tool``).
    :param agents: ``{key: agent}`` exposed as ``ask_<key>``.
    :param workflows: ``{key: workflow}`` exposed as ``run_<key>``.
    :param middleware: async middleware around this server's tool calls.
    :param page_size: the most items one ``tools/list``, ``resources/list``,
        ``resources/templates/list`` or ``prompts/list`` page holds; the client follows
        ``nextCursor`` for the rest. ``None`` (the default) lists everything at once.
    :param task_store: where the state of tools running as tasks lives
        (:class:`toolkernel.tasks.TaskStore`); in memory by default.
    :param skills: skill directories (or :class:`toolkernel.skills.Skill` objects) served
        through the ``io.modelcontextprotocol/skills`` extension.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        id: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        title: str | None = None,
        website_url: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        agents: Mapping[str, Any] | None = None,
        workflows: Mapping[str, Any] | None = None,
        resources: Sequence[Resource | ResourceTemplate] = (),
        prompts: Sequence[Prompt] = (),
        middleware: Sequence[ToolMiddleware] = (),
        repository: Repository | Mapping[str, Any] | None = None,
        release_date: str | None = None,
        packages: Sequence[Package | Mapping[str, Any]] = (),
        remotes: Sequence[Remote | Mapping[str, Any]] = (),
        kernel: Kernel | None = None,
        page_size: int | None = None,
        task_store: TaskStore | None = None,
        skills: Sequence[Skill | str | Path] = (),
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("MCPServer: name must be a non-empty string")
        if not isinstance(version, str) or not version.strip():
            raise ConfigError(f"MCPServer {name!r}: version must be a non-empty string")
        self.id = id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"toolkernel:{name}:{version}"))
        self.name = name
        self.version = version
        self.description = description
        self.instructions = instructions
        self.title = title
        self.website_url = website_url
        self.repository = Repository.model_validate(repository) if repository is not None else None
        self.release_date = release_date
        self.packages = [Package.model_validate(p) for p in packages]
        self.remotes = [Remote.model_validate(r) for r in remotes]
        if page_size is not None and (not isinstance(page_size, int) or page_size < 1):
            raise ConfigError(f"MCPServer {name!r}: page_size must be a positive integer or None")
        self.page_size = page_size
        self.task_store = task_store
        self.middleware: list[ToolMiddleware] = list(middleware)
        self._revision = 0
        self._tools: dict[str, Tool] = {}
        self._generated: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        self._prompts: dict[str, dict[str | None, Prompt]] = {}
        self._kernel = kernel
        self._live: weakref.WeakSet[Any] = weakref.WeakSet()
        self._subscriptions: dict[str, weakref.WeakSet[Any]] = {}
        self._bus: Any = None
        self._bus_unsubscribe: Callable[[], None] | None = None
        self._deliveries: set[Any] = set()
        self._log_level: str | None = None
        for item in tools:
            self.add_tool(item)
        for key, agent in (agents or {}).items():
            self._add_generated(_agent_tool(key, agent))
        for key, workflow in (workflows or {}).items():
            self._add_generated(_workflow_tool(key, workflow))
        for res in resources:
            self.add_resource(res)
        for p in prompts:
            self.add_prompt(p)
        self._skills: dict[str, Skill] = {}
        for skill in skills:
            self.add_skill(skill)

    # -- definition -----------------------------------------------------------------------

    def add_tool(self, item: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (or a function, wrapped with ``@tool``); names must be unique."""
        t = item if isinstance(item, Tool) else tool(item)
        if t.name in self._tools:
            raise ConfigError(f"MCPServer {self.name!r}: tool {t.name!r} is defined twice")
        if t.name in self._generated:
            _warn(f"tool {t.name!r} replaces the agent/workflow tool of the same name")
            del self._generated[t.name]
        self._tools[t.name] = t
        self._revision += 1
        return t

    def remove_tool(self, name: str) -> Tool:
        """Take a tool away; connected clients see it gone after :meth:`notify_list_changed`."""
        try:
            removed = self._tools.pop(name)
        except KeyError:
            raise LookupError(f"MCPServer {self.name!r} has no tool {name!r}") from None
        self._revision += 1
        return removed

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Decorator form of :meth:`add_tool`; takes the options of :func:`toolkernel.tool`."""
        if fn is not None:
            return self.add_tool(tool(fn, **options) if options else fn)

        def decorate(func: Callable[..., Any]) -> Tool:
            return self.add_tool(tool(**options)(func))

        return decorate

    def add_resource(self, item: Resource | ResourceTemplate) -> None:
        """Add a resource or a resource template."""
        if isinstance(item, Resource):
            if item.uri in self._resources:
                raise ConfigError(f"MCPServer {self.name!r}: resource {item.uri!r} is defined twice")
            self._resources[item.uri] = item
        elif isinstance(item, ResourceTemplate):
            if item.uri_template in self._templates:
                raise ConfigError(f"MCPServer {self.name!r}: template {item.uri_template!r} is defined twice")
            self._templates[item.uri_template] = item
        else:
            raise ConfigError(f"MCPServer {self.name!r}: expected Resource or ResourceTemplate, got {item!r}")
        self._revision += 1

    def add_prompt(self, item: Prompt) -> None:
        """Add a prompt; several versions of one name may coexist."""
        if not isinstance(item, Prompt):
            raise ConfigError(f"MCPServer {self.name!r}: expected a Prompt, got {item!r}")
        versions = self._prompts.setdefault(item.name, {})
        if item.version in versions:
            raise ConfigError(f"MCPServer {self.name!r}: prompt {item.key!r} is defined twice")
        versions[item.version] = item
        self._revision += 1

    def remove_prompt(self, name: str, version: str | None = None) -> Prompt:
        """Take a prompt (one version of it when ``version`` is given) away."""
        versions = self._prompts.get(name, {})
        if not versions or (version is not None and version not in versions):
            raise LookupError(
                f"MCPServer {self.name!r} has no prompt {name!r}" + (f"@{version}" if version else "")
            )
        removed = versions.pop(version if version is not None else list(versions)[-1])
        if not versions:
            del self._prompts[name]
        self._revision += 1
        return removed

    def add_skill(self, item: Skill | str | Path) -> Skill:
        """Serve a skill: a :class:`~toolkernel.skills.Skill`, or the directory to read one from."""
        from toolkernel.skills import Skill

        skill = item if isinstance(item, Skill) else Skill(item)
        if skill.name in self._skills:
            raise ConfigError(f"MCPServer {self.name!r}: skill {skill.name!r} is defined twice")
        self._skills[skill.name] = skill
        self._revision += 1
        return skill

    @property
    def skills(self) -> dict[str, Skill]:
        """The skills this server serves, by name."""
        return dict(self._skills)

    def _add_generated(self, t: Tool) -> None:
        if t.name in self._tools:
            _warn(
                f"tool {t.name!r} is defined explicitly; the agent/workflow tool of that name is not exposed"
            )
            return
        if t.name in self._generated:
            raise ConfigError(f"MCPServer {self.name!r}: {t.name!r} is produced by two agents/workflows")
        self._generated[t.name] = t
        self._revision += 1

    # -- what the server offers (after plugin contributions are merged by the kernel) ----------

    @property
    def kernel(self) -> Kernel:
        """The kernel whose plugins serve this server; a default one is made on first use."""
        if self._kernel is None:
            from toolkernel._kernel import Kernel

            self._kernel = Kernel()
        return self._kernel

    def all_tools(self) -> dict[str, Tool]:
        """Every tool this server exposes: its own, agents/workflows, then plugin tools."""
        merged = {**self._generated, **self._tools}
        for entry in self.kernel.tools.entries():
            if entry.name in merged:
                _warn(f"tool {entry.name!r} from plugin {entry.origin} is hidden by the server's own tool")
                continue
            merged[entry.name] = entry.value
        return merged

    def all_resources(self) -> tuple[dict[str, Resource], dict[str, ResourceTemplate]]:
        """Resources and templates: the server's own, then plugins'."""
        fixed, templates = dict(self._resources), dict(self._templates)
        for entry in self.kernel.resources.entries():
            value = entry.value
            if isinstance(value, Resource):
                fixed.setdefault(value.uri, value)
            else:
                templates.setdefault(value.uri_template, value)
        return fixed, templates

    def all_prompts(self) -> dict[str, dict[str | None, Prompt]]:
        """Prompts by name, then version: the server's own, then plugins'."""
        merged = {name: dict(v) for name, v in self._prompts.items()}
        for entry in self.kernel.prompts.entries():
            merged.setdefault(entry.value.name, {}).setdefault(entry.value.version, entry.value)
        return merged

    # -- Mastra-style management API ---------------------------------------------------------

    def get_server_info(self) -> dict[str, Any]:
        """Identity and registry metadata (Mastra ``getServerInfo``)."""
        info: dict[str, Any] = {"id": self.id, "name": self.name, "version": self.version}
        if self.description:
            info["description"] = self.description
        if self.repository:
            info["repository"] = self.repository.model_dump(exclude_none=True)
        info["version_detail"] = {
            "version": self.version,
            "release_date": self.release_date,
            "is_latest": True,
        }
        return info

    def get_server_detail(self) -> dict[str, Any]:
        """Server info plus packages and remotes (Mastra ``getServerDetail``)."""
        return {
            **self.get_server_info(),
            "packages": [p.model_dump(by_alias=True) for p in self.packages],
            "remotes": [r.model_dump(by_alias=True) for r in self.remotes],
        }

    def get_tool_list_info(self) -> dict[str, Any]:
        """Every tool as listed to clients (Mastra ``getToolListInfo``)."""
        return {"tools": [{"id": name, **t.describe()} for name, t in self.all_tools().items()]}

    def get_tool_info(self, tool_id: str) -> dict[str, Any] | None:
        """One tool's listing, or ``None`` (Mastra ``getToolInfo``)."""
        t = self.all_tools().get(tool_id)
        return {"id": tool_id, **t.describe()} if t is not None else None

    async def execute_tool(
        self, tool_id: str, args: Mapping[str, Any] | None = None, *, values: Mapping[str, Any] | None = None
    ) -> Any:
        """Run a tool in-process through the full call path (middleware, hooks, validation).

        Returns the structured result when the tool has an output schema, else its
        return value; raises :class:`~toolkernel.errors.ToolkernelError` subclasses on
        unknown tools and ``ToolExecutionError`` when the call ends in error.
        """
        from toolkernel._app import caller_for

        t = self.all_tools().get(tool_id)
        if t is None:
            raise LookupError(f"MCPServer {self.name!r} has no tool {tool_id!r}")
        ctx = ToolContext(server=self, tool_name=tool_id, call_id=str(uuid.uuid4()), values=values)
        outcome = await caller_for(self).call(t, dict(args or {}), ctx)
        if outcome.is_error:
            texts = [getattr(b, "text", "") for b in outcome.content]
            raise ToolExecutionError(" ".join(texts) or f"tool {tool_id!r} failed")
        return outcome.structured if outcome.structured is not None else outcome.value

    # -- notifications to connected clients ---------------------------------------------------

    @property
    def subscription_bus(self) -> Any:
        """The SDK ``SubscriptionBus`` feeding 2026-07-28 ``subscriptions/listen`` streams.

        In-process by default; assign one backed by shared pub/sub before serving to fan
        events out across replicas.
        """
        if self._bus is None:
            from mcp.server.subscriptions import InMemorySubscriptionBus

            self._bus = InMemorySubscriptionBus()
        return self._bus

    @subscription_bus.setter
    def subscription_bus(self, bus: Any) -> None:
        if self._bus_unsubscribe is not None:
            self._bus_unsubscribe()
            self._bus_unsubscribe = None
        self._bus = bus
        if getattr(bus, "delivers_everywhere", False):
            # A shared bus brings every event back to this process too: the 2025-era
            # subscribers connected here get theirs from it, whichever replica published.
            self._bus_unsubscribe = bus.subscribe(self._deliver_from_bus)

    async def notify_updated(self, uri: str) -> None:
        """Tell clients subscribed to ``uri`` that it changed (both protocol eras, every replica)."""
        if not getattr(self._bus, "delivers_everywhere", False):
            await self._send_updated(uri)
        if self._bus is not None:
            from mcp.shared.subscriptions import ResourceUpdated

            await _quietly(self._bus.publish(ResourceUpdated(uri=uri)))

    async def notify_list_changed(self, kind: Literal["tools", "resources", "prompts"] = "resources") -> None:
        """Tell every connected client that the list of ``kind`` changed (both eras, every replica)."""
        if not getattr(self._bus, "delivers_everywhere", False):
            await self._send_list_changed(kind)
        if self._bus is not None:
            from mcp.shared import subscriptions as events

            event = {
                "tools": events.ToolsListChanged,
                "resources": events.ResourcesListChanged,
                "prompts": events.PromptsListChanged,
            }[kind]()
            await _quietly(self._bus.publish(event))

    def track_connection(self, connection: Any) -> None:
        """Count ``connection`` (an SDK ``Connection``) among those list-change notifications reach.

        Connections that make a request are tracked on their own; a transport calls this
        for one that may not (a session continued on another replica).
        """
        self._live.add(connection)

    async def _send_updated(self, uri: str) -> None:
        for connection in list(self._subscriptions.get(uri, ())):
            await _quietly(connection.send_resource_updated(uri))

    async def _send_list_changed(self, kind: Literal["tools", "resources", "prompts"]) -> None:
        for connection in list(self._live):
            send = {
                "tools": connection.send_tool_list_changed,
                "resources": connection.send_resource_list_changed,
                "prompts": connection.send_prompt_list_changed,
            }[kind]
            await _quietly(send())

    def _deliver_from_bus(self, event: Any) -> None:
        """Pass an event from a shared bus to this process's 2025-era connections."""
        import asyncio

        from mcp.shared import subscriptions as events

        send: Awaitable[None]
        if isinstance(event, events.ResourceUpdated):
            send = self._send_updated(event.uri)
        elif isinstance(event, events.ToolsListChanged):
            send = self._send_list_changed("tools")
        elif isinstance(event, events.PromptsListChanged):
            send = self._send_list_changed("prompts")
        else:
            send = self._send_list_changed("resources")
        task = asyncio.get_running_loop().create_task(send)
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    # -- running -------------------------------------------------------------------------------

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """Serve until interrupted: ``transport`` by name, options as for ``ServeOptions``."""
        import anyio
        from pydantic import ValidationError

        from toolkernel.transports import ServeOptions

        try:
            opts = ServeOptions(**options)
        except ValidationError as exc:
            raise ConfigError(f"MCPServer.run: {exc}") from None
        anyio.run(self.kernel.serve, self, transport, opts)


def _agent_tool(key: str, agent: Any) -> Tool:
    description = getattr(agent, "description", None)
    generate = getattr(agent, "generate", None)
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"agent {key!r} needs a non-empty description to be exposed as ask_{key}")
    if generate is None or not callable(generate):
        raise ConfigError(f"agent {key!r} needs an async generate(message) method")

    async def ask(data: AskInput, ctx: ToolContext) -> Any:
        reply = await generate(data.message)
        return getattr(reply, "text", reply)

    return create_tool(
        id=f"ask_{key}", description=f"Ask agent {key!r}: {description}", input_schema=AskInput, execute=ask
    )


def _workflow_tool(key: str, workflow: Any) -> Tool:
    input_model = getattr(workflow, "input_model", None)
    run = getattr(workflow, "run", None)
    if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
        raise ConfigError(f"workflow {key!r} needs input_model, a pydantic model class")
    if run is None or not callable(run):
        raise ConfigError(f"workflow {key!r} needs an async run(input) method")
    description = getattr(workflow, "description", None) or f"Run workflow {key!r}."

    async def execute(data: Any, ctx: ToolContext) -> Any:
        return await run(data)

    return create_tool(
        id=f"run_{key}",
        description=description,
        input_schema=input_model,
        execute=execute,
        output_schema=getattr(workflow, "output_model", None),
    )


def _warn(message: str) -> None:
    from toolkernel._logging import get_logger

    get_logger("toolkernel.server").warning(message)


async def _quietly(awaitable: Awaitable[Any]) -> None:
    """Send a notification; a client that went away is not the sender's problem."""
    try:
        await awaitable
    except Exception as exc:
        from toolkernel._logging import get_logger

        get_logger("toolkernel.server").debug("notification not delivered", error=str(exc))
