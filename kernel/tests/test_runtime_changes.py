"""A tool, a resource and a prompt added to a server while it serves are listed and usable
by a connected client once it is told the lists changed, in both protocol eras."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from toolkernel import MCPServer, Prompt, Resource
from toolkernel.testing import connect_in_memory

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def _server(kernel: Any) -> MCPServer:
    server = MCPServer("live", kernel=kernel)

    @server.tool
    def first() -> str:
        """There from the start."""
        return "first"

    return server


async def _change(server: MCPServer) -> None:
    """What an application does at run time: add one of each, then say so."""

    def added() -> str:
        """Added while serving."""
        return "added ran"

    server.add_tool(added)
    server.add_resource(Resource(uri="mem://added", name="added", read=lambda: "added content"))
    server.add_prompt(Prompt(name="added_prompt", render=lambda: "added prompt"))
    for kind in ("tools", "resources", "prompts"):
        await server.notify_list_changed(kind)  # type: ignore[arg-type]


async def _check_listed_and_usable(client: Any) -> None:
    assert "added" in [t.name for t in (await client.list_tools()).tools]
    assert "mem://added" in [str(r.uri) for r in (await client.list_resources()).resources]
    assert "added_prompt" in [p.name for p in (await client.list_prompts()).prompts]
    assert (await client.call_tool("added", {})).content[0].text == "added ran"
    assert (await client.read_resource("mem://added")).contents[0].text == "added content"
    assert (await client.get_prompt("added_prompt", {})).messages[0].content.text == "added prompt"


@pytest.mark.anyio
async def test_added_at_run_time_handshake_era(kernel):
    """2025 era: the client sees list_changed notifications, then the new items."""
    server = _server(kernel)
    heard: set[str] = set()
    all_heard = anyio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        changed = (
            types.ToolListChangedNotification,
            types.ResourceListChangedNotification,
            types.PromptListChangedNotification,
        )
        if isinstance(root, changed):
            heard.add(root.method)
        if len(heard) == 3:
            all_heard.set()

    async with connect_in_memory(server, mode="legacy", message_handler=on_message) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["first"]
        await client.list_resources()
        await client.list_prompts()
        await _change(server)
        with anyio.fail_after(10):
            await all_heard.wait()
        await _check_listed_and_usable(client)


@pytest.mark.anyio
async def test_added_at_run_time_2026_era(kernel):
    """2026-07-28: a subscriptions/listen stream carries the change, then the new items are there."""
    server = _server(kernel)
    async with connect_in_memory(server, mode="auto") as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["first"]
        await client.list_resources()
        await client.list_prompts()
        async with client.listen(
            tools_list_changed=True, resources_list_changed=True, prompts_list_changed=True
        ) as events:
            await _change(server)
            with anyio.fail_after(10):
                async for _event in events:
                    break
        await _check_listed_and_usable(client)


@pytest.mark.anyio
async def test_removed_tool_is_gone(kernel):
    """Removing is the mirror image: the tool leaves the list and calling it is an error."""
    server = _server(kernel)
    async with connect_in_memory(server, mode="legacy") as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["first"]
        server.remove_tool("first")
        await server.notify_list_changed("tools")
        assert (await client.list_tools()).tools == []
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("first", {})
