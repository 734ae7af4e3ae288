"""Encoding JSON-RPC messages for a transport, so that no answer can be lost to an encoding error.

A Python ``str`` can hold what JSON cannot carry: a lone surrogate, which ``os.fsdecode``
yields for a non-UTF-8 file name and a client can send as ``"\\ud800"``. Every transport
encodes through :func:`encode_message`: a result that cannot be encoded raises an
``MCPError`` (-32603) naming the tool, which the SDK's dispatcher sends as the request's
error in place of the result; an error or notification that cannot be encoded goes out
with the offending characters replaced. The transport must encode before it changes any
state for the message (a stream closed on its last event), so the error takes the
result's path.
"""

from __future__ import annotations

import json
from contextvars import ContextVar

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, JSONRPCMessage, JSONRPCResponse
from pydantic_core import PydanticSerializationError

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
