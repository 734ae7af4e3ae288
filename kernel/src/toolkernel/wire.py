"""What transports share about the wire: encoding messages, and answering frames that are not messages.

A Python ``str`` can hold what JSON cannot carry: a lone surrogate, which ``os.fsdecode``
yields for a non-UTF-8 file name and a client can send as ``"\\ud800"``. Every transport
encodes through :func:`encode_message`: a result that cannot be encoded raises an
``MCPError`` (-32603) naming the tool, which the SDK's dispatcher sends as the request's
error in place of the result; an error or notification that cannot be encoded goes out
with the offending characters replaced. The transport must encode before it changes any
state for the message (a stream closed on its last event), so the error takes the
result's path.

A frame the SDK's strict parser refuses is answered as JSON-RPC 2.0 asks, by
:func:`refusal`: ``-32700`` (id null) when it is not JSON, ``-32600`` with the request's
id when that id is readable and valid, with id null when it is not; malformed responses
get silence, since answering a response could make two peers loop. A request whose id
has a type MCP does not allow (a fraction, ``null``, ``true``, an object, ``1e400``)
validates as a notification, so transports check notifications with
:func:`misplaced_id` before dispatching them.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json

__all__ = [
    "answering",
    "encode_message",
    "encode_result",
    "misplaced_id",
    "refusal",
    "too_long",
    "valid_id",
]

_answering: ContextVar[str | None] = ContextVar("toolkernel_answering", default=None)


def answering(what: str) -> None:
    """Name what the current request runs (``tool 'x'``), for the error if its result cannot be encoded.

    The handler calls this in the request's task; the dispatcher encodes the result in the
    same task, so the name is there when :func:`encode_message` needs it.
    """
    _answering.set(what)


def encode_message(message: JSONRPCMessage) -> bytes:
    """``message`` as compact JSON bytes (UTF-8), as every transport writes it.

    :raises MCPError: (``INTERNAL_ERROR``) when ``message`` is a result that JSON cannot
        encode; its message names the tool (or the request id) and the reason.
    """
    try:
        return message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)
    except PydanticSerializationError as exc:
        if isinstance(message, JSONRPCResponse):
            what = _answering.get() or f"request {message.id!r}"
            raise MCPError(INTERNAL_ERROR, f"the result of {what} cannot be encoded as JSON: {exc}") from None
        # An error or a notification: send it with what cannot be encoded replaced.
        data = message.model_dump(mode="python", by_alias=True, exclude_unset=True)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")


def encode_result(request_id: int | str, result: dict[str, Any]) -> bytes:
    """The response carrying ``result``: ``encode_message(JSONRPCResponse(...))``'s bytes, without the model.

    :raises MCPError: as :func:`encode_message`, when ``result`` cannot be encoded.
    """
    try:
        return to_json({"jsonrpc": "2.0", "id": request_id, "result": result}, inf_nan_mode="null")
    except PydanticSerializationError:
        return encode_message(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))


def valid_id(value: Any) -> bool:
    """Whether ``value`` is a request id MCP allows: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def refusal(frame: bytes | str, exc: ValidationError) -> JSONRPCError | None:
    """The error answering ``frame``, which the strict parser refused with ``exc``; ``None``: stay silent."""
    problems = exc.errors(include_url=False)
    invalid_json = [p["msg"] for p in problems if p["type"] == "json_invalid"]
    if invalid_json:
        return _error(None, PARSE_ERROR, f"Parse error: {invalid_json[0]}")
    try:
        decoded = json.loads(frame)
    except (ValueError, RecursionError):  # not JSON to this parser either (nesting too deep)
        return _error(None, PARSE_ERROR, "Parse error: the message cannot be decoded")
    if not isinstance(decoded, dict):
        what = "a batch (JSON array)" if isinstance(decoded, list) else f"a JSON {type(decoded).__name__}"
        return _error(
            None, INVALID_REQUEST, f"Invalid Request: expected a JSON-RPC message object, got {what}"
        )
    if "method" not in decoded and ("result" in decoded or "error" in decoded):
        return None  # a malformed response: answering it could start a loop between peers
    request_id = decoded.get("id")
    if "id" in decoded and not valid_id(request_id):
        return _bad_id(request_id)
    return _error(request_id, INVALID_REQUEST, f"Invalid Request: {_first_problem(problems)}")


def misplaced_id(frame: bytes | str) -> JSONRPCError | None:
    """The error for a "notification" that carries an ``id``: a request whose id is invalid.

    Call it for frames that validated as notifications; it decodes ``frame`` only when the
    text ``"id"`` occurs in it.
    """
    marker = b'"id"' if isinstance(frame, bytes) else '"id"'
    if marker not in frame:  # type: ignore[operator]
        return None
    try:
        decoded = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    if isinstance(decoded, dict) and "id" in decoded:
        return _bad_id(decoded["id"])
    return None


def too_long(limit: int) -> JSONRPCError:
    """The error answering a message over ``limit`` bytes, dropped unread (so its id is unknown)."""
    return _error(None, INVALID_REQUEST, f"Invalid Request: message longer than {limit} bytes was dropped")


def _bad_id(value: Any) -> JSONRPCError:
    shown = json.dumps(value)[:40] if not isinstance(value, float) else repr(value)
    return _error(None, INVALID_REQUEST, f"Invalid Request: id must be a string or an integer, got {shown}")


def _first_problem(problems: list[Any]) -> str:
    """The first validation problem, as ``field: message``, from the request's view when there is one."""
    for problem in problems:
        loc = [str(part) for part in problem["loc"]]
        if loc and loc[0] == "JSONRPCRequest":
            return f"{'.'.join(loc[1:]) or 'message'}: {problem['msg']}"
    return "not a JSON-RPC 2.0 message"


def _error(request_id: Any, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
