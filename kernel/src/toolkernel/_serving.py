"""The bridge to the ``mcp`` SDK: an MCPServer becomes an SDK low-level server.

The SDK owns the protocol (both eras, the handshake, validation, cancellation); this
module supplies its request handlers, each a short translation between SDK types and
the kernel's model. Tool calls go to :class:`toolkernel.calls.ToolCaller`.
"""

from __future__ import annotations

import base64
import contextlib
import uuid
import warnings
import weakref
from collections.abc import AsyncIterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError

from toolkernel._telemetry import RequestSpans
from toolkernel.auth import AuthInfo
from toolkernel.calls import ToolCaller
from toolkernel.context import InputRequired, ToolContext, encode_state
from toolkernel.events import SessionEvent
from toolkernel.resources import call_maybe_async
from toolkernel.wire import answering

if TYPE_CHECKING:
    from mcp.server.context import CallNext, ServerRequestContext
    from mcp.server.models import InitializationOptions
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage

    from toolkernel._kernel import Kernel
    from toolkernel.prompts import Prompt
    from toolkernel.server import MCPServer
    from toolkernel.tools import Tool

RESOURCE_NOT_FOUND = -32002
CONTEXT_META_KEY = "toolkernel/context"
VERSION_META_KEY = "toolkernel/version"
LOG_LEVEL_STATE = "toolkernel.log_level"

_callers: weakref.WeakKeyDictionary[MCPServer, ToolCaller] = weakref.WeakKeyDictionary()


def caller_for(server: MCPServer) -> ToolCaller:
    """The tool caller of ``server``: remade when its kernel or middleware list changes."""
    caller = _callers.get(server)
    if caller is None or not caller.serves(server.kernel, server.middleware):
        caller = _callers[server] = ToolCaller(server.kernel, server.middleware)
    return caller


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


class ServingAppImpl:
    """A server being served: the SDK server plus the session hooks, as transports see it."""

    def __init__(self, server: MCPServer, kernel: Kernel) -> None:
        self.server = server
        self.kernel = kernel
        self.tools: dict[str, Tool] = server.all_tools()
        self.caller = caller_for(server)

    @cached_property
    def protocol_server(self) -> ProtocolServer:
        """The SDK low-level server carrying this server's handlers."""
        s = self.server
        handlers = _Handlers(self)
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
                get_tool_input_schema=lambda name: t.input_schema if (t := self.tools.get(name)) else None,
                on_list_tools=handlers.list_tools,
                on_call_tool=handlers.call_tool,
                on_list_resources=handlers.list_resources,
                on_list_resource_templates=handlers.list_resource_templates,
                on_read_resource=handlers.read_resource,
                on_subscribe_resource=handlers.subscribe,
                on_unsubscribe_resource=handlers.unsubscribe,
                on_list_prompts=handlers.list_prompts,
                on_get_prompt=handlers.get_prompt,
                on_completion=handlers.complete,
                on_set_logging_level=handlers.set_logging_level,
                on_subscriptions_listen=ListenHandler(s.subscription_bus),
            )
        proto.middleware = [RequestSpans(), _TrackConnections(s), _OneHandshake()]
        return proto

    @cached_property
    def init_options(self) -> InitializationOptions:
        """Initialization options advertising list-changed notifications."""
        return self.protocol_server.create_initialization_options()

    async def run_session(
        self,
        read: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
        *,
        transport: str,
        session_id: str | None = None,
    ) -> None:
        """Serve one connection over a stream pair, firing the session hooks around it."""
        async with self.session(transport=transport, session_id=session_id):
            await self.protocol_server.run(read, write, self.init_options)

    @contextlib.asynccontextmanager
    async def session(self, *, transport: str, session_id: str | None = None) -> AsyncIterator[None]:
        """Fire ``on_session_start`` on entry and ``on_session_stop`` on exit, however it exits."""
        event = SessionEvent(server=self.server, transport=transport, session_id=session_id)
        await self.kernel.emit("on_session_start", event=event)
        try:
            yield
        finally:
            # A session usually ends by cancellation: shield the hooks, or async ones never run.
            with anyio.CancelScope(shield=True):
                await self.kernel.emit("on_session_stop", event=event)


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
        if ctx.method == "initialize":
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
        self._tool_list: types.ListToolsResult | None = None

    # -- tools ---------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if self._tool_list is None:
            self._tool_list = types.ListToolsResult(
                tools=[types.Tool.model_validate(t.describe()) for t in self.app.tools.values()]
            )
        caller = _auth_info(ctx)
        if caller is None or not any(t.scopes for t in self.app.tools.values()):
            return self._tool_list
        # A caller sees only the tools its scopes allow.
        return types.ListToolsResult(
            tools=[
                listed
                for listed, t in zip(self._tool_list.tools, self.app.tools.values(), strict=True)
                if _allowed(caller, t.scopes)
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        tool = self.app.tools.get(params.name)
        caller = _auth_info(ctx)
        if tool is None or not _allowed(caller, tool.scopes):
            # A tool the caller may not use is as unknown to it as a missing one.
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name!r}")
        answering(f"tool {tool.name!r}")
        values = params.meta.get(CONTEXT_META_KEY) if params.meta else None
        tctx = ToolContext(
            server=self.server,
            tool_name=tool.name,
            call_id=str(ctx.request_id) if ctx.request_id is not None else str(uuid.uuid4()),
            request=ctx,
            values=values if isinstance(values, dict) else None,
            auth=caller,
            input_responses=params.input_responses,
            request_state=params.request_state,
        )
        try:
            outcome = await self.app.caller.call(tool, params.arguments or {}, tctx)
        except InputRequired as asked:
            return types.InputRequiredResult(
                input_requests={asked.key: asked.request}, request_state=encode_state(asked.state)
            )
        result = types.CallToolResult(
            content=outcome.content, structured_content=outcome.structured, is_error=outcome.is_error
        )
        if outcome.meta:
            result.meta = outcome.meta
        return result

    # -- resources ----------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        fixed, _ = self.server.all_resources()
        caller = _auth_info(ctx)
        fixed = {uri: r for uri, r in fixed.items() if _allowed(caller, r.scopes)}
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri,
                    name=r.name,
                    title=r.title,
                    description=r.description,
                    mime_type=r.mime_type,
                    _meta=r.meta,
                )
                for r in fixed.values()
            ]
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        _, templates = self.server.all_resources()
        caller = _auth_info(ctx)
        templates = {key: t for key, t in templates.items() if _allowed(caller, t.scopes)}
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=t.uri_template,
                    name=t.name,
                    title=t.title,
                    description=t.description,
                    mime_type=t.mime_type,
                    _meta=t.meta,
                )
                for t in templates.values()
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
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
                raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})
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
        return types.ListPromptsResult(prompts=listed)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        prompt = self._prompt(params.name, dict(params.meta) if params.meta else None)
        if not _allowed(_auth_info(ctx), prompt.scopes):
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name!r}")
        try:
            arguments = prompt.check_arguments(params.arguments)
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        rendered = await call_maybe_async(prompt.render, **arguments)
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
    if isinstance(scope, dict):
        info = scope.get(AUTH_SCOPE_KEY)
        if isinstance(info, AuthInfo):
            return info
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is None:
        return None
    return AuthInfo(
        client_id=token.client_id,
        scopes=tuple(token.scopes),
        expires_at=token.expires_at,
        subject=getattr(token, "subject", None),
    )
