"""Every feature server-everything offers, through MCPClient, over stdio, Streamable HTTP and legacy SSE.

One client per transport for the whole module (server-everything takes seconds to
start on a loaded machine); each test exercises one feature through it.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolkernel.client import MCPClient, MemoryServerStore, ToolError
from toolkernel.errors import MCPClientError

from .conftest import everything_http, everything_stdio

pytestmark = [pytest.mark.node, pytest.mark.timeout(180)]

TRANSPORTS = ["stdio", "streamable-http", "sse"]
BASE_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
}
# Registered once the client's capabilities are known: roots, elicitation, sampling.
CONDITIONAL_TOOLS = {
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
    "simulate-research-query",
}
ROOT_URI = "file:///tmp/toolkernel-project"
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Peer:
    """A handler the tests can change, recording what the server asked."""

    client: MCPClient
    elicit: Callable[[types.ElicitRequestParams], types.ElicitResult] = lambda p: types.ElicitResult(
        action="decline"
    )
    asked: list[Any] = field(default_factory=list)

    async def on_elicitation(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append((server, params))
        return self.elicit(params)

    async def on_sampling(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append((server, params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled {len(params.messages)} message(s)"),
            model="test-model",
            stop_reason="endTurn",
        )


@pytest.fixture(scope="module", params=TRANSPORTS)
async def peer(request: pytest.FixtureRequest, client_kernel: Any) -> AsyncIterator[Peer]:
    transport = request.param
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            server: dict[str, Any] = everything_stdio()
        else:
            http = stack.enter_context(everything_http("streamableHttp" if transport != "sse" else "sse"))
            server = {"url": http.url, "transport": transport}
        holder: dict[str, Peer] = {}
        client = MCPClient(
            {"servers": {"everything": server}, "connect_timeout": 60, "timeout": 30},
            kernel=client_kernel,
            store=MemoryServerStore(),
            elicitation_handler=lambda s, p: holder["peer"].on_elicitation(s, p),
            sampling_handler=lambda s, p: holder["peer"].on_sampling(s, p),
            roots=[types.Root(uri=ROOT_URI, name="project")],
        )
        holder["peer"] = Peer(client)
        async with client:
            await client.wait_ready("everything", timeout=60)
            yield holder["peer"]


class Seen:
    """Records callback arguments; ``wait(n)`` returns once ``n`` have arrived (bounded)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._more = anyio.Event()

    def __call__(self, *args: Any) -> None:
        self.items.append(args if len(args) != 1 else args[0])
        self._more.set()

    async def wait(self, n: int = 1, limit: float = 15.0) -> list[Any]:
        with anyio.fail_after(limit):
            while len(self.items) < n:
                self._more = anyio.Event()
                await self._more.wait()
        return self.items


# -- tools ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_tool_is_listed_under_the_server_prefix(peer: Peer) -> None:
    async def names() -> set[str]:
        return {t.name for t in await peer.client.list_tools()}

    wanted = {f"everything_{t}" for t in BASE_TOOLS | CONDITIONAL_TOOLS}
    changed = Seen()
    off = peer.client.on_tool_list_changed(changed)
    try:
        # The conditional tools arrive with a tools/list_changed right after the handshake.
        if not wanted <= await names():
            await changed.wait()
    finally:
        off()
    assert await names() == wanted
    toolsets = await peer.client.list_toolsets()
    assert {t.original_name for t in toolsets["everything"]} == BASE_TOOLS | CONDITIONAL_TOOLS


@pytest.mark.anyio
async def test_echo(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_echo", {"message": "hello"})
    assert out.content == [{"type": "text", "text": "Echo: hello"}]
    assert out.artifacts == []
    assert not out.is_error


@pytest.mark.anyio
async def test_get_sum(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_get-sum", {"a": 2, "b": 40})
    assert out.text == "The sum of 2 and 40 is 42."


@pytest.mark.anyio
async def test_get_env(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_get-env", {})
    assert "PATH" in out.text


@pytest.mark.anyio
async def test_annotated_message_keeps_annotations_and_puts_the_image_aside(peer: Peer) -> None:
    out = await peer.client.call_tool(
        "everything_get-annotated-message", {"messageType": "error", "includeImage": True}
    )
    assert out.content[0]["text"] == "Error: Operation failed"
    assert out.content[0]["extras"]["annotations"] == {"priority": 1.0, "audience": ["user", "assistant"]}
    assert [a["type"] for a in out.artifacts] == ["image"]


@pytest.mark.anyio
async def test_tiny_image_is_an_artifact(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_get-tiny-image", {})
    images = [a for a in out.artifacts if a["type"] == "image"]
    assert images
    assert images[0]["mime_type"] == "image/png"
    assert base64.b64decode(images[0]["base64"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(block["type"] == "text" for block in out.content)


@pytest.mark.anyio
async def test_structured_content(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_get-structured-content", {"location": "Chicago"})
    assert out.structured_content == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}


@pytest.mark.anyio
async def test_resource_links_are_file_blocks_with_urls(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_get-resource-links", {"count": 2})
    links = [b for b in out.content if b["type"] == "file"]
    assert [b["url"] for b in links] == ["demo://resource/dynamic/blob/1", "demo://resource/dynamic/text/2"]


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "block"), [("Text", "text-plain"), ("Blob", "file")])
async def test_embedded_resource_is_an_artifact(peer: Peer, kind: str, block: str) -> None:
    out = await peer.client.call_tool(
        "everything_get-resource-reference", {"resourceType": kind, "resourceId": 3}
    )
    (artifact,) = out.artifacts
    assert artifact["type"] == block
    assert artifact["extras"]["uri"] == f"demo://resource/dynamic/{kind.lower()}/3"
    payload = artifact["text"] if block == "text-plain" else base64.b64decode(artifact["base64"]).decode()
    assert payload.startswith("Resource 3: ")


@pytest.mark.anyio
async def test_gzip_file_as_resource_registers_a_session_resource(peer: Peer) -> None:
    changed = anyio.Event()
    off = peer.client.on_resource_list_changed(lambda server: changed.set())
    try:
        data = "data:text/plain;base64," + base64.b64encode(b"hello gzip" * 20).decode()
        out = await peer.client.call_tool(
            "everything_gzip-file-as-resource",
            {"name": "hello.gz", "data": data, "outputType": "resourceLink"},
        )
        (link,) = [b for b in out.content if b["type"] == "file"]
        assert link["url"] == "demo://resource/session/hello.gz"
        read = await peer.client.read_resource("everything", link["url"])
        import gzip

        assert gzip.decompress(base64.b64decode(read.contents[0].blob)) == b"hello gzip" * 20  # type: ignore[union-attr]
        with anyio.fail_after(15):
            await changed.wait()
        resources = await peer.client.list_resources()
        assert "demo://resource/session/hello.gz" in {str(r.uri) for r in resources["everything"]}
    finally:
        off()


@pytest.mark.anyio
async def test_tool_error_raises_tool_error_with_the_output(peer: Peer) -> None:
    with pytest.raises(ToolError) as info:
        await peer.client.call_tool(
            "everything_get-resource-reference", {"resourceType": "Text", "resourceId": -1}
        )
    assert info.value.server == "everything"
    assert info.value.output is not None
    assert info.value.output.is_error
    assert "Invalid resourceId" in str(info.value)
    out = await peer.client.call_tool(
        "everything_get-resource-reference", {"resourceType": "Text", "resourceId": -1}, raise_on_error=False
    )
    assert out.is_error


@pytest.mark.anyio
async def test_task_only_tool_runs_as_a_task(peer: Peer) -> None:
    # simulate-research-query requires task augmentation (2025-11-25 Tasks): the client drives it.
    out = await peer.client.call_tool("everything_simulate-research-query", {"topic": "python"}, timeout=30)
    assert out.text.startswith("# Research Report: python")


# -- progress ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_progress_with_a_caller_supplied_run_id(peer: Peer) -> None:
    seen: list[tuple[float, float | None]] = []
    tokens = Seen()
    off = peer.client.on_progress(lambda server, params: tokens(server, params.progress_token))
    try:
        out = await peer.client.call_tool(
            "everything_trigger-long-running-operation",
            {"duration": 0.6, "steps": 3},
            run_id="run-42",
            on_progress=lambda progress, total, message: seen.append((progress, total)),
        )
        assert set(await tokens.wait(3)) == {("everything", "run-42")}
    finally:
        off()
    assert "Long running operation completed" in out.text
    assert seen == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]


# -- elicitation, sampling, roots ------------------------------------------------------------------


@pytest.mark.anyio
async def test_elicitation_accept(peer: Peer) -> None:
    peer.elicit = lambda p: types.ElicitResult(
        action="accept", content={"name": "Ada Lovelace", "check": True}
    )
    out = await peer.client.call_tool("everything_trigger-elicitation-request", {})
    assert "- Name: Ada Lovelace" in out.text
    assert "- Agreed to terms: true" in out.text
    server, params = peer.asked[-1]
    assert server == "everything"
    assert "name" in params.requested_schema["properties"]


@pytest.mark.anyio
async def test_elicitation_decline(peer: Peer) -> None:
    peer.elicit = lambda p: types.ElicitResult(action="decline")
    out = await peer.client.call_tool("everything_trigger-elicitation-request", {})
    assert "declined" in out.text


@pytest.mark.anyio
async def test_url_elicitation(peer: Peer) -> None:
    peer.elicit = lambda p: types.ElicitResult(action="accept")
    out = await peer.client.call_tool(
        "everything_trigger-url-elicitation", {"url": "https://example.com/consent", "elicitationId": "e-1"}
    )
    assert "User completed the URL elicitation flow" in out.text
    _, params = peer.asked[-1]
    assert params.mode == "url"
    assert params.url == "https://example.com/consent"


@pytest.mark.anyio
async def test_sampling(peer: Peer) -> None:
    out = await peer.client.call_tool(
        "everything_trigger-sampling-request", {"prompt": "haiku", "maxTokens": 20}
    )
    assert "sampled 1 message(s)" in out.text
    assert "test-model" in out.text
    server, params = peer.asked[-1]
    assert server == "everything"
    assert params.max_tokens == 20


@pytest.mark.anyio
async def test_roots(peer: Peer) -> None:
    out = await peer.client.call_tool("everything_get-roots-list", {})
    assert ROOT_URI in out.text


# -- resources ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_static_resources_list_and_read(peer: Peer) -> None:
    resources = (await peer.client.list_resources())["everything"]
    uris = {str(r.uri) for r in resources}
    assert "demo://resource/static/document/instructions.md" in uris
    read = await peer.client.read_resource("everything", "demo://resource/static/document/instructions.md")
    assert read.contents[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_resource_templates_list_and_read(peer: Peer) -> None:
    templates = (await peer.client.list_resource_templates())["everything"]
    assert {t.uri_template for t in templates} == {
        "demo://resource/dynamic/text/{resourceId}",
        "demo://resource/dynamic/blob/{resourceId}",
    }
    text = await peer.client.read_resource("everything", "demo://resource/dynamic/text/7")
    assert text.contents[0].text.startswith("Resource 7: This is a plaintext resource")  # type: ignore[union-attr]
    blob = await peer.client.read_resource("everything", "demo://resource/dynamic/blob/7")
    assert base64.b64decode(blob.contents[0].blob).startswith(b"Resource 7: ")  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_reading_an_unknown_resource_is_an_mcp_client_error(peer: Peer) -> None:
    with pytest.raises(MCPClientError) as info:
        await peer.client.read_resource("everything", "demo://resource/dynamic/text/not-a-number")
    assert info.value.server == "everything"
    assert info.value.code is not None


@pytest.mark.anyio
async def test_subscribe_updates_then_unsubscribe(peer: Peer) -> None:
    uri = "demo://resource/dynamic/text/1"
    updates = Seen()
    off = peer.client.on_resource_updated(updates)
    try:
        await peer.client.subscribe_resource("everything", uri)
        await peer.client.call_tool("everything_toggle-subscriber-updates", {})
        assert (await updates.wait())[0] == ("everything", uri)
        await peer.client.unsubscribe_resource("everything", uri)
    finally:
        off()
        await peer.client.call_tool("everything_toggle-subscriber-updates", {})


# -- prompts and completion -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_prompts_listed(peer: Peer) -> None:
    prompts = (await peer.client.list_prompts())["everything"]
    assert {p.name for p in prompts} == {
        "simple-prompt",
        "args-prompt",
        "completable-prompt",
        "resource-prompt",
    }


@pytest.mark.anyio
async def test_prompt_simple_and_with_arguments(peer: Peer) -> None:
    simple = await peer.client.get_prompt("everything", "simple-prompt")
    assert simple.messages[0].content.text == "This is a simple prompt without arguments."  # type: ignore[union-attr]
    args = await peer.client.get_prompt("everything", "args-prompt", {"city": "Paris", "state": "TX"})
    assert args.messages[0].content.text == "What's weather in Paris, TX?"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_prompt_with_embedded_resource(peer: Peer) -> None:
    got = await peer.client.get_prompt(
        "everything", "resource-prompt", {"resourceType": "Text", "resourceId": "2"}
    )
    embedded = got.messages[1].content
    assert embedded.type == "resource"
    assert str(embedded.resource.uri) == "demo://resource/dynamic/text/2"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_completion(peer: Peer) -> None:
    ref = types.PromptReference(type="ref/prompt", name="completable-prompt")
    done = await peer.client.complete("everything", ref, {"name": "department", "value": "E"})
    assert done.completion.values == ["Engineering"]
    names = await peer.client.complete(
        "everything", ref, {"name": "name", "value": ""}, context_arguments={"department": "Sales"}
    )
    assert names.completion.values == ["David", "Eve", "Frank"]


# -- logging and the snapshot --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_logging(peer: Peer) -> None:
    logs = Seen()
    off = peer.client.on_log(logs)
    try:
        await peer.client.set_logging_level("everything", "debug")
        await peer.client.call_tool("everything_toggle-simulated-logging", {})
        server, params = (await logs.wait())[0]
        assert server == "everything"
        assert params.level in LEVELS
    finally:
        off()
        await peer.client.call_tool("everything_toggle-simulated-logging", {})


@pytest.mark.anyio
async def test_get_servers_snapshot(peer: Peer) -> None:
    snap = peer.client.get_servers()["everything"]
    assert snap.state == "ready"
    assert snap.server_info is not None
    assert snap.server_info.name == "mcp-servers/everything"
    assert snap.capabilities is not None
    assert snap.capabilities.resources is not None
    assert snap.capabilities.resources.subscribe is True
    assert snap.instructions
    assert {t.name for t in snap.tools} >= BASE_TOOLS
    assert len(snap.prompts) == 4
    assert snap.resources
    assert len(snap.resource_templates) == 2
