"""A result JSON cannot encode (a lone surrogate) is answered with -32603 naming the tool, in every mode.

A lone surrogate reaches a result from ``os.fsdecode`` of a non-UTF-8 file name, or from
a client's own ``"\\ud800"`` in the arguments. It must cost that one request an error,
never a hang, a plain-text 500 or an aborted connection, and the session must go on.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from toolkernel import Kernel, MCPServer
from toolkernel_http import asgi_app

from ._raw import answer, open_session, post
from .conftest import serving

pytestmark = pytest.mark.anyio
TIMEOUT_S = 30.0

MODES = {
    "stateful-sse": {},
    "stateful-json": {"json_response": True},
    "stateless-sse": {"stateless": True},
    "stateless-json": {"stateless": True, "json_response": True},
}


CLIENT_SURROGATE = (
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\\ud800"}}}'
)


def _server() -> MCPServer:
    server = MCPServer("surrogates", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def listing() -> str:
        """A file name decoded with surrogateescape, as os.fsdecode gives for non-UTF-8 bytes."""
        return "report-\udcff.txt"

    @server.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


def _call(request_id: int, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments or {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@pytest.mark.parametrize("mode", list(MODES))
async def test_unencodable_result_is_an_internal_error_naming_the_tool(mode: str) -> None:
    with anyio.fail_after(TIMEOUT_S):
        async with (
            serving(asgi_app(_server(), **MODES[mode])) as base,
            httpx.AsyncClient(timeout=10) as client,
        ):
            url = f"{base}/mcp"
            session = await open_session(client, url)
            response = await post(client, url, _call(1, "listing"), session)
            error = answer(response, 1)["error"]
            # The client's own lone surrogate: the direct path (stateless) parses it and must
            # refuse the result; the session's strict parser refuses the body (-32700, id null).
            echoed = await post(client, url, CLIENT_SURROGATE, session)
            echo_error = answer(echoed, 2 if "stateless" in mode else None)["error"]
            after = await post(client, url, _call(3, "echo", {"text": "still here"}), session)
    assert response.status_code == 200
    assert error["code"] == -32603
    assert "'listing'" in error["message"]
    assert "JSON" in error["message"]
    if "stateless" in mode:
        assert echo_error["code"] == -32603
        assert "'echo'" in echo_error["message"]
    else:
        assert echoed.status_code == 400
        assert echo_error["code"] == -32700
    assert answer(after, 3)["result"]["content"][0]["text"] == "still here"
