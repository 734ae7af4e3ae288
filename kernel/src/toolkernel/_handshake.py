"""A client's first request answered without the ``mcp`` SDK, byte for byte as the SDK answers it.

Importing the SDK (its pydantic protocol models for every protocol version) is most of a
stdio server's cold start, yet the answer to a client's first request depends only on who
the server is: ``initialize`` in the handshake era, ``server/discover`` in 2026-07-28's.
So the stdio transport answers a plain one of those from here before it loads the SDK,
then replays the request through the SDK and drops the SDK's answer after checking it
equals the one sent (see :class:`toolkernel._builtin._stdio_transport.LineWriteStream`).

Only a frame the SDK is certain to accept is answered: one JSON object, strict UTF-8,
exactly ``jsonrpc``/``id``/``method``/``params``, and params whose every field has a shape
the SDK's models take. Anything else (a batch, a notification, another method, a field of
another type, an unknown capability, a duplicate key, an escaped surrogate, ...) gives
``None``, and the frame takes the SDK's path as before. The capabilities are those of
:func:`toolkernel._serving.protocol_server_for`'s handlers, as each era's result model
sieves them (the handshake era's has no ``extensions``); tests compare both paths over
real pipes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel.server import MCPServer

__all__ = [
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "MODERN_PROTOCOL_VERSIONS",
    "early_answer",
]

HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The versions the SDK negotiates through ``initialize`` (``mcp_types.version``; a test pins them)."""
LATEST_HANDSHAKE_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]
"""What the SDK answers a client asking for a version it does not know, 2026-07-28 included."""
MODERN_PROTOCOL_VERSIONS = ("2026-07-28",)
"""The versions of the per-request envelope era, whose first request is ``server/discover``."""

_ENVELOPE = "io.modelcontextprotocol/"
_VERSION_KEY, _INFO_KEY, _CAPABILITIES_KEY = (
    f"{_ENVELOPE}protocolVersion",
    f"{_ENVELOPE}clientInfo",
    f"{_ENVELOPE}clientCapabilities",
)

_CHANGE_CAPABILITIES = (
    '"logging":{},"prompts":{"listChanged":true},'
    '"resources":{"listChanged":true,"subscribe":true},"tools":{"listChanged":true}'
)
"""What every toolkernel server advertises after ``completions`` (and ``extensions``) over a
session with a channel for notifications."""

_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_INT64 = 1 << 63


class _Unsure(Exception):
    """The frame might not be what the SDK accepts as it is: leave it to the SDK."""


def early_answer(
    frame: bytes, server: MCPServer, extensions: Mapping[str, Mapping[str, Any]]
) -> tuple[int | str, bytes] | None:
    """``(id, answer line)`` when ``frame`` is a plain ``initialize`` or ``server/discover``, else ``None``.

    The answer is the JSON-RPC response line (no newline) that the SDK would write for the
    same frame as the first message of a stdio session of ``server``, which advertises
    ``extensions`` (where the era's result carries them).
    """
    try:
        request_id, method, params = _request(frame)
        if method == "initialize":
            version = _initialize_params(params)
            result = _initialize_result(version, server)
        elif method == "server/discover":
            _discover_params(params)
            result = _discover_result(server, extensions)
        else:
            return None
        return request_id, f'{{"jsonrpc":"2.0","id":{_dumps(request_id)},"result":{result}}}'.encode()
    except (_Unsure, UnicodeEncodeError):  # a lone surrogate in a server field: the SDK's to report
        return None


def _request(frame: bytes) -> tuple[int | str, str, dict[str, Any]]:
    """The id, method and params of a plain JSON-RPC request; :class:`_Unsure` otherwise."""
    try:
        text = frame.decode("utf-8")  # strict: no BOM skipping, no replacement
    except UnicodeDecodeError:
        raise _Unsure from None
    if _ESCAPED_SURROGATE.search(text):
        raise _Unsure
    try:
        message = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError, _Unsure):
        raise _Unsure from None
    if not isinstance(message, dict) or message.keys() != {"jsonrpc", "id", "method", "params"}:
        raise _Unsure
    request_id, method, params = message["id"], message["method"], message["params"]
    if message["jsonrpc"] != "2.0" or not isinstance(method, str) or not isinstance(params, dict):
        raise _Unsure
    if not (isinstance(request_id, str) or (type(request_id) is int and -_INT64 <= request_id < _INT64)):
        raise _Unsure
    return request_id, method, params


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Unsure
    return result


def _no_constant(name: str) -> Any:
    raise _Unsure  # NaN / Infinity: Python's json takes them, JSON (and the SDK) does not


def _initialize_params(params: dict[str, Any]) -> str:
    """The protocol version an ``initialize`` asks for, its params being of shapes the SDK takes."""
    if params.keys() != {"protocolVersion", "capabilities", "clientInfo"}:
        raise _Unsure
    version = params["protocolVersion"]
    if not isinstance(version, str):
        raise _Unsure
    _check_capabilities(params["capabilities"])
    _check_client_info(params["clientInfo"])
    return version


def _discover_params(params: dict[str, Any]) -> None:
    """A ``server/discover`` whose only param is a complete envelope at a version the SDK serves."""
    if params.keys() != {"_meta"} or not isinstance(meta := params["_meta"], dict):
        raise _Unsure
    if not {_VERSION_KEY, _CAPABILITIES_KEY} <= meta.keys() <= {_VERSION_KEY, _CAPABILITIES_KEY, _INFO_KEY}:
        raise _Unsure
    if meta[_VERSION_KEY] not in MODERN_PROTOCOL_VERSIONS:
        raise _Unsure
    _check_capabilities(meta[_CAPABILITIES_KEY])
    if _INFO_KEY in meta:
        _check_client_info(meta[_INFO_KEY])


_CAPABILITY_FIELDS: dict[str, tuple[str, ...]] = {
    # capability -> the sub-fields whose values the SDK's models take as any object
    "sampling": ("context", "tools"),
    "elicitation": ("form", "url"),
}


def _check_capabilities(capabilities: Any) -> None:
    """Client capabilities in the shapes the SDK's ``ClientCapabilities`` models (every era) take."""
    if not isinstance(capabilities, dict):
        raise _Unsure
    for name, value in capabilities.items():
        if not isinstance(value, dict):
            raise _Unsure
        if name in ("experimental", "extensions"):  # dict[str, dict[str, Any]]
            if not all(isinstance(v, dict) for v in value.values()):
                raise _Unsure
        elif name == "roots":
            if value.keys() - {"listChanged"} or not isinstance(value.get("listChanged", False), bool):
                raise _Unsure
        elif name in _CAPABILITY_FIELDS:
            allowed = _CAPABILITY_FIELDS[name]
            if value.keys() - set(allowed) or not all(isinstance(v, dict) for v in value.values()):
                raise _Unsure
        else:
            raise _Unsure


def _check_client_info(info: Any) -> None:
    """Client info with a string name and version and only string optional fields."""
    if not isinstance(info, dict) or not {"name", "version"} <= info.keys():
        raise _Unsure
    if info.keys() - {"name", "version", "title", "description", "websiteUrl"}:
        raise _Unsure
    if not all(isinstance(v, str) for v in info.values()):
        raise _Unsure


def _initialize_result(requested: str, server: MCPServer) -> str:
    """``InitializeResult`` with fields in the order, and strings escaped as, the SDK writes them."""
    negotiated = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    info = _server_info(server)
    result = f'{{"capabilities":{{"completions":{{}},{_CHANGE_CAPABILITIES}}}'
    if server.instructions is not None:
        result += f',"instructions":{_dumps(server.instructions)}'
    result += f',"protocolVersion":{_dumps(negotiated)},"serverInfo":'
    keys = ("description", "name", "title", "version", "websiteUrl")  # the handshake-era model's order
    return result + _dumps({k: info[k] for k in keys if info[k] is not None}) + "}"


def _discover_result(server: MCPServer, extensions: Mapping[str, Mapping[str, Any]]) -> str:
    """``DiscoverResult`` as the SDK's 2026-07-28 serializer writes it, ``serverInfo`` stamp last."""
    info = _server_info(server)
    capabilities = '{"completions":{}'
    if extensions:
        capabilities += f',"extensions":{_dumps(extensions)}'
    result = f'{{"cacheScope":"private","capabilities":{capabilities},{_CHANGE_CAPABILITIES}}}'
    if server.instructions is not None:
        result += f',"instructions":{_dumps(server.instructions)}'
    result += f',"resultType":"complete","supportedVersions":{_dumps(list(MODERN_PROTOCOL_VERSIONS))}'
    keys = ("name", "title", "version", "description", "websiteUrl")  # the SDK's Implementation order
    stamp = _dumps({k: info[k] for k in keys if info[k] is not None})
    return result + f',"ttlMs":0,"_meta":{{"{_ENVELOPE}serverInfo":{stamp}}}}}'


def _server_info(server: MCPServer) -> dict[str, str | None]:
    """The server's identity fields; :class:`_Unsure` when one is not what the SDK's models keep as is."""
    info = {
        "description": server.description,
        "name": server.name,
        "title": server.title,
        "version": server.version,
        "websiteUrl": server.website_url,
    }
    if not all(v is None or type(v) is str for v in (*info.values(), server.instructions)):
        raise _Unsure
    return info


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
