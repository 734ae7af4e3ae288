"""What a tool sees of the request it serves: values, caller, session and the back-channel.

A tool asks for it by annotating a parameter with :class:`ToolContext`. Progress,
logging, elicitation and sampling go back to the client over the request's own
channel. Elicitation and sampling work in both protocol eras: on the 2025 handshake
era they are server-to-client requests sent mid-call; on 2026-07-28 they become an
``input_required`` result, and the tool is run again from the start once the client
answers, each question receiving its recorded answer (so a tool must ask its
questions in the same order on every run). A tool running as a task
(:mod:`toolkernel.tasks`) instead waits, its task ``input_required``, until the client
answers with ``tasks/update``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from toolkernel.auth import AuthInfo

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from toolkernel.server import MCPServer
    from toolkernel.tasks import TaskHandle

__all__ = [
    "Elicitation",
    "InputRequired",
    "LogLevel",
    "ModelPreferences",
    "RequestValues",
    "Root",
    "Sampled",
    "ToolContext",
    "encode_state",
    "state_key",
    "use_state_key",
]

M = TypeVar("M", bound=BaseModel)

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class RequestValues(MutableMapping[str, Any]):
    """Per-request key/value context (Mastra's ``RequestContext``).

    Filled from the request's ``_meta["toolkernel/context"]`` object and by middleware;
    read by tools. Values set here never leave the server.
    """

    __slots__ = ("_data",)

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(initial or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"RequestValues({self._data!r})"


class Elicitation(BaseModel, Generic[M]):
    """The user's answer to :meth:`ToolContext.elicit`: ``data`` is set only when accepted."""

    action: Literal["accept", "decline", "cancel"]
    data: M | None = None


class Sampled(BaseModel):
    """The client's LLM completion from :meth:`ToolContext.sample`."""

    model_config = ConfigDict(defer_build=True)

    text: str
    model: str
    stop_reason: str | None = None


class InputRequired(Exception):
    """Raised inside a tool on the 2026-07-28 era to ask the client for input; the kernel
    turns it into an ``input_required`` result. Tools never catch it."""

    def __init__(self, requests: dict[str, Any], state: dict[str, Any]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests
        self.state = state


_STATE_PREFIX = "tk2:"


class ToolContext:
    """The context handed to a tool that asks for one.

    Built by the kernel for every call; cheap when a tool never touches it.
    """

    def __init__(
        self,
        *,
        server: MCPServer,
        tool_name: str,
        call_id: str,
        request: ServerRequestContext[Any, Any] | Callable[[], ServerRequestContext[Any, Any]] | None = None,
        values: Mapping[str, Any] | None = None,
        auth: AuthInfo | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        task: TaskHandle | None = None,
        detach: Callable[[], Awaitable[TaskHandle]] | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.server = server
        self._client_capabilities = client_capabilities
        """What the client declared, for a task body run away from its request (a queued task)."""
        self.tool_name = tool_name
        self.call_id = call_id
        self.values = RequestValues(values)
        self.auth = auth
        # A transport's direct path passes a function making the SDK's request context: it
        # is made only for a call that reads it (most never do).
        self._made: ServerRequestContext[Any, Any] | None = None if callable(request) else request
        self._make = request if callable(request) else None
        self._asked = 0
        self._answers: dict[str, Any] = _decode_state(request_state)
        if input_responses:
            self._answers.update({k: _dump(v) for k, v in input_responses.items()})
        self._task = task
        self._detach = detach
        self._unanswered: dict[str, Any] = {}

    # -- facts about the request --------------------------------------------------

    @property
    def _request(self) -> ServerRequestContext[Any, Any] | None:
        """The SDK's context of the request behind this call, made on first use when given lazily."""
        if self._make is not None:
            self._made, self._make = self._make(), None
        return self._made

    @property
    def session_id(self) -> str | None:
        """The transport's session id; ``None`` on stdio and stateless HTTP."""
        if self._request is None:
            return None
        # SDK 2.3 keeps the connection (and its session id) private on ServerSession.
        connection = getattr(self._request.session, "_connection", None)
        return getattr(connection, "session_id", None)

    @property
    def request_id(self) -> str | int | None:
        """The JSON-RPC id of the ``tools/call`` request."""
        return self._request.request_id if self._request is not None else None

    @property
    def protocol_version(self) -> str | None:
        """The protocol version this request was made under."""
        return self._request.protocol_version if self._request is not None else None

    @property
    def headers(self) -> Mapping[str, str] | None:
        """HTTP request headers, when the transport has them (client-supplied: not identity)."""
        return getattr(self._request.request, "headers", None) if self._request is not None else None

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as; ``None`` while it runs inside its request."""
        return self._task.task_id if self._task is not None else None

    def client_supports(self, capability: Literal["elicitation", "sampling", "roots"]) -> bool:
        """Whether the client declared ``capability`` (for this request, on 2026-07-28).

        ``True`` when the call did not come over MCP at all, so in-process calls are not
        refused: :meth:`elicit` and friends fail there anyway, with a clearer message.
        """
        if self._request is None:
            caps = self._client_capabilities
            return caps is None or caps.get(capability) is not None
        connection = getattr(getattr(self._request, "session", None), "_connection", None)
        capabilities = getattr(connection, "client_capabilities", None)
        if capabilities is None:
            return False
        return getattr(capabilities, capability, None) is not None

    async def run_as_task(self) -> bool:
        """Go on as a task: the client is answered with a ``CreateTaskResult`` now and polls for the rest.

        For a tool declared ``task=..., task_start="detach"``, which asks its questions
        inside the request first (the ``input_required`` round trips of 2026-07-28) and
        then detaches. Returns ``False``, doing nothing, when the client did not opt into
        tasks or the call already runs as one.
        """
        if self._task is not None or self._detach is None:
            return False
        detach, self._detach = self._detach, None
        self._task = await detach()
        return True

    @property
    def cancel_requested(self) -> bool:
        """Whether the client sent ``notifications/cancelled`` for this call.

        The kernel also cancels the tool's task, so a tool that awaits sees
        :class:`anyio.get_cancelled_exc_class` raised; this flag serves CPU loops.
        """
        # SDK 2.3 keeps the request's dispatch context private on ServerSession.
        dctx = getattr(getattr(self._request, "session", None), "_request_outbound", None)
        event = getattr(dctx, "cancel_requested", None)
        return bool(event is not None and event.is_set())

    # -- back-channel ---------------------------------------------------------------

    async def close_sse_stream(self) -> bool:
        """End this call's SSE response now; the client reconnects and is sent the rest (SSE polling).

        For long calls over Streamable HTTP: the events sent meanwhile are stored and
        replayed when the client comes back with ``Last-Event-ID``. Only possible for a
        stateful, resumable session whose client speaks 2025-11-25 or later (it knows to
        come back); returns ``False``, doing nothing, anywhere else.
        """
        close = getattr(self._request, "close_sse_stream", None)
        if close is None:
            return False
        await close()
        return True

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress; a no-op when the client sent no progress token.

        In a task, progress becomes the task's ``statusMessage`` instead.
        """
        if self._task is not None:
            total_text = f"/{total:g}" if total is not None else ""
            await self._task.status(message or f"{progress:g}{total_text}")
            return
        if (
            self._request is None
            or not self._request.meta
            or self._request.meta.get("progress_token") is None
        ):
            return
        await self._request.session.report_progress(progress, total, message)

    async def log(self, level: LogLevel, message: str, **data: Any) -> None:
        """Send a log message to the client (and to the server's own log)."""
        from toolkernel._logging import get_logger

        get_logger("toolkernel.tool").log(_LEVELS.get(level, 20), message, tool=self.tool_name, **data)
        if self._request is None or self._task is not None:
            return
        # Handshake era: honour the level the client chose with logging/setLevel.
        from toolkernel._serving import LOG_LEVEL_STATE

        state = getattr(getattr(self._request.session, "_connection", None), "state", None)
        minimum = state.get(LOG_LEVEL_STATE) if isinstance(state, dict) else None
        if minimum in _SEVERITY and level in _SEVERITY and _SEVERITY.index(level) < _SEVERITY.index(minimum):
            return
        payload: Any = {"message": message, **data} if data else message
        await self._request.session.send_log_message(
            level=level, data=payload, logger=self.tool_name, related_request_id=self._request.request_id
        )

    async def debug(self, message: str, **data: Any) -> None:
        """``log("debug", ...)``."""
        await self.log("debug", message, **data)

    async def info(self, message: str, **data: Any) -> None:
        """``log("info", ...)``."""
        await self.log("info", message, **data)

    async def warning(self, message: str, **data: Any) -> None:
        """``log("warning", ...)``."""
        await self.log("warning", message, **data)

    async def error(self, message: str, **data: Any) -> None:
        """``log("error", ...)``."""
        await self.log("error", message, **data)

    async def elicit(self, message: str, schema: type[M], *, key: str | None = None) -> Elicitation[M]:
        """Ask the user for structured input matching ``schema`` (flat primitive fields).

        ``key`` names the question in a 2026-07-28 ``inputRequests`` map (default
        ``elicit-<n>``, counting this call's questions).
        """
        from mcp.server.elicitation import render_elicitation_schema
        from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult

        requested = render_elicitation_schema(schema)
        params = ElicitRequestFormParams(message=message, requested_schema=requested)
        raw = await self._ask(
            "elicit",
            "elicitation",
            ElicitRequest(params=params),
            lambda s: s.elicit_form(message, requested, related_request_id=self._request_id_or_none()),
            key,
        )
        result = ElicitResult.model_validate(raw)
        if result.action != "accept":
            return Elicitation[schema](action=result.action)  # type: ignore[valid-type]
        return Elicitation[schema](action="accept", data=schema.model_validate(result.content or {}))  # type: ignore[valid-type]

    async def sample(
        self,
        prompt: str | list[Any],
        *,
        max_tokens: int = 512,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: ModelPreferences | Mapping[str, Any] | None = None,
        include_context: Literal["none", "thisServer", "allServers"] | None = None,
        metadata: Mapping[str, Any] | None = None,
        key: str | None = None,
    ) -> Sampled:
        """Ask the client's LLM for a completion of ``prompt`` (a string or sampling messages).

        :param max_tokens: the most tokens the client should sample.
        :param stop_sequences: sequences that end the completion.
        :param model_preferences: hints and priorities for the client's model choice
            (:class:`ModelPreferences` or its wire dict: ``hints``, ``costPriority``,
            ``speedPriority``, ``intelligencePriority``).
        :param include_context: which MCP servers' context the client should include.
        :param metadata: provider-specific values passed through to the client.
        :param key: the question's name in a 2026-07-28 ``inputRequests`` map.
        """
        from mcp_types import (
            CreateMessageRequest,
            CreateMessageRequestParams,
            CreateMessageResult,
            SamplingMessage,
            TextContent,
        )
        from mcp_types import ModelPreferences as WirePreferences

        messages = (
            [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))]
            if isinstance(prompt, str)
            else [SamplingMessage.model_validate(m) for m in prompt]
        )
        preferences = (
            None
            if model_preferences is None
            else WirePreferences.model_validate(
                model_preferences.model_dump(by_alias=True, exclude_none=True)
                if isinstance(model_preferences, BaseModel)
                else dict(model_preferences)
            )
        )
        options: dict[str, Any] = {
            "max_tokens": max_tokens,
            "system_prompt": system_prompt,
            "temperature": temperature,
            "stop_sequences": list(stop_sequences) if stop_sequences is not None else None,
            "model_preferences": preferences,
            "include_context": include_context,
            "metadata": dict(metadata) if metadata is not None else None,
        }
        params = CreateMessageRequestParams(messages=messages, **options)
        raw = await self._ask(
            "sample",
            "sampling",
            CreateMessageRequest(params=params),
            lambda s: s.create_message(
                messages=messages, related_request_id=self._request_id_or_none(), **options
            ),
            key,
        )
        result = CreateMessageResult.model_validate(raw)
        text = getattr(result.content, "text", "")
        return Sampled(text=text, model=result.model, stop_reason=result.stop_reason)

    async def list_roots(self, *, key: str | None = None) -> list[Root]:
        """Ask the client for its roots: the directories or files it lets this server work in.

        ``key`` names the question in a 2026-07-28 ``inputRequests`` map.
        """
        from mcp_types import ListRootsRequest, ListRootsResult

        raw = await self._ask("roots", "roots", ListRootsRequest(), lambda s: s.list_roots(), key)
        listed = ListRootsResult.model_validate(raw)
        return [Root(uri=str(r.uri), name=r.name) for r in listed.roots]

    # -- internals --------------------------------------------------------------------

    def _request_id_or_none(self) -> Any:
        return self._request.request_id if self._request is not None else None

    async def _ask(
        self,
        kind: str,
        capability: Literal["elicitation", "sampling", "roots"],
        request: Any,
        send: Any,
        key: str | None,
    ) -> dict[str, Any]:
        """Ask one question on whichever channel this call has.

        A task parks until ``tasks/update`` answers; the 2025 era sends a request to the
        client mid-call; 2026-07-28 answers from the call's ``inputResponses`` or ends
        the call with an ``input_required`` result. Questions asked concurrently (from
        a task group) go out together, in one result.
        """
        if self._request is None and self._task is None:
            raise RuntimeError(f"ctx.{kind}() needs a client: this call did not come over MCP")
        self._asked += 1
        key = key or f"{kind}-{self._asked}"
        if self._request is None:  # a queued task body: its client answers through tasks/update
            if not self.client_supports(capability):
                from toolkernel.errors import missing_capability

                raise missing_capability({capability: {}}, f"ctx.{kind}() in tool {self.tool_name!r}")
            assert self._task is not None
            wire = request.model_dump(by_alias=True, mode="json", exclude_none=True)
            return await self._task.ask(key, wire)
        modern = _is_modern(self._request.protocol_version)
        if modern and not self.client_supports(capability):
            from toolkernel.errors import missing_capability

            raise missing_capability({capability: {}}, f"ctx.{kind}() in tool {self.tool_name!r}")
        if self._task is not None:
            wire = request.model_dump(by_alias=True, mode="json", exclude_none=True)
            return await self._task.ask(key, wire)
        if not modern:
            return _dump(await send(self._request.session))
        if key in self._answers:
            return dict(self._answers[key])
        import anyio

        self._unanswered[key] = request
        await anyio.lowlevel.checkpoint()  # let sibling questions of a task group join this round
        raise InputRequired(dict(self._unanswered), self._answers)


class Root(BaseModel):
    """One of the client's roots (:meth:`ToolContext.list_roots`)."""

    model_config = ConfigDict(defer_build=True)

    uri: str
    name: str | None = None


class ModelPreferences(BaseModel):
    """What the client should weigh when it picks a model to sample with."""

    model_config = ConfigDict(defer_build=True, populate_by_name=True)

    hints: list[dict[str, str]] | None = None
    cost_priority: float | None = Field(None, alias="costPriority", ge=0, le=1)
    speed_priority: float | None = Field(None, alias="speedPriority", ge=0, le=1)
    intelligence_priority: float | None = Field(None, alias="intelligencePriority", ge=0, le=1)


_SEVERITY: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""RFC 5424 levels, least severe first (the order of MCP's ``LoggingLevel``)."""

_LEVELS = {"debug": 10, "info": 20, "notice": 20, "warning": 30, "error": 40, "critical": 50}


def _is_modern(version: str | None) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return version in MODERN_PROTOCOL_VERSIONS


def _dump(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(value)


def encode_state(answers: Mapping[str, Any]) -> str:
    """Pack the answers given so far into the opaque ``request_state`` of a retry, signed.

    The signature (HMAC-SHA256 under :func:`state_key`) is what lets a retry's answers be
    trusted: the client only echoes the state back.
    """
    raw = base64.urlsafe_b64encode(json.dumps(answers, separators=(",", ":"), sort_keys=True).encode())
    return _STATE_PREFIX + raw.decode() + "." + _sign(raw)


def _sign(raw: bytes) -> str:
    import hashlib
    import hmac

    return base64.urlsafe_b64encode(hmac.new(state_key(), raw, hashlib.sha256).digest()).decode().rstrip("=")


_state_key: bytes | None = None


def use_state_key(key: bytes) -> None:
    """Sign ``requestState`` with ``key`` from now on: one every replica of a server shares
    (toolkernel-http takes it from the shared store unless ``TOOLKERNEL_STATE_SECRET`` is set)."""
    global _state_key
    _state_key = key


def state_key() -> bytes:
    """The key ``requestState`` is signed with: ``TOOLKERNEL_STATE_SECRET`` (replicas behind one
    endpoint must share it), else a random key made once per process."""
    global _state_key
    if _state_key is None:
        import os
        import secrets

        secret = os.environ.get("TOOLKERNEL_STATE_SECRET")
        _state_key = secret.encode() if secret else secrets.token_bytes(32)
    return _state_key


def _decode_state(state: str | None) -> dict[str, Any]:
    """The answers packed in ``state``; :class:`~toolkernel.errors.ProtocolError` (-32602) when it
    was not made by this server (altered, or signed with another key)."""
    if not state:
        return {}
    import hmac

    from toolkernel.errors import ProtocolError

    raw, _, signature = state.removeprefix(_STATE_PREFIX).partition(".")
    if not state.startswith(_STATE_PREFIX) or not hmac.compare_digest(signature, _sign(raw.encode())):
        raise ProtocolError(-32602, "requestState failed its integrity check: it was altered or is not ours")
    decoded = json.loads(base64.urlsafe_b64decode(raw))
    return decoded if isinstance(decoded, dict) else {}
