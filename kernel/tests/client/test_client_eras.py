"""The same features against an ``mcp`` SDK server in both protocol eras.

2025 servers push list changes and resource updates as notifications; 2026-07-28 servers
send them only on a ``subscriptions/listen`` stream, which MCPClient keeps open.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from toolkernel.client import MCPClient, MemoryServerStore

from .conftest import sdk_stdio

pytestmark = pytest.mark.timeout(120)

ERAS = ["legacy", "auto", "2026-07-28"]


def client_for(kernel: Any, protocol: str) -> MCPClient:
    server = {**sdk_stdio(), "protocol": protocol}
    return MCPClient(
        {"servers": {"sdk": server}, "connect_timeout": 60}, kernel=kernel, store=MemoryServerStore()
    )


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ERAS)
async def test_prompt_list_changed(client_kernel: Any, protocol: str) -> None:
    async with client_for(client_kernel, protocol) as client:
        assert client.get_servers()["sdk"].protocol_version == (
            "2025-11-25" if protocol == "legacy" else "2026-07-28"
        )
        changed = anyio.Event()
        client.on_prompt_list_changed(lambda server: changed.set())
        assert (await client.list_prompts())["sdk"] == []
        await client.call_tool("sdk_add_prompt", {"name": "fresh"})
        with anyio.fail_after(15):
            await changed.wait()
        prompts = (await client.list_prompts())["sdk"]
        assert [p.name for p in prompts] == ["fresh"]
        got = await client.get_prompt("sdk", "fresh")
        assert got.messages[0].content.text == "prompt fresh"  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ERAS[1:])  # the SDK's MCPServer has no resources/subscribe (2025)
async def test_resource_subscription(client_kernel: Any, protocol: str) -> None:
    async with client_for(client_kernel, protocol) as client:
        updated: list[tuple[str, str]] = []
        arrived = anyio.Event()

        def on_updated(server: str, uri: str) -> None:
            updated.append((server, uri))
            arrived.set()

        client.on_resource_updated(on_updated)
        assert [str(r.uri) for r in (await client.list_resources())["sdk"]] == ["note://today"]
        await client.subscribe_resource("sdk", "note://today")
        await client.call_tool("sdk_touch", {"uri": "note://today"})
        with anyio.fail_after(15):
            await arrived.wait()
        assert updated == [("sdk", "note://today")]
        read = await client.read_resource("sdk", "note://today")
        assert read.contents[0].text == "nothing yet"  # type: ignore[union-attr]
        await client.unsubscribe_resource("sdk", "note://today")


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_elicitation_and_sampling_from_a_toolkernel_server(client_kernel: Any, protocol: str) -> None:
    import mcp_types as types

    from .conftest import ROOT

    asked: list[str] = []

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(f"{server}: {params.message}")
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async def sample(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(f"{server}: {params.messages[0].content.text}")  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="short"), model="m1"
        )

    server = {
        "command": sys.executable,
        "args": ["-m", "toolkernel", "serve", str(ROOT / "kernel/tests/client/tk_server.py") + ":app"],
        "stderr": "devnull",
        "protocol": protocol,
    }
    client = MCPClient(
        {"servers": {"tk": server}, "connect_timeout": 60},
        kernel=client_kernel,
        store=MemoryServerStore(),
        elicitation_handler=elicit,
        sampling_handler=sample,
    )
    async with client:
        assert client.get_servers()["tk"].protocol_version == (
            "2025-11-25" if protocol == "legacy" else "2026-07-28"
        )
        assert (await client.call_tool("tk_greet")).text == "hello Grace"
        assert (await client.call_tool("tk_summarize", {"text": "a long story"})).text == "m1: short"
    assert asked == ["tk: Who are you?", "tk: Summarize: a long story"]
