"""``toolkernel.wire.encode_result`` writes the bytes ``encode_message`` writes for the same response."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, JSONRPCResponse

from toolkernel.wire import answering, encode_message, encode_result

RESULTS: list[dict[str, Any]] = [
    {},
    {"content": [{"text": 'h\u00e9 \u2603 \U0001f600 "q" \\ \n', "type": "text"}], "isError": False},
    {"structuredContent": {"f": 1.5, "big": 10**30, "e": 1e300, "nan": float("nan"), "n": None, "t": (1, 2)}},
    {"_meta": {"k": [True, None, -0.0]}, "tools": [{"name": "x", "inputSchema": {"type": "object"}}]},
]


@pytest.mark.parametrize("request_id", [0, -7, 2**62, "abc", "\u00e9"])
@pytest.mark.parametrize("result", RESULTS)
def test_encode_result_equals_encode_message(request_id: Any, result: dict[str, Any]) -> None:
    expected = encode_message(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))
    assert encode_result(request_id, result) == expected


def test_an_unencodable_result_raises_the_error_naming_the_tool() -> None:
    answering("tool 'bad'")
    with pytest.raises(MCPError) as raised:
        encode_result(3, {"content": [{"text": "\ud800", "type": "text"}]})
    assert raised.value.error.code == INTERNAL_ERROR
    assert "tool 'bad'" in raised.value.error.message
