"""Plain handshake-era requests answered from the kernel's own registry, as the SDK's runner answers them.

The SDK's runner wraps every request in a request context, a session, its middleware
chain, two validations of the params and one of the result, and a dump of the result
model: for a stateless ``tools/call`` it costs more than the call itself. A transport
that serves one request at a time on a handshake-era version (stateless HTTP) can ask
:meth:`DirectAnswers.plan` for a direct answer instead. One is given only when nothing
that the runner would do can differ from doing without it:

* the server's SDK middleware and the method's handler are the ones the kernel installed
  (a span per request when tracing is on is the runner's job: no direct answer then),
  and no cache hint is configured for the method;
* the params have the plain shape the SDK's models take unchanged: for ``tools/call``
  only ``name`` (a string) and ``arguments`` (an object), no ``_meta``, no task tool;
  for ``tools/list`` and ``ping`` none at all (no cursor), and no page size.

The call then goes through the kernel's call path exactly as from the SDK's handler
(lifecycle hooks, tool middleware, input validation, output checks, scopes); the
request context a tool may read is made only when it reads it. The result is the wire
dict the runner would send: a plain text result is built directly, anything else is
shaped by the runner's own serializer. Everything else gets ``None``: the transport
takes the SDK's path, which answers it as before. Tests send the same requests both ways
and compare the bytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import MCPError

from toolkernel._handshake import HANDSHAKE_PROTOCOL_VERSIONS
from toolkernel._serving import _allowed, _call_result, auth_of_scope, connection_of
from toolkernel._telemetry import tracing_enabled
from toolkernel.auth import AuthInfo
from toolkernel.context import ToolContext
from toolkernel.wire import answering

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from toolkernel._serving import ProtocolServer, _Handlers
    from toolkernel.middleware import ToolOutcome

__all__ = [
    "Answer",
    "DirectAnswers",
    "RequestContext",
]

RequestContext = Callable[[], "ServerRequestContext[Any, Any]"]
"""Makes the SDK's context of the request being answered; called only if the call reads it."""

Answer = Callable[[RequestContext], Awaitable[dict[str, Any]]]
"""A planned direct answer: run it with the request's context maker to get the result's wire dict."""

_METHODS = ("tools/call", "tools/list", "ping")


class DirectAnswers:
    """The direct answers of one SDK server built by :func:`toolkernel._serving.protocol_server_for`."""

    def __init__(self, server: ProtocolServer, handlers: _Handlers) -> None:
        self._server = server
        self._handlers = handlers
        self._app = handlers.app
        self._middleware = list(server.middleware)
        self._entries = {method: server.get_request_handler(method) for method in _METHODS}
        # The runner's result shaping needs only the server (cache hints, the serverInfo stamp).
        self._shaper = ServerRunner(server, connection=None, lifespan_state=None)  # type: ignore[arg-type]
        self._lists: dict[str, tuple[Any, dict[str, Any]]] = {}

    def plan(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        version: str,
        request_id: int | str,
        scope: dict[str, Any] | None,
    ) -> Answer | None:
        """The direct answer to request ``request_id``, or ``None`` when only the SDK's runner may answer it.

        ``scope``: the ASGI scope of the HTTP request carrying it (its verified caller is read
        from there as the handlers read it), ``None`` off HTTP. Nothing runs until the answer
        is awaited.
        """
        server = self._server
        if (
            version not in HANDSHAKE_PROTOCOL_VERSIONS
            or server.middleware != self._middleware
            or server._request_handlers.get(method) is not self._entries.get(method)
            or method in server.cache_hints
            or tracing_enabled()
        ):
            return None
        auth = None if scope is None else auth_of_scope(scope)
        if method == "tools/call":
            return self._plan_call(params, version, request_id, auth)
        if params:  # tools/list (a cursor, _meta) and ping (_meta): the SDK's path
            return None
        if method == "tools/list":
            return self._plan_list(version, auth)
        if method == "ping":
            return self._ping(version)
        return None

    def _plan_call(
        self, params: Mapping[str, Any] | None, version: str, request_id: int | str, auth: AuthInfo | None
    ) -> Answer | None:
        if params is None or not 1 <= len(params) <= 2:
            return None
        name = params.get("name")
        arguments = params.get("arguments", _ABSENT)
        if not isinstance(name, str) or len(params) != (1 if arguments is _ABSENT else 2):
            return None
        if arguments is _ABSENT:
            arguments = {}
        elif type(arguments) is not dict:
            return None
        tool = self._app.tools.get(name)
        if tool is not None and tool.task is not None:
            return None  # what a task tool answers depends on the client's capabilities: the SDK's path
        handlers, shaper = self._handlers, self._shaper

        async def answer(context: RequestContext) -> dict[str, Any]:
            if tool is None or not _allowed(auth, tool.scopes):
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name!r}")
            answering(f"tool {tool.name!r}")
            tctx = ToolContext(
                server=handlers.server,
                tool_name=tool.name,
                call_id=str(request_id),
                request=lambda: self._tracked(context()),
                auth=auth,
            )
            outcome = await handlers.run_tool(tool, dict(arguments), tctx)
            if isinstance(outcome, types.InputRequiredResult):
                return shaper._serialize("tools/call", version, outcome)
            plain = _plain_call_result(outcome)
            if plain is not None:
                return plain
            return shaper._serialize("tools/call", version, _call_result(outcome))

        return answer

    def _plan_list(self, version: str, auth: AuthInfo | None) -> Answer | None:
        tools = self._app.tools
        if self._handlers.server.page_size is not None or (
            auth is not None and any(t.scopes for t in tools.values())
        ):
            return None
        cached = self._lists.get(version)
        if cached is None or cached[0] is not tools:
            listed = types.ListToolsResult(tools=self._handlers.listed(tools), next_cursor=None)
            cached = self._lists[version] = (tools, self._shaper._serialize("tools/list", version, listed))
        result = cached[1]

        async def answer(context: RequestContext) -> dict[str, Any]:
            return result

        return answer

    def _ping(self, version: str) -> Answer:
        shaper = self._shaper

        async def answer(context: RequestContext) -> dict[str, Any]:
            return shaper._serialize("ping", version, types.EmptyResult())

        return answer

    def _tracked(self, ctx: ServerRequestContext[Any, Any]) -> ServerRequestContext[Any, Any]:
        """What the kernel's connection-tracking middleware does for a request, once its context exists."""
        connection = connection_of(ctx)
        if connection is not None:
            self._handlers.server._live.add(connection)
        return ctx


_ABSENT: Any = object()
_TEXT_TYPE = types.TextContent


def _plain_call_result(outcome: ToolOutcome) -> dict[str, Any] | None:
    """The wire dict of a ``tools/call`` outcome of plain text blocks, as the runner shapes it.

    The runner dumps the result model, validates it against the era's result model and dumps
    that again (a text block's ``text`` comes before its ``type``). For text blocks with no
    annotations or ``_meta``, and no structured content or ``_meta`` on the result (whose
    values the dumps may convert), that is this dict; ``None`` for any other outcome.
    """
    if outcome.structured is not None or outcome.meta or type(outcome.is_error) is not bool:
        return None
    blocks = []
    for block in outcome.content:
        if type(block) is not _TEXT_TYPE or block.annotations is not None or block.meta is not None:
            return None
        blocks.append({"text": block.text, "type": "text"})
    return {"content": blocks, "isError": outcome.is_error}
