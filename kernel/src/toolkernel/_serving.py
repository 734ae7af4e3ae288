"""The bridge to the ``mcp`` SDK: an MCPServer becomes an SDK low-level server.

The SDK owns the protocol (both eras, the handshake, validation, cancellation); this
module supplies its request handlers, each a short translation between SDK types and
the kernel's model. Tool calls go to :class:`toolkernel.calls.ToolCaller`. It is
imported when a :class:`toolkernel._app.ServingAppImpl` first needs its SDK server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
import warnings
import weakref
from typing import TYPE_CHECKING, Any, TypeVar, cast

import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from pydantic import Field

from toolkernel._app import advertised_extensions
from toolkernel._listen import TaskListenHandler
from toolkernel._telemetry import RequestSpans
from toolkernel.auth import AuthInfo
from toolkernel.context import InputRequired, ToolContext, encode_state
from toolkernel.errors import ProtocolError, missing_capability
from toolkernel.resources import Resource, ResourceLister, call_maybe_async
from toolkernel.skills import mime_type
from toolkernel.tasks import TASKS_EXTENSION, TaskHandle, TaskRecord
from toolkernel.wire import answering

if TYPE_CHECKING:
    from mcp.server.context import CallNext, ServerRequestContext
    from mcp.server.models import InitializationOptions

    from toolkernel._app import ServingAppImpl
    from toolkernel._direct import DirectAnswers
    from toolkernel.middleware import ToolOutcome
    from toolkernel.prompts import Prompt
    from toolkernel.server import MCPServer
    from toolkernel.tools import Tool

RESOURCE_NOT_FOUND = -32002
HEADER_MISMATCH = -32020
CONTEXT_META_KEY = "toolkernel/context"
VERSION_META_KEY = "toolkernel/version"
LOG_LEVEL_STATE = "toolkernel.log_level"


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The SDK ``Connection`` behind a request (SDK 2.3 keeps it private on the session)."""
    return getattr(ctx.session, "_connection", None)


class ProtocolServer(Server[Any]):
    """The SDK low-level server, advertising list-changed notifications by default.

    Transports that run sessions themselves (the SDK's Streamable HTTP session manager)
    build their initialization options with no arguments; this default is what makes
    them advertise ``listChanged``. A transport with no channel for server-initiated
    messages (stateless HTTP) sets :attr:`notification_options` to all-off.
    """

    notification_options = NotificationOptions(
        prompts_changed=True, resources_changed=True, tools_changed=True
    )
    direct: DirectAnswers | None = None
    """Answers plain handshake-era requests without the SDK's runner, for transports that can use them."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The SDK's options, with :attr:`notification_options` when none are given."""
        return super().create_initialization_options(
            notification_options or self.notification_options, experimental_capabilities, extensions
        )


def protocol_server_for(app: ServingAppImpl) -> ProtocolServer:
    """The SDK low-level server carrying the handlers of ``app``'s server."""
    s = app.server
    handlers = _Handlers(app)
    with warnings.catch_warnings():
        # Logging is deprecated in 2026-07-28 but still part of the handshake era we serve.
        warnings.simplefilter("ignore")
        proto = ProtocolServer(
            s.name,
            version=s.version,
            title=s.title,
            description=s.description,
            instructions=s.instructions,
            website_url=s.website_url,
            get_tool_input_schema=lambda name: t.input_schema if (t := app.tools.get(name)) else None,
            on_list_tools=handlers.list_tools,
            on_call_tool=cast(Any, handlers.call_tool),  # may answer with a CreateTaskResult
            on_list_resources=handlers.list_resources,
            on_list_resource_templates=handlers.list_resource_templates,
            on_read_resource=handlers.read_resource,
            on_subscribe_resource=handlers.subscribe,
            on_unsubscribe_resource=handlers.unsubscribe,
            on_list_prompts=handlers.list_prompts,
            on_get_prompt=handlers.get_prompt,
            on_completion=handlers.complete,
            on_set_logging_level=handlers.set_logging_level,
            on_subscriptions_listen=TaskListenHandler(s.subscription_bus, app.tasks),
        )
    proto.middleware = [RequestSpans(), _TrackConnections(s), _OneHandshake()]
    proto.extensions.update(advertised_extensions(s, app.tools))
    if s.skills:
        proto.add_request_handler("skills/list", types.PaginatedRequestParams, handlers.list_skills)
        proto.add_request_handler("skills/get", _UriParams, handlers.get_skill)
        proto.add_request_handler("resources/directory/read", _DirectoryParams, handlers.read_directory)
    proto.add_request_handler("tasks/get", _TaskParams, handlers.get_task)
    proto.add_request_handler("tasks/update", _TaskUpdateParams, handlers.update_task)
    proto.add_request_handler("tasks/cancel", _TaskParams, handlers.cancel_task)
    from toolkernel._direct import DirectAnswers

    proto.direct = DirectAnswers(proto, handlers)
    return proto


class _TrackConnections:
    """SDK middleware that remembers live connections, for list-changed notifications."""

    def __init__(self, server: MCPServer) -> None:
        self._live = server._live

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        connection = connection_of(ctx)
        if connection is not None:
            self._live.add(connection)
        return await call_next(ctx)


class _OneHandshake:
    """SDK middleware refusing ``initialize`` on a connection an earlier one initialized.

    A second handshake must not change the session's protocol version or client info,
    and a transport must not take its failure for the failure of the session.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        # On 2026-07-28 there is no handshake: `initialize` is an unknown method there (404).
        if ctx.method == "initialize" and not _is_modern(ctx.protocol_version):
            connection = connection_of(ctx)
            if connection is not None and connection.client_params is not None:
                raise MCPError(
                    types.INVALID_REQUEST,
                    "Invalid Request: the session is already initialized; open a new session "
                    "to initialize again",
                )
        return await call_next(ctx)


class _Handlers:
    """The SDK request handlers for one served server."""

    def __init__(self, app: ServingAppImpl) -> None:
        self.app = app
        self.server = app.server
        self._listed: list[types.Tool] = []
        self._listed_from: dict[str, Tool] | None = None

    # -- tools ---------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = self.app.tools
        listed = self.listed(tools)
        caller = _auth_info(ctx)
        if caller is not None and any(t.scopes for t in tools.values()):
            # A caller sees only the tools its scopes allow.
            listed = [
                described
                for described, t in zip(listed, tools.values(), strict=True)
                if _allowed(caller, t.scopes)
            ]
        page, cursor = _page(listed, params, self.server.page_size)
        return types.ListToolsResult(tools=page, next_cursor=cursor)

    def listed(self, tools: dict[str, Tool]) -> list[types.Tool]:
        """Every tool of ``tools`` as ``tools/list`` lists it, remade only when the tools change."""
        if tools is not self._listed_from:
            self._listed = [types.Tool.model_validate(t.describe()) for t in tools.values()]
            self._listed_from = tools
        return self._listed

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        tool = self.app.tools.get(params.name)
        caller = _auth_info(ctx)
        if tool is None or not _allowed(caller, tool.scopes):
            # A tool the caller may not use is as unknown to it as a missing one.
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name!r}")
        answering(f"tool {tool.name!r}")
        as_task = tool.task is not None and _wants_tasks(ctx)
        if tool.task == "required" and not as_task:
            raise _protocol_error(
                missing_capability(
                    {"extensions": {TASKS_EXTENSION: {}}}, f"tool {tool.name!r} runs only as a task"
                )
            )
        values = params.meta.get(CONTEXT_META_KEY) if params.meta else None
        call_id = str(ctx.request_id) if ctx.request_id is not None else str(uuid.uuid4())
        arguments = params.arguments or {}
        if as_task:
            try:
                return await self._call_as_task(ctx, tool, arguments, call_id, values, params)
            except InputRequired as asked:
                return _input_required(asked)
            except ProtocolError as exc:
                raise _protocol_error(exc) from None
        tctx = ToolContext(
            server=self.server,
            tool_name=tool.name,
            call_id=call_id,
            request=ctx,
            values=values if isinstance(values, dict) else None,
            auth=caller,
            input_responses=params.input_responses,
            request_state=params.request_state,
        )
        outcome = await self.run_tool(tool, arguments, tctx)
        return outcome if isinstance(outcome, types.InputRequiredResult) else _call_result(outcome)

    async def run_tool(
        self, tool: Tool, arguments: dict[str, Any], tctx: ToolContext
    ) -> ToolOutcome | types.InputRequiredResult:
        """One call of ``tool`` inside its request (not as a task): its outcome, or the questions it asks."""
        try:
            return await self.app.caller.call(tool, arguments, tctx)
        except InputRequired as asked:
            return _input_required(asked)
        except ProtocolError as exc:
            raise _protocol_error(exc) from None

    async def _call_as_task(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        arguments: dict[str, Any],
        call_id: str,
        values: Any,
        params: types.CallToolRequestParams,
    ) -> dict[str, Any]:
        """Run ``tool`` as a task: at once, or (``task_start="detach"``) once it calls ``run_as_task``."""
        runner, caller = self.app.tasks, self.app.caller

        def context(task: TaskHandle | None, detach: Any = None) -> ToolContext:
            return ToolContext(
                server=self.server,
                tool_name=tool.name,
                call_id=call_id,
                request=ctx,
                values=values if isinstance(values, dict) else None,
                auth=_auth_info(ctx),
                input_responses=params.input_responses,
                request_state=params.request_state,
                task=task,
                detach=detach,
            )

        if tool.task_start == "call" and runner.queue is not None:
            # Shared tasks: a worker on any replica runs the body; this replica only queues it.
            record = runner.new_record()
            await runner.store.create(record)
            caller_info = _auth_info(ctx)
            capabilities = getattr(connection_of(ctx), "client_capabilities", None)
            await runner.queue.put(
                {
                    "task": record.task_id,
                    "tool": tool.name,
                    "arguments": arguments,
                    "values": values if isinstance(values, dict) else None,
                    "auth": caller_info.model_dump(mode="json") if caller_info is not None else None,
                    "capabilities": capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if capabilities is not None
                    else None,
                }
            )
            return {"resultType": "task", **record.info()}

        if tool.task_start == "call":

            async def work(handle: TaskHandle) -> dict[str, Any]:
                return _call_result(await caller.call(tool, arguments, context(handle))).model_dump(
                    by_alias=True, mode="json", exclude_none=True
                )

            record = await runner.start(work)
            return {"resultType": "task", **record.info()}

        loop = asyncio.get_running_loop()
        detached: asyncio.Future[TaskRecord] = loop.create_future()

        async def detach() -> TaskHandle:
            record = runner.new_record()
            await runner.store.create(record)
            detached.set_result(TaskRecord(**{**record.__dict__, "input_requests": {}}))
            return TaskHandle(runner, record)

        tctx = context(None, detach)
        running = loop.create_task(caller.call(tool, arguments, tctx))
        await asyncio.wait((running, detached), return_when=asyncio.FIRST_COMPLETED)
        if not detached.done():
            detached.cancel()
            return _call_result(running.result()).model_dump(by_alias=True, mode="json", exclude_none=True)
        handle = tctx._task
        assert handle is not None

        async def finish() -> dict[str, Any]:
            return _call_result(await running).model_dump(by_alias=True, mode="json", exclude_none=True)

        runner.attach(handle.record, finish)
        return {"resultType": "task", **detached.result().info()}

    # -- tasks -----------------------------------------------------------------------------

    async def _task(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
        if not _wants_tasks(ctx):
            raise _protocol_error(missing_capability({"extensions": {TASKS_EXTENSION: {}}}, ctx.method))
        headers = getattr(ctx.request, "headers", None)
        if headers is not None and "mcp-name" in headers and headers["mcp-name"].strip() != task_id:
            # SEP-2243: the routing header must name the task the body names.
            raise MCPError(HEADER_MISMATCH, "Mcp-Name header does not match the request body's 'taskId'")
        record = await self.app.tasks.get(task_id)
        if record is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown task: {task_id!r}", {"taskId": task_id})
        return record

    async def get_task(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        """``tasks/get``: the task's status, with its result, error or open questions inlined."""
        return {"resultType": "complete", **(await self._task(ctx, params.task_id)).detailed()}

    async def update_task(
        self, ctx: ServerRequestContext[Any, Any], params: _TaskUpdateParams
    ) -> dict[str, Any]:
        """``tasks/update``: answers to the task's open questions; the task resumes."""
        await self._task(ctx, params.task_id)
        await self.app.tasks.update(params.task_id, params.input_responses)
        return {"resultType": "complete"}

    async def cancel_task(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        """``tasks/cancel``: stop the task (acknowledged the same way when it is already over)."""
        await self._task(ctx, params.task_id)
        await self.app.tasks.cancel(params.task_id)
        return {"resultType": "complete"}

    # -- resources ----------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        fixed, templates = self.server.all_resources()
        caller = _auth_info(ctx)
        listed = [_wire_resource(r) for r in fixed.values() if _allowed(caller, r.scopes)]
        listed += [
            types.Resource(uri=k.uri, name=k.name, description=k.description, mime_type="text/markdown")
            for k in self.server.skills.values()
        ]
        listers = [
            t.listing for t in templates.values() if t.listing is not None and _allowed(caller, t.scopes)
        ]
        if listers:
            page, cursor = await _listed_page(listed, listers, params, self.server.page_size)
        else:
            page, cursor = _page(listed, params, self.server.page_size)
        return types.ListResourcesResult(resources=page, next_cursor=cursor)

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        _, templates = self.server.all_resources()
        caller = _auth_info(ctx)
        listed = [
            types.ResourceTemplate(
                uri_template=t.uri_template,
                name=t.name,
                title=t.title,
                description=t.description,
                mime_type=t.mime_type,
                _meta=t.meta,
            )
            for t in templates.values()
            if _allowed(caller, t.scopes)
        ]
        page, cursor = _page(listed, params, self.server.page_size)
        return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith("skill://"):
            return self._read_skill_file(ctx, uri)
        fixed, templates = self.server.all_resources()
        caller = _auth_info(ctx)
        if uri in fixed and _allowed(caller, fixed[uri].scopes):
            resource = fixed[uri]
            data = await call_maybe_async(resource.read)
            mime = resource.mime_type
        else:
            for template in templates.values():
                variables = template.match(uri)
                if variables is not None and _allowed(caller, template.scopes):
                    data = await call_maybe_async(template.read, **variables)
                    mime = template.mime_type
                    break
            else:
                # 2026-07-28 (SEP-2164) names an unknown resource with -32602; the 2025 era with -32002.
                code = types.INVALID_PARAMS if _is_modern(ctx.protocol_version) else RESOURCE_NOT_FOUND
                raise MCPError(code, f"Resource not found: {uri}", {"uri": uri})
        if isinstance(data, bytes):
            contents: Any = types.BlobResourceContents(
                uri=uri, mime_type=mime or "application/octet-stream", blob=base64.b64encode(data).decode()
            )
        elif isinstance(data, str):
            contents = types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=data)
        else:
            raise MCPError(
                types.INTERNAL_ERROR, f"resource {uri!r} reader returned {type(data).__name__}, not str/bytes"
            )
        return types.ReadResourceResult(contents=[contents])

    # -- skills ------------------------------------------------------------------------------

    def _read_skill_file(self, ctx: ServerRequestContext[Any, Any], uri: str) -> types.ReadResourceResult:
        for skill in self.server.skills.values():
            data = skill.read(uri)
            if data is not None:
                mime = mime_type(uri)
                try:
                    contents: Any = types.TextResourceContents(
                        uri=uri, mime_type=mime, text=data.decode("utf-8")
                    )
                except UnicodeDecodeError:
                    blob = base64.b64encode(data).decode()
                    contents = types.BlobResourceContents(uri=uri, mime_type=mime, blob=blob)
                return types.ReadResourceResult(contents=[contents])
        code = types.INVALID_PARAMS if _is_modern(ctx.protocol_version) else RESOURCE_NOT_FOUND
        raise MCPError(code, f"Resource not found: {uri}", {"uri": uri})

    async def list_skills(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        """``skills/list``: one entry per skill, paginated like the other lists."""
        entries = [skill.entry() for skill in self.server.skills.values()]
        page, cursor = _page(entries, params, self.server.page_size)
        result: dict[str, Any] = {"skills": page, **_SKILL_CACHE}
        if cursor is not None:
            result["nextCursor"] = cursor
        return result

    async def get_skill(self, ctx: ServerRequestContext[Any, Any], params: _UriParams) -> dict[str, Any]:
        """``skills/get``: the entry of the skill whose ``SKILL.md`` is at ``uri``."""
        for skill in self.server.skills.values():
            if skill.uri == params.uri:
                return {"skill": skill.entry(), **_SKILL_CACHE}
        raise MCPError(types.INVALID_PARAMS, f"No skill at {params.uri!r}", {"uri": params.uri})

    async def read_directory(
        self, ctx: ServerRequestContext[Any, Any], params: _DirectoryParams
    ) -> dict[str, Any]:
        """``resources/directory/read``: a skill directory's direct children."""
        for skill in self.server.skills.values():
            children = skill.children(params.uri)
            if children is not None:
                page, cursor = _page(children, params, self.server.page_size)
                return {"resources": page, **({"nextCursor": cursor} if cursor is not None else {})}
        raise MCPError(types.INVALID_PARAMS, f"Not a directory: {params.uri!r}", {"uri": params.uri})

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        connection = connection_of(ctx)
        if connection is not None:
            self.server._subscriptions.setdefault(str(params.uri), weakref.WeakSet()).add(connection)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        connection = connection_of(ctx)
        subscribers = self.server._subscriptions.get(str(params.uri))
        if subscribers is not None and connection is not None:
            subscribers.discard(connection)
        return types.EmptyResult()

    # -- prompts -------------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        listed = []
        caller = _auth_info(ctx)
        for versions in self.server.all_prompts().values():
            newest = _newest(versions)
            if not _allowed(caller, newest.scopes):
                continue
            meta = (
                {"toolkernel/versions": [v for v in versions if v is not None]} if len(versions) > 1 else None
            )
            listed.append(
                types.Prompt(
                    name=newest.name,
                    title=newest.title,
                    description=newest.description,
                    arguments=[
                        types.PromptArgument(name=a.name, description=a.description, required=a.required)
                        for a in newest.arguments or ()
                    ],
                    _meta=meta,
                )
            )
        page, cursor = _page(listed, params, self.server.page_size)
        return types.ListPromptsResult(prompts=page, next_cursor=cursor)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        prompt = self._prompt(params.name, dict(params.meta) if params.meta else None)
        if not _allowed(_auth_info(ctx), prompt.scopes):
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name!r}")
        try:
            arguments: dict[str, Any] = prompt.check_arguments(params.arguments)
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        try:
            if prompt.context_param is not None:
                arguments[prompt.context_param] = ToolContext(
                    server=self.server,
                    tool_name=prompt.name,
                    call_id=str(ctx.request_id),
                    request=ctx,
                    auth=_auth_info(ctx),
                    input_responses=params.input_responses,
                    request_state=params.request_state,
                )
            rendered = await call_maybe_async(prompt.render, **arguments)
        except InputRequired as asked:
            return types.InputRequiredResult(
                input_requests=asked.requests, request_state=encode_state(asked.state)
            )
        except ProtocolError as exc:
            raise _protocol_error(exc) from None
        if isinstance(rendered, str):
            messages = [
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=rendered))
            ]
        else:
            messages = [
                m if isinstance(m, types.PromptMessage) else types.PromptMessage.model_validate(m)
                for m in rendered
            ]
        return types.GetPromptResult(description=prompt.description, messages=messages)

    def _prompt(self, name: str, extra: dict[str, Any] | None) -> Prompt:
        versions = self.server.all_prompts().get(name)
        if not versions:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name!r}")
        wanted = extra.get(VERSION_META_KEY) if extra else None
        if wanted is None:
            return _newest(versions)
        if wanted not in versions:
            known = ", ".join(str(v) for v in versions if v is not None)
            raise MCPError(
                types.INVALID_PARAMS, f"prompt {name!r} has no version {wanted!r} (versions: {known})"
            )
        return versions[wanted]

    # -- completion and logging --------------------------------------------------------------------

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref, arg = params.ref, params.argument
        completer = None
        if isinstance(ref, types.PromptReference):
            versions = self.server.all_prompts().get(ref.name)
            if versions:
                completer = _newest(versions).complete.get(arg.name)
        else:
            _, templates = self.server.all_resources()
            template = templates.get(ref.uri)
            if template is not None:
                completer = template.complete.get(arg.name)
        values = list(await call_maybe_async(completer, arg.value)) if completer is not None else []
        return types.CompleteResult(
            completion=types.Completion(values=values[:100], total=len(values), has_more=len(values) > 100)
        )

    async def set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        connection = connection_of(ctx)
        if connection is not None:
            connection.state[LOG_LEVEL_STATE] = params.level
        return types.EmptyResult()


class _UriParams(types.RequestParams):
    """Params naming one resource by ``uri``."""

    uri: str


class _DirectoryParams(types.PaginatedRequestParams):
    """Params of ``resources/directory/read``."""

    uri: str


_SKILL_CACHE = {"ttlMs": 300_000, "cacheScope": "public"}
"""Skills are read once, at start-up: clients may keep what they got for five minutes."""


class _TaskParams(types.RequestParams):
    """Params of ``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class _TaskUpdateParams(_TaskParams):
    """Params of ``tasks/update``: answers keyed as the task's ``inputRequests`` were."""

    input_responses: dict[str, Any] = Field(default_factory=dict)


def _wants_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared the tasks extension (per request, on 2026-07-28)."""
    capabilities = getattr(connection_of(ctx), "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None)
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _input_required(asked: InputRequired) -> types.InputRequiredResult:
    return types.InputRequiredResult(input_requests=asked.requests, request_state=encode_state(asked.state))


def _protocol_error(exc: ProtocolError) -> MCPError:
    return MCPError(exc.code, exc.message, exc.data)


def _call_result(outcome: Any) -> types.CallToolResult:
    result = types.CallToolResult(
        content=outcome.content, structured_content=outcome.structured, is_error=outcome.is_error
    )
    if outcome.meta:
        result.meta = outcome.meta
    return result


def _is_modern(version: str | None) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return version in MODERN_PROTOCOL_VERSIONS


_T = TypeVar("_T")


def _page(
    items: list[_T], params: types.PaginatedRequestParams | None, size: int | None
) -> tuple[list[_T], str | None]:
    """One page of a list result and the cursor of the next (``None`` on the last page).

    The cursor is the offset of the next page, opaque to clients; one that this server
    did not hand out is refused with -32602.
    """
    cursor = params.cursor if params is not None else None
    if size is None and cursor is None:
        return items, None
    start = 0
    if cursor is not None:
        try:
            start = int(base64.urlsafe_b64decode(cursor.encode()).decode().removeprefix("o:"), 10)
        except (ValueError, UnicodeDecodeError):
            start = -1
        if start < 0 or start > len(items):
            raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}")
    end = len(items) if size is None else start + size
    following = base64.urlsafe_b64encode(f"o:{end}".encode()).decode() if end < len(items) else None
    return items[start:end], following


LISTED_PAGE_SIZE = 1000
"""A ``resources/list`` page's size when templates list their resources and ``page_size`` is unset."""


def _wire_resource(r: Resource) -> types.Resource:
    return types.Resource(
        uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type, _meta=r.meta
    )


async def _listed_page(
    fixed: list[types.Resource],
    listers: list[ResourceLister],
    params: types.PaginatedRequestParams | None,
    size: int | None,
) -> tuple[list[types.Resource], str | None]:
    """A ``resources/list`` page over the fixed resources, then each listing template's pages.

    The cursor names a position ``[part, inner]``: ``part`` 0 is the fixed resources (``inner``
    an offset), ``part`` n the n-th listing template (``inner`` that template's own cursor).
    """
    limit = size or LISTED_PAGE_SIZE
    part, inner = 0, None
    cursor = params.cursor if params is not None else None
    if cursor is not None:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode().removeprefix("p:"))
            part, inner = int(decoded[0]), decoded[1]
            if not 0 <= part <= len(listers) or not (inner is None or isinstance(inner, str)):
                raise ValueError(cursor)
            if part == 0 and inner is not None and not 0 <= int(inner, 10) <= len(fixed):
                raise ValueError(cursor)  # the fixed resources' part holds an offset into them
        except (ValueError, TypeError, IndexError, UnicodeDecodeError):
            raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}") from None
    page: list[types.Resource] = []
    from_client = cursor is not None  # ``inner`` is still the client's, not one a listing handed out
    while len(page) < limit and part <= len(listers):
        if part == 0:
            start = int(inner or 0)
            taken = fixed[start : start + limit - len(page)]
            page += taken
            if start + len(taken) < len(fixed):
                inner = str(start + len(taken))
                break
        else:
            try:
                found, following = await call_maybe_async(listers[part - 1], inner, limit - len(page))
            except ValueError as exc:
                if inner is None or not from_client:
                    raise
                # The client's cursor carried the template's own cursor, which its listing refused.
                raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r} ({exc})") from None
            from_client = False
            page += [_wire_resource(r) for r in found]
            if following is not None:
                inner = following
                if not found:
                    break
                continue
        part, inner = part + 1, None
    if part > len(listers):
        return page, None
    return page, base64.urlsafe_b64encode(("p:" + json.dumps([part, inner])).encode()).decode()


def _newest(versions: dict[str | None, Prompt]) -> Prompt:
    """The version of a prompt clients get unless they select one: the one added last."""
    return list(versions.values())[-1]


AUTH_SCOPE_KEY = "toolkernel.auth"
"""ASGI scope key where an HTTP auth layer (toolkernel-oauth) leaves a request's verified caller."""


def _allowed(caller: AuthInfo | None, needed: tuple[str, ...]) -> bool:
    """Whether ``caller`` holds every scope in ``needed``; with auth off (no caller) nothing is needed."""
    return caller is None or not needed or set(needed) <= set(caller.scopes)


def _auth_info(ctx: ServerRequestContext[Any, Any]) -> AuthInfo | None:
    """The verified caller of this very HTTP request: what an auth layer put in its ASGI scope, else
    the SDK's auth middleware's; ``None`` on stdio or without auth."""
    if ctx.request is None:
        return None
    scope = getattr(ctx.request, "scope", None)
    return auth_of_scope(scope if isinstance(scope, dict) else None)


_get_access_token: Any = None
"""The SDK's ``get_access_token``, once :func:`auth_of_scope` first needs it."""


def auth_of_scope(scope: dict[str, Any] | None) -> AuthInfo | None:
    """The verified caller of the HTTP request with ASGI ``scope``: the auth layer's, else the SDK's."""
    if scope is not None:
        info = scope.get(AUTH_SCOPE_KEY)
        if isinstance(info, AuthInfo):
            return info
    global _get_access_token
    if _get_access_token is None:  # looked up once: an import statement here costs ~1 us a request
        from mcp.server.auth.middleware.auth_context import get_access_token

        _get_access_token = get_access_token
    token = _get_access_token()
    if token is None:
        return None
    return AuthInfo(
        client_id=token.client_id,
        scopes=tuple(token.scopes),
        expires_at=token.expires_at,
        subject=getattr(token, "subject", None),
    )
