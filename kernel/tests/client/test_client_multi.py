"""Several servers at once: server-everything, a toolkernel server and an ``mcp`` SDK server."""

from __future__ import annotations

from typing import Any

import pytest

from toolkernel.client import MCPClient, MemoryServerStore, StateChange, ToolError
from toolkernel.errors import ConfigError, MCPClientError

from .conftest import echo_stdio, everything_stdio, sdk_stdio

pytestmark = [pytest.mark.node, pytest.mark.timeout(180)]


def three_servers() -> dict[str, Any]:
    return {"everything": everything_stdio(), "echo": echo_stdio(), "sdk": sdk_stdio()}


@pytest.mark.anyio
async def test_colliding_tool_names_are_namespaced_and_each_reaches_its_server(client_kernel: Any) -> None:
    config = {"servers": three_servers(), "connect_timeout": 60}
    async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"everything_echo", "echo_echo", "sdk_echo", "sdk_pid"} <= names
        assert (await client.call_tool("everything_echo", {"message": "x"})).text == "Echo: x"
        assert (await client.call_tool("echo_echo", {"text": "x"})).text == "x"
        assert (await client.call_tool("sdk_echo", {"message": "x"})).text == "sdk: x"
        toolsets = await client.list_toolsets()
        assert sorted(toolsets) == ["echo", "everything", "sdk"]
        assert [t.name for t in toolsets["echo"]] == ["echo_echo"]
        servers = client.get_servers()
        assert {name: s.state for name, s in servers.items()} == dict.fromkeys(servers, "ready")
        assert servers["sdk"].instructions == "A test peer written with the mcp SDK."
        assert servers["echo"].protocol_version == "2026-07-28"
        assert servers["everything"].protocol_version == "2025-11-25"


@pytest.mark.anyio
async def test_without_server_prefix_only_colliding_names_get_one(client_kernel: Any) -> None:
    config = {
        "servers": {"echo": echo_stdio(), "sdk": sdk_stdio()},
        "prefix_tool_name_with_server_name": False,
        "additional_tool_name_prefix": "mcp",
        "connect_timeout": 60,
    }
    async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"mcp_echo_echo", "mcp_sdk_echo", "mcp_pid", "mcp_hang"} <= names
        assert "mcp_echo" not in names
        assert (await client.call_tool("mcp_sdk_echo", {"message": "y"})).text == "sdk: y"
        assert (await client.call_tool("mcp_echo_echo", {"text": "y"})).text == "y"
        assert client.resolve_tool("mcp_pid").server == "sdk"


@pytest.mark.anyio
async def test_long_names_are_cut_to_64_characters_and_still_reach_the_tool(client_kernel: Any) -> None:
    config = {"servers": {"sdk": sdk_stdio()}, "additional_tool_name_prefix": "p" * 60, "connect_timeout": 60}
    async with MCPClient(config, kernel=client_kernel, store=MemoryServerStore()) as client:
        tools = {t.original_name: t for t in await client.list_tools()}
        name = tools["echo"].name
        assert len(name) == 64
        assert name != tools["pid"].name
        assert (await client.call_tool(name, {"message": "long"})).text == "sdk: long"


@pytest.mark.anyio
async def test_add_and_remove_servers_at_run_time(client_kernel: Any) -> None:
    changes: list[StateChange] = []
    async with MCPClient(
        {"servers": {"sdk": sdk_stdio()}, "connect_timeout": 60},
        kernel=client_kernel,
        store=MemoryServerStore(),
    ) as client:
        client.on_state_change(changes.append)
        snap = await client.add_server("echo", echo_stdio())
        assert snap.state == "ready"
        assert [t.name for t in snap.tools] == ["echo"]
        assert "echo_echo" in {t.name for t in await client.list_tools()}
        with pytest.raises(
            ConfigError, match=r"servers\.echo: a server with this name is already registered"
        ):
            await client.add_server("echo", echo_stdio())
        await client.remove_server("echo")
        assert "echo" not in client.get_servers()
        assert "echo_echo" not in {t.name for t in await client.list_tools()}
        with pytest.raises(ToolError, match="unknown tool 'echo_echo'"):
            await client.call_tool("echo_echo", {"text": "gone"})
        with pytest.raises(MCPClientError, match="no such server"):
            await client.read_resource("echo", "x://y")
    # Events are delivered in order by one task; the last ones may still be in flight at close.
    echo = [c.new for c in changes if c.server == "echo"]
    assert echo[:4] == ["connecting", "connected", "discovering", "ready"]
    assert echo[-1] == "closed"


@pytest.mark.anyio
async def test_a_server_that_fails_to_load_is_left_out_or_raises(client_kernel: Any) -> None:
    servers = {"sdk": sdk_stdio(), "broken": {"command": "/nonexistent/mcp-server"}}
    async with MCPClient({"servers": servers}, kernel=client_kernel, store=MemoryServerStore()) as client:
        assert {t.server for t in await client.list_tools()} == {"sdk"}
        broken = client.get_servers()["broken"]
        assert broken.state == "failed"
        assert broken.error is not None
        assert "command not found" in broken.error
    strict = MCPClient(
        {"servers": servers, "throw_on_load_error": True}, kernel=client_kernel, store=MemoryServerStore()
    )
    with pytest.raises(MCPClientError, match=r"broken: could not be loaded: stdio: command not found"):
        async with strict:
            pass
