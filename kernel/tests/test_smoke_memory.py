"""The in-memory client reaches a server through the full kernel path, in both eras."""

import pytest

from toolkernel import MCPServer
from toolkernel.testing import connect_in_memory


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_echo_round_trip(kernel, mode):
    server = MCPServer("echo", "1.0.0")

    @server.tool
    def echo(text: str) -> str:
        """Return the text."""
        return text

    async with connect_in_memory(server, kernel=kernel, mode=mode) as client:
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi"})
    assert [t.name for t in tools.tools] == ["echo"]
    assert result.content[0].text == "hi"
    assert result.is_error is False
