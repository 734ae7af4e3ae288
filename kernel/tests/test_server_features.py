"""MCPServer features over the SDK client, through the full kernel path, in both protocol eras."""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from toolkernel import (
    ConfigError,
    MCPServer,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    ToolContext,
    prompt,
)
from toolkernel.testing import connect_in_memory

MODES = ["legacy", "auto"]

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


# ---------------------------------------------------------------------------
# Agents and workflows
# ---------------------------------------------------------------------------


class Reply:
    def __init__(self, text: str) -> None:
        self.text = text


class EchoAgent:
    description = "Repeats what you say."

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def generate(self, message: str) -> Reply:
        self.heard.append(message)
        return Reply(f"agent heard: {message}")


class SumInput(BaseModel):
    numbers: list[int]


class SumOutput(BaseModel):
    total: int


class SumWorkflow:
    input_model = SumInput
    output_model = SumOutput
    description = "Adds numbers."

    async def run(self, input: SumInput) -> SumOutput:
        return SumOutput(total=sum(input.numbers))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_agents_and_workflows_become_tools(kernel, mode):
    agent = EchoAgent()
    server = MCPServer("aw", kernel=kernel, agents={"echoer": agent}, workflows={"summer": SumWorkflow()})
    async with connect_in_memory(server, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        asked = await client.call_tool("ask_echoer", {"message": "hello"})
        summed = await client.call_tool("run_summer", {"numbers": [1, 2, 39]})
        bad = await client.call_tool("run_summer", {"numbers": "x"})
    assert sorted(tools) == ["ask_echoer", "run_summer"]
    assert tools["ask_echoer"].description == "Ask agent 'echoer': Repeats what you say."
    assert tools["ask_echoer"].input_schema["required"] == ["message"]
    assert tools["run_summer"].description == "Adds numbers."
    assert tools["run_summer"].output_schema is not None
    assert tools["run_summer"].output_schema["required"] == ["total"]
    assert asked.content[0].text == "agent heard: hello"
    assert agent.heard == ["hello"]
    assert summed.structured_content == {"total": 42}
    assert bad.is_error is True
    assert bad.content[0].text == "Invalid input for tool 'run_summer': numbers: Input should be a valid list"


@pytest.mark.parametrize("description", ["", "   ", None])
def test_agent_without_description_is_config_error(description):
    class Mute:
        async def generate(self, message: str) -> str:
            return message

    agent = Mute()
    agent.description = description  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as info:
        MCPServer("x", agents={"mute": agent})
    assert str(info.value) == "agent 'mute' needs a non-empty description to be exposed as ask_mute"


def test_workflow_without_input_model_is_config_error():
    class NoModel:
        async def run(self, input: Any) -> Any:
            return input

    with pytest.raises(ConfigError, match=r"workflow 'w' needs input_model, a pydantic model class"):
        MCPServer("x", workflows={"w": NoModel()})


@pytest.mark.anyio
async def test_explicit_tool_wins_a_collision_with_a_warning(kernel, log_events):
    def ask_echoer(message: str) -> str:
        """Explicit tool."""
        return f"explicit: {message}"

    server = MCPServer("c", kernel=kernel, tools=[ask_echoer], agents={"echoer": EchoAgent()})

    @server.tool
    def run_summer(numbers: list[int]) -> str:
        """Also explicit."""
        return "explicit run"

    assert await server.execute_tool("ask_echoer", {"message": "m"}) == "explicit: m"
    assert server.get_tool_info("ask_echoer")["description"] == "Explicit tool."
    warnings_logged = [e["event"] for e in log_events if e["log_level"] == "warning"]
    assert warnings_logged == [
        "tool 'ask_echoer' is defined explicitly; the agent/workflow tool of that name is not exposed"
    ]

    later = MCPServer("d", kernel=kernel, workflows={"summer": SumWorkflow()})
    later.add_tool(run_summer)
    assert await later.execute_tool("run_summer", {"numbers": [1]}) == "explicit run"
    assert log_events[-1]["event"] == "tool 'run_summer' replaces the agent/workflow tool of the same name"


# ---------------------------------------------------------------------------
# Resources
# ---------------------------------------------------------------------------


def _resource_server(kernel: Any) -> MCPServer:
    async def read_user(id: str) -> str:
        return f"user {id}"

    return MCPServer(
        "res",
        kernel=kernel,
        resources=[
            Resource(
                "mem://notes", "notes", lambda: "some notes", mime_type="text/markdown", description="N"
            ),
            Resource("mem://logo", "logo", lambda: b"\x89PNG\x00\xff", mime_type="image/png"),
            Resource("mem://plain", "plain", lambda: "p"),
            ResourceTemplate(
                "mem://users/{id}",
                "user",
                read_user,
                complete={
                    "id": lambda prefix: [u for u in ("alice", "albert", "bob") if u.startswith(prefix)]
                },
            ),
            ResourceTemplate("mem://repo/{owner}/{name}", "repo", lambda owner, name: f"{owner}:{name}"),
            ResourceTemplate("mem://bad/{x}", "bad", lambda x: 42),
        ],
    )


def _listing_server(kernel, page_size):
    """Two fixed resources and a template that lists 25 items from a backing list, 10 at most a call."""
    items = [f"item-{i:02d}" for i in range(25)]

    async def listing(cursor, limit):
        start = int(cursor or 0)
        end = min(start + min(limit, 10), len(items))
        page = [Resource(f"mem://items/{i}", i, lambda: "x") for i in items[start:end]]
        return page, (str(end) if end < len(items) else None)

    return MCPServer(
        "listing",
        kernel=kernel,
        page_size=page_size,
        resources=[
            Resource("mem://a", "a", lambda: "a"),
            Resource("mem://b", "b", lambda: "b"),
            ResourceTemplate("mem://items/{id}", "item", lambda id: id, listing=listing),
        ],
    )


async def _all_pages(client):
    pages, cursor = [], None
    while True:
        result = await client.list_resources(cursor=cursor)
        pages.append([r.name for r in result.resources])
        cursor = result.next_cursor
        if cursor is None:
            return pages


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_template_lists_its_resources_page_by_page(kernel, mode):
    everything = ["a", "b", *[f"item-{i:02d}" for i in range(25)]]
    async with connect_in_memory(_listing_server(kernel, None), mode=mode) as client:
        unpaged = await _all_pages(client)
        read = (await client.read_resource("mem://items/item-24")).contents
        with pytest.raises(MCPError) as bad:
            await client.list_resources(cursor="not-a-cursor")
        forged, named = [], []
        # The last carries a cursor of the template's own that its listing cannot read (ValueError).
        for position in ([0, "x"], [0, "-1"], [0, "99"], [1, "not-an-offset"]):
            cursor = base64.urlsafe_b64encode(("p:" + json.dumps(position)).encode()).decode()
            with pytest.raises(MCPError) as refused:
                await client.list_resources(cursor=cursor)
            forged.append(refused.value.error.code)
            named.append(repr(cursor) in refused.value.error.message)
    # A cursor this server did not hand out is -32602, even one well formed but out of range.
    assert forged == [types.INVALID_PARAMS] * 4
    assert named == [True] * 4
    # No page size: one page holds up to 1,000; the listing is asked until it has no more.
    assert unpaged == [everything]
    assert read[0].text == "item-24"
    assert bad.value.error.code == types.INVALID_PARAMS
    async with connect_in_memory(_listing_server(kernel, 4), mode=mode) as client:
        paged = await _all_pages(client)
    assert [len(p) for p in paged] == [4] * 6 + [3]
    assert [name for page in paged for name in page] == everything


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_resources_list_read_and_templates(kernel, mode):
    async with connect_in_memory(_resource_server(kernel), mode=mode) as client:
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        notes = (await client.read_resource("mem://notes")).contents
        logo = (await client.read_resource("mem://logo")).contents
        plain = (await client.read_resource("mem://plain")).contents
        user = (await client.read_resource("mem://users/42")).contents
        repo = (await client.read_resource("mem://repo/octo/cat")).contents
        with pytest.raises(MCPError) as not_found:
            await client.read_resource("mem://users/a/b")
        with pytest.raises(MCPError) as wrong_type:
            await client.read_resource("mem://bad/1")

    assert [(r.uri, r.name, r.mime_type) for r in listed] == [
        ("mem://notes", "notes", "text/markdown"),
        ("mem://logo", "logo", "image/png"),
        ("mem://plain", "plain", None),
    ]
    assert listed[0].description == "N"
    assert [t.uri_template for t in templates] == [
        "mem://users/{id}",
        "mem://repo/{owner}/{name}",
        "mem://bad/{x}",
    ]
    assert isinstance(notes[0], types.TextResourceContents)
    assert (notes[0].text, notes[0].mime_type) == ("some notes", "text/markdown")
    assert isinstance(logo[0], types.BlobResourceContents)
    assert (logo[0].blob, logo[0].mime_type) == ("iVBORwD/", "image/png")
    assert plain[0].mime_type == "text/plain"
    assert user[0].text == "user 42"
    assert user[0].uri == "mem://users/42"
    assert repo[0].text == "octo:cat"
    # An unknown resource: -32002 on the 2025 era, -32602 from 2026-07-28 on (SEP-2164).
    assert not_found.value.code == (-32002 if mode == "legacy" else types.INVALID_PARAMS)
    assert wrong_type.value.code == types.INTERNAL_ERROR
    assert wrong_type.value.message == "resource 'mem://bad/1' reader returned int, not str/bytes"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_completion_of_template_and_prompt_arguments(kernel, mode):
    server = _resource_server(kernel)
    server.add_prompt(
        Prompt("pick", lambda color: color, complete={"color": lambda p: ["red", "rose", "blue"]})
    )
    async with connect_in_memory(server, mode=mode) as client:
        users = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="mem://users/{id}"),
            {"name": "id", "value": "al"},
        )
        nothing = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="mem://repo/{owner}/{name}"),
            {"name": "owner", "value": "o"},
        )
        colors = await client.complete(
            types.PromptReference(type="ref/prompt", name="pick"), {"name": "color", "value": "r"}
        )
    assert users.completion.values == ["alice", "albert"]
    assert users.completion.total == 2
    assert users.completion.has_more is False
    assert nothing.completion.values == []
    assert colors.completion.values == ["red", "rose", "blue"]


@pytest.mark.anyio
async def test_subscribe_delivers_updates_until_unsubscribed(kernel):
    server = _resource_server(kernel)
    received: list[Any] = []
    send, receive = anyio.create_memory_object_stream[Any](10)

    async def on_message(message: Any) -> None:
        if hasattr(message, "method"):
            await send.send(message)

    async def wait_for(count: int) -> None:
        with anyio.fail_after(5):
            for _ in range(count):
                received.append(await receive.receive())

    async with connect_in_memory(server, mode="legacy", message_handler=on_message) as client:
        await client.subscribe_resource("mem://notes")
        await server.notify_updated("mem://notes")
        await server.notify_updated("mem://plain")  # nobody subscribed
        await wait_for(1)
        await client.unsubscribe_resource("mem://notes")
        await server.notify_updated("mem://notes")
        await server.notify_list_changed("resources")
        await wait_for(1)
        await server.notify_list_changed("tools")
        await server.notify_list_changed("prompts")
        await wait_for(2)
        await anyio.sleep(0.05)
    assert receive.statistics().current_buffer_used == 0
    methods = [(m.method, getattr(m.params, "uri", None)) for m in received]
    assert methods == [
        ("notifications/resources/updated", "mem://notes"),
        ("notifications/resources/list_changed", None),
        ("notifications/tools/list_changed", None),
        ("notifications/prompts/list_changed", None),
    ]


# ---------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------


def _prompt_server(kernel: Any) -> MCPServer:
    @prompt(version="1.0", description="Old greeting.")
    def greet(name: str) -> str:
        return f"Hello {name}."

    @prompt(name="greet", version="2.0", description="New greeting.")
    def greet_v2(name: str, punctuation: str = "!") -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": {"type": "text", "text": f"Hi {name}{punctuation}"}},
            {"role": "assistant", "content": {"type": "text", "text": "Hello!"}},
        ]

    async def summary(topic: str) -> str:
        return f"Summarize {topic}."

    explicit = Prompt(
        "summary",
        summary,
        description="Summaries.",
        arguments=[PromptArgument("topic", "What to summarize.", required=True)],
        title="Summary",
    )
    return MCPServer("prompts", kernel=kernel, prompts=[greet, greet_v2, explicit])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_prompts_list_get_versions_and_errors(kernel, mode):
    async with connect_in_memory(_prompt_server(kernel), mode=mode) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        newest = await client.get_prompt("greet", {"name": "Ann"})
        old = await client.get_prompt("greet", {"name": "Ann"}, meta={"toolkernel/version": "1.0"})
        summary = await client.get_prompt("summary", {"topic": "MCP"})
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("summary", {})
        with pytest.raises(MCPError) as unknown_arg:
            await client.get_prompt("summary", {"topic": "x", "extra": "y"})
        with pytest.raises(MCPError) as no_version:
            await client.get_prompt("greet", {"name": "A"}, meta={"toolkernel/version": "9"})

    assert list(listed) == ["greet", "summary"]
    assert listed["greet"].description == "New greeting."
    assert [(a.name, a.required) for a in listed["greet"].arguments or []] == [
        ("name", True),
        ("punctuation", False),
    ]
    assert listed["greet"].meta == {"toolkernel/versions": ["1.0", "2.0"]}
    assert listed["summary"].meta is None
    assert listed["summary"].title == "Summary"
    assert listed["summary"].arguments[0].description == "What to summarize."
    assert [(m.role, m.content.text) for m in newest.messages] == [
        ("user", "Hi Ann!"),
        ("assistant", "Hello!"),
    ]
    assert newest.description == "New greeting."
    assert [(m.role, m.content.text) for m in old.messages] == [("user", "Hello Ann.")]
    assert summary.messages[0].content.text == "Summarize MCP."
    assert missing.value.code == -32602
    assert missing.value.message == "prompt 'summary': missing required argument(s) topic"
    assert unknown_arg.value.message == "prompt 'summary': unknown argument(s) extra"
    assert no_version.value.code == -32602
    assert no_version.value.message == "prompt 'greet' has no version '9' (versions: 1.0, 2.0)"


# ---------------------------------------------------------------------------
# Logging, progress, cancellation, request values
# ---------------------------------------------------------------------------


def _context_server(kernel: Any, runs: list[str]) -> MCPServer:
    server = MCPServer("ctx", kernel=kernel)

    @server.tool
    async def chatty(ctx: ToolContext) -> str:
        await ctx.debug("debug line")
        await ctx.info("info line", step=1)
        await ctx.warning("warning line")
        await ctx.error("error line")
        return "logged"

    @server.tool
    async def steps(count: int, ctx: ToolContext) -> str:
        for i in range(1, count + 1):
            await ctx.progress(i, count, f"step {i}")
        return "stepped"

    @server.tool
    def values(ctx: ToolContext) -> str:
        return f"{dict(ctx.values)} {ctx.tool_name} {ctx.request_id!r} {ctx.session_id}"

    class Person(BaseModel):
        name: str
        age: int

    @server.tool
    async def interview(ctx: ToolContext) -> str:
        runs.append("run")
        answer = await ctx.elicit("Who are you?", Person)
        sampled = await ctx.sample("Write a haiku", max_tokens=20, system_prompt="Be brief.")
        person = f"{answer.data.name}/{answer.data.age}" if answer.data else "-"
        return f"{answer.action} {person} | {sampled.text} ({sampled.model}, {sampled.stop_reason})"

    return server


@pytest.mark.anyio
async def test_logging_is_delivered_and_set_logging_level_filters_it(kernel):
    received: list[tuple[str, Any, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append((params.level, params.data, params.logger))

    async with connect_in_memory(
        _context_server(kernel, []), mode="legacy", logging_callback=on_log
    ) as client:
        await client.call_tool("chatty", {})
        everything = list(received)
        received.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.set_logging_level("warning")
        await client.call_tool("chatty", {})
    assert everything == [
        ("debug", "debug line", "chatty"),
        ("info", {"message": "info line", "step": 1}, "chatty"),
        ("warning", "warning line", "chatty"),
        ("error", "error line", "chatty"),
    ]
    assert received == [("warning", "warning line", "chatty"), ("error", "error line", "chatty")]


@pytest.mark.anyio
async def test_logging_on_the_modern_era_follows_the_per_request_level(kernel):
    received: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params.level)

    server = _context_server(kernel, [])
    async with connect_in_memory(server, mode="auto", logging_callback=on_log, log_level="info") as client:
        assert client.protocol_version == "2026-07-28"
        await client.call_tool("chatty", {})
    assert received == ["info", "warning", "error"]
    received.clear()
    async with connect_in_memory(server, mode="auto", logging_callback=on_log) as client:
        await client.call_tool("chatty", {})
    assert received == []


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_progress_callback(kernel, mode):
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with connect_in_memory(_context_server(kernel, []), mode=mode) as client:
        with_callback = await client.call_tool("steps", {"count": 3}, progress_callback=on_progress)
        without = await client.call_tool("steps", {"count": 2})
    assert with_callback.content[0].text == "stepped"
    assert without.content[0].text == "stepped"
    assert updates == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_request_values_from_meta_reach_the_tool(kernel, mode):
    async with connect_in_memory(_context_server(kernel, []), mode=mode) as client:
        with_values = await client.call_tool(
            "values", {}, meta={"toolkernel/context": {"tenant": "acme", "n": 1}}
        )
        not_an_object = await client.call_tool("values", {}, meta={"toolkernel/context": ["x"]})
    text = with_values.content[0].text
    assert text.startswith("{'tenant': 'acme', 'n': 1} values ")
    assert text.endswith(" None")
    assert not_an_object.content[0].text.startswith("{} values ")


@pytest.mark.anyio
async def test_execute_tool_passes_values(kernel):
    server = _context_server(kernel, [])
    assert await server.execute_tool("values", values={"k": "v"}) == "{'k': 'v'} values None None"


def _answers(action: str = "accept") -> dict[str, Any]:
    calls: dict[str, list[Any]] = {"elicit": [], "sample": []}

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        calls["elicit"].append(params)
        if action != "accept":
            return types.ElicitResult(action=action)
        return types.ElicitResult(action="accept", content={"name": "Ada", "age": 36})

    async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        calls["sample"].append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="autumn moon"),
            model="test-model",
            stop_reason="endTurn",
        )

    return {"calls": calls, "elicitation_callback": on_elicit, "sampling_callback": on_sample}


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "expected_runs"), [("legacy", 1), ("auto", 3)])
async def test_elicitation_and_sampling_in_both_eras(kernel, mode, expected_runs):
    runs: list[str] = []
    answers = _answers()
    calls = answers.pop("calls")
    async with connect_in_memory(_context_server(kernel, runs), mode=mode, **answers) as client:
        result = await client.call_tool("interview", {})
    assert result.is_error is False
    assert result.content[0].text == "accept Ada/36 | autumn moon (test-model, endTurn)"
    # 2026-07-28: input_required, then the tool runs again from the start with the answers.
    assert len(runs) == expected_runs
    assert len(calls["elicit"]) == 1
    assert calls["elicit"][0].message == "Who are you?"
    assert calls["elicit"][0].requested_schema["required"] == ["name", "age"]
    assert len(calls["sample"]) == 1
    assert calls["sample"][0].messages[0].content.text == "Write a haiku"
    assert calls["sample"][0].max_tokens == 20
    assert calls["sample"][0].system_prompt == "Be brief."


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_declined_elicitation(kernel, mode):
    answers = _answers("decline")
    answers.pop("calls")
    async with connect_in_memory(_context_server(kernel, []), mode=mode, **answers) as client:
        result = await client.call_tool("interview", {})
    assert result.content[0].text == "decline - | autumn moon (test-model, endTurn)"


@pytest.mark.anyio
async def test_elicit_without_a_client_is_an_error_result(kernel):
    from toolkernel import ToolExecutionError

    with pytest.raises(ToolExecutionError, match=r"RuntimeError: ctx.elicit\(\) needs a client"):
        await _context_server(kernel, []).execute_tool("interview")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_reaches_the_tool_and_the_server_keeps_serving(kernel, mode):
    started = anyio.Event()
    cancelled = anyio.Event()
    seen: list[Any] = []
    server = MCPServer("cancel", kernel=kernel)

    @server.tool
    async def slow(ctx: ToolContext) -> str:
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            seen.append(("cancelled", ctx.cancel_requested))
            cancelled.set()
            raise
        return "finished"

    @server.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    async with connect_in_memory(server, mode=mode) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()

                async def call() -> None:
                    with scope:
                        await client.call_tool("slow", {})

                tg.start_soon(call)
                await started.wait()
                scope.cancel()
            await cancelled.wait()
            after = await client.call_tool("echo", {"text": "after"})
    assert seen == [("cancelled", True)]
    assert after.content[0].text == "after"


# ---------------------------------------------------------------------------
# Management API
# ---------------------------------------------------------------------------


def test_server_info_and_detail():
    server = MCPServer(
        "info",
        "2.1.0",
        id="srv-1",
        description="An informative server.",
        repository={"url": "https://github.com/x/y"},
        release_date="2026-01-02",
        packages=[{"registryName": "pypi", "name": "info-server", "version": "2.1.0"}],
        remotes=[{"transportType": "streamable-http", "url": "https://x.example/mcp"}],
    )
    assert server.get_server_info() == {
        "id": "srv-1",
        "name": "info",
        "version": "2.1.0",
        "description": "An informative server.",
        "repository": {"url": "https://github.com/x/y", "source": "github"},
        "version_detail": {"version": "2.1.0", "release_date": "2026-01-02", "is_latest": True},
    }
    assert server.get_server_detail() == {
        **server.get_server_info(),
        "packages": [{"registryName": "pypi", "name": "info-server", "version": "2.1.0"}],
        "remotes": [{"transportType": "streamable-http", "url": "https://x.example/mcp"}],
    }
    default_id = MCPServer("info", "2.1.0").id
    assert default_id == MCPServer("info", "2.1.0").id
    assert default_id != MCPServer("info", "2.2.0").id


def test_tool_list_info_and_tool_info(kernel):
    server = MCPServer("list", kernel=kernel, agents={"echoer": EchoAgent()})

    @server.tool(annotations={"readOnlyHint": True})
    def look(q: str) -> str:
        """Look something up."""
        return q

    listing = server.get_tool_list_info()
    assert [t["id"] for t in listing["tools"]] == ["ask_echoer", "look"]
    info = server.get_tool_info("look")
    assert info == {
        "id": "look",
        "name": "look",
        "description": "Look something up.",
        "inputSchema": {
            "additionalProperties": False,
            "properties": {"q": {"title": "Q", "type": "string"}},
            "required": ["q"],
            "type": "object",
        },
        "annotations": {"readOnlyHint": True},
    }
    assert server.get_tool_info("missing") is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "MCPServer: name must be a non-empty string"),
        ({"name": "x", "version": " "}, "MCPServer 'x': version must be a non-empty string"),
    ],
)
def test_server_definition_errors(kwargs, message):
    with pytest.raises(ConfigError) as info:
        MCPServer(**kwargs)
    assert str(info.value) == message


def test_duplicate_definitions_are_config_errors():
    server = MCPServer("dups")

    @server.tool
    def one() -> str:
        """One."""
        return "1"

    with pytest.raises(ConfigError, match=r"tool 'one' is defined twice"):
        server.add_tool(one)
    server.add_resource(Resource("mem://a", "a", lambda: "a"))
    with pytest.raises(ConfigError, match=r"resource 'mem://a' is defined twice"):
        server.add_resource(Resource("mem://a", "a2", lambda: "a"))
    server.add_prompt(Prompt("p", lambda: "p", version="1"))
    with pytest.raises(ConfigError, match=r"prompt 'p@1' is defined twice"):
        server.add_prompt(Prompt("p", lambda: "p", version="1"))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_close_sse_stream_is_a_no_op_without_http(kernel, mode):
    """Off Streamable HTTP there is no response stream to end: the call says so and goes on."""
    server = MCPServer("polling", kernel=kernel)

    @server.tool
    async def poll(ctx: ToolContext) -> str:
        """Try to end the response early."""
        return f"closed={await ctx.close_sse_stream()}"

    async with connect_in_memory(server, mode=mode) as client:
        result = await client.call_tool("poll", {})
    assert result.content[0].text == "closed=False"
