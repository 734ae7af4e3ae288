"""The plugin's own tests, using the fixtures of toolkernel's testing kit."""

import pytest
from toolkernel import MCPServer
from toolkernel.testing import connect_in_memory

from toolkernel_hello import plugin


@pytest.mark.anyio
async def test_hello_is_offered_by_every_server(kernel_with):
    server = MCPServer("any-server")
    async with connect_in_memory(server, kernel=kernel_with(plugin)) as client:
        tools = await client.list_tools()
        result = await client.call_tool("hello", {"name": "Ada"})
    assert "hello" in [t.name for t in tools.tools]
    assert result.content[0].text == "Hello, Ada!"


@pytest.mark.anyio
async def test_the_greeting_is_a_setting(kernel_with):
    kernel = kernel_with(plugin, settings={"hello": {"greeting": "Hi"}})
    server = MCPServer("any-server", kernel=kernel)
    assert await server.execute_tool("hello", {"name": "Ada"}) == "Hi, Ada!"


def test_the_plugin_lists_its_hooks(kernel_with):
    info = {p.name: p for p in kernel_with(plugin).plugins()}[plugin.__name__]
    assert info.hooks == ["register_settings", "register_tools"]
