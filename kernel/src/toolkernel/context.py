"""What a tool sees of the request it serves: values, caller, session and the back-channel.

A tool asks for it by annotating a parameter with :class:`ToolContext`. Progress,
logging, elicitation and sampling go back to the client over the request's own
channel. Elicitation and sampling work in both protocol eras: on the 2025 handshake
era they are server-to-client requests sent mid-call; on 2026-07-28 they become an
``input_required`` result, and the tool is run again from the start once the client
answers, each question receiving its recorded answer (so a tool must ask its
questions in the same order on every run).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from toolkernel.auth import AuthInfo

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from toolkernel.server import MCPServer

__all__ = [
    "Elicitation",
    "InputRequired",
    "LogLevel",
    "RequestValues",
    "Sampled",
    "ToolContext",
    "encode_state",
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

    def __init__(self, key: str, request: Any, state: dict[str, Any]) -> None:
        super().__init__(key)
        self.key = key
        self.request = request
        self.state = state


_STATE_PREFIX = "tk1:"


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
        request: ServerRequestContext[Any, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        auth: AuthInfo | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> None:
        self.server = server
        self.tool_name = tool_name
        self.call_id = call_id
        self.values = RequestValues(values)
        self.auth = auth
        self._request = request
        self._asked = 0
        self._answers: dict[str, Any] = _decode_state(request_state)
        if input_responses:
            self._answers.update({k: _dump(v) for k, v in input_responses.items()})

    # -- facts about the request --------------------------------------------------

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
        """Report progress; a no-op when the client sent no progress token."""
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
        if self._request is None:
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

    async def elicit(self, message: str, schema: type[M]) -> Elicitation[M]:
        """Ask the user for structured input matching ``schema`` (flat primitive fields)."""
        from mcp.server.elicitation import render_elicitation_schema
        from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult

        requested = render_elicitation_schema(schema)
        params = ElicitRequestFormParams(message=message, requested_schema=requested)
        raw = await self._ask(
            "elicit",
            ElicitRequest(params=params),
            lambda s: s.elicit_form(message, requested, related_request_id=self._request_id_or_none()),
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
    ) -> Sampled:
        """Ask the client's LLM for a completion of ``prompt`` (a string or sampling messages)."""
        from mcp_types import (
            CreateMessageRequest,
            CreateMessageRequestParams,
            CreateMessageResult,
            SamplingMessage,
            TextContent,
        )

        messages = (
            [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))]
            if isinstance(prompt, str)
            else [SamplingMessage.model_validate(m) for m in prompt]
        )
        params = CreateMessageRequestParams(
            messages=messages, max_tokens=max_tokens, system_prompt=system_prompt, temperature=temperature
        )
        raw = await self._ask(
            "sample",
            CreateMessageRequest(params=params),
            lambda s: s.create_message(
                messages=messages,
                max_tokens=max_tokens,
                system_prompt=system_prompt,
                temperature=temperature,
                related_request_id=self._request_id_or_none(),
            ),
        )
        result = CreateMessageResult.model_validate(raw)
        text = getattr(result.content, "text", "")
        return Sampled(text=text, model=result.model, stop_reason=result.stop_reason)

    # -- internals --------------------------------------------------------------------

    def _request_id_or_none(self) -> Any:
        return self._request.request_id if self._request is not None else None

    async def _ask(self, kind: str, request: Any, send: Any) -> dict[str, Any]:
        """Ask one question on whichever channel this request's era has."""
        if self._request is None:
            raise RuntimeError(f"ctx.{kind}() needs a client: this call did not come over MCP")
        self._asked += 1
        if not _is_modern(self._request.protocol_version):
            return _dump(await send(self._request.session))
        key = f"{kind}-{self._asked}"
        if key in self._answers:
            return dict(self._answers[key])
        raise InputRequired(key, request, self._answers)


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
    """Pack the answers given so far into the opaque ``request_state`` of a retry."""
    raw = json.dumps(answers, separators=(",", ":"), sort_keys=True).encode()
    return _STATE_PREFIX + base64.urlsafe_b64encode(raw).decode()


def _decode_state(state: str | None) -> dict[str, Any]:
    if not state or not state.startswith(_STATE_PREFIX):
        return {}
    try:
        decoded = json.loads(base64.urlsafe_b64decode(state[len(_STATE_PREFIX) :]))
    except (ValueError, json.JSONDecodeError):
        return {}
    return decoded if isinstance(decoded, dict) else {}
