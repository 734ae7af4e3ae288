"""The tool model (@tool, create_tool, output schemas, ToolResult) and the tool error paths over MCP."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ImageContent, TextContent
from pydantic import BaseModel, Field

from toolkernel import (
    ConfigError,
    MCPServer,
    ToolAnnotations,
    ToolContext,
    ToolExecutionError,
    ToolResult,
    create_tool,
    hookimpl,
    tool,
)
from toolkernel.testing import connect_in_memory
from toolkernel.tools import ToolInputError

MODES = ["legacy", "auto"]


class Address(BaseModel):
    street: str
    zip: int = Field(description="Postal code.")


class Total(BaseModel):
    total: int
    unit: str = "eur"


# ---------------------------------------------------------------------------
# Schema from a signature
# ---------------------------------------------------------------------------


def test_tool_schema_from_signature_required_optional_defaults_nested_and_context_excluded():
    @tool
    def order(
        name: str,
        ctx: ToolContext,
        count: int = 3,
        tags: list[str] | None = None,
        addr: Address | None = None,
    ) -> str:
        """Place an order.

        Second paragraph.
        """
        return name

    schema = order.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    assert list(schema["properties"]) == ["name", "count", "tags", "addr"]
    assert "ctx" not in schema["properties"]
    assert schema["properties"]["name"]["type"] == "string"
    assert schema["properties"]["count"] == {"default": 3, "title": "Count", "type": "integer"}
    assert schema["properties"]["tags"]["default"] is None
    assert schema["properties"]["addr"]["anyOf"][0] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"]["required"] == ["street", "zip"]
    assert schema["$defs"]["Address"]["properties"]["zip"]["description"] == "Postal code."
    assert schema["additionalProperties"] is False
    assert order.description == "Place an order.\n\nSecond paragraph."
    assert order.context_param == "ctx"
    assert order.output_schema is None


def test_tool_options_override_name_and_description():
    @tool(name="renamed", description="Explicit.", title="Nice title")
    def fn(x: int) -> int:
        """Docstring that loses."""
        return x

    described = fn.describe()
    assert described["name"] == "renamed"
    assert described["description"] == "Explicit."
    assert described["title"] == "Nice title"


def test_output_schema_from_return_annotation():
    @tool
    def totals(n: int) -> Total:
        """Sum."""
        return Total(total=n)

    assert totals.output_model is Total
    assert totals.output_schema == {
        "properties": {
            "total": {"title": "Total", "type": "integer"},
            "unit": {"default": "eur", "title": "Unit", "type": "string"},
        },
        "required": ["total"],
        "type": "object",
    }
    assert totals.describe()["outputSchema"] == totals.output_schema


def test_annotations_and_meta_use_wire_names():
    @tool(
        annotations={"readOnlyHint": True, "destructive_hint": False, "openWorldHint": True},
        meta={"vendor/x": 1},
    )
    def look(q: str) -> str:
        """Look."""
        return q

    described = look.describe()
    assert described["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
    assert described["_meta"] == {"vendor/x": 1}
    assert ToolAnnotations(idempotent_hint=True).model_dump(by_alias=True, exclude_none=True) == {
        "idempotentHint": True
    }


# ---------------------------------------------------------------------------
# Invalid definitions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "ünï", "a/b", "semi;colon"])
def test_invalid_tool_name_is_config_error(bad):
    with pytest.raises(ConfigError, match=r"tool name .* is not valid"):

        @tool(name=bad)
        def fn() -> None:
            """Doc."""

    with pytest.raises(ConfigError, match=r"tool name .* is not valid"):
        create_tool(id=bad, description="d", execute=lambda i, c: None)


def test_empty_create_tool_id_is_config_error():
    with pytest.raises(ConfigError, match="tool name '' is not valid"):
        create_tool(id="", description="d", execute=lambda i, c: None)


def test_tool_name_of_128_characters_is_accepted():
    @tool(name="x" * 128)
    def fn() -> None:
        """Doc."""

    assert fn.name == "x" * 128


def test_non_string_description_is_config_error():
    with pytest.raises(ConfigError, match="description must be a string"):

        @tool(description=42)  # type: ignore[arg-type]
        def fn() -> None:
            pass


@pytest.mark.parametrize("description", ["", "   "])
def test_create_tool_empty_description_is_config_error(description):
    with pytest.raises(ConfigError, match=r"create_tool\('t'\): description must be a non-empty string"):
        create_tool(id="t", description=description, execute=lambda i, c: None)


def test_create_tool_rejects_non_object_and_invalid_schemas_and_non_callables():
    with pytest.raises(ConfigError, match="input schema must describe an object"):
        create_tool(id="t", description="d", execute=lambda i, c: None, input_schema={"type": "string"})
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        create_tool(id="t", description="d", execute=lambda i, c: None, input_schema={"type": 12})
    with pytest.raises(ConfigError, match="execute must be callable"):
        create_tool(id="t", description="d", execute="nope")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="input_schema must be a pydantic model or a JSON Schema"):
        create_tool(id="t", description="d", execute=lambda i, c: None, input_schema=42)  # type: ignore[arg-type]


def test_var_args_and_unknown_annotations_are_config_errors():
    with pytest.raises(ConfigError, match=r"\*args/\*\*kwargs"):

        @tool
        def fn(*items: int) -> None:
            """Doc."""

    with pytest.raises(ConfigError, match="tool annotations: bogusHint"):
        tool(annotations={"bogusHint": True})(lambda: None)


# ---------------------------------------------------------------------------
# create_tool
# ---------------------------------------------------------------------------


class Query(BaseModel):
    text: str
    limit: int = 5


@pytest.mark.anyio
async def test_create_tool_with_pydantic_model_receives_an_instance(kernel):
    seen: list[Any] = []

    async def execute(data: Query, ctx: ToolContext) -> str:
        seen.append(data)
        return f"{data.text}:{data.limit}"

    t = create_tool(id="search", description="Search.", input_schema=Query, execute=execute)
    assert t.input_schema["required"] == ["text"]
    server = MCPServer("s", tools=[t], kernel=kernel)
    assert await server.execute_tool("search", {"text": "q"}) == "q:5"
    assert seen == [Query(text="q", limit=5)]
    with pytest.raises(ToolExecutionError, match="limit: Input should be a valid integer"):
        await server.execute_tool("search", {"text": "q", "limit": "many"})


@pytest.mark.anyio
async def test_create_tool_with_json_schema_dict_receives_a_dict(kernel):
    seen: list[Any] = []

    def execute(data: dict[str, Any], ctx: ToolContext) -> int:
        seen.append(data)
        return data["a"] + data["b"]

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    t = create_tool(id="add", description="Add.", input_schema=schema, execute=execute)
    assert t.input_model is None
    assert t.input_schema is not None
    assert t.input_schema["required"] == ["a", "b"]
    server = MCPServer("s", tools=[t], kernel=kernel)
    assert await server.execute_tool("add", {"a": 2, "b": 3}) == 5
    assert seen == [{"a": 2, "b": 3}]
    with pytest.raises(ToolExecutionError, match="b: 'x' is not of type 'integer'"):
        await server.execute_tool("add", {"a": 2, "b": "x"})
    with pytest.raises(ToolExecutionError, match=r"\(root\): 'b' is a required property"):
        await server.execute_tool("add", {"a": 2})


@pytest.mark.anyio
async def test_create_tool_without_input_schema_takes_no_input(kernel):
    t = create_tool(id="ping", description="Ping.", execute=lambda data, ctx: "pong")
    assert t.input_schema == {"additionalProperties": False, "properties": {}, "type": "object"}
    server = MCPServer("s", tools=[t], kernel=kernel)
    assert await server.execute_tool("ping") == "pong"
    with pytest.raises(ToolExecutionError, match="extra: Extra inputs are not permitted"):
        await server.execute_tool("ping", {"extra": 1})


@pytest.mark.anyio
async def test_async_callable_object_is_awaited(kernel):
    class Doubler:
        async def __call__(self, data: Query, ctx: ToolContext) -> str:
            return data.text * 2

    t = create_tool(id="double", description="Double.", input_schema=Query, execute=Doubler())
    assert t.is_async is True
    server = MCPServer("s", tools=[t], kernel=kernel)
    assert await server.execute_tool("double", {"text": "ab"}) == "abab"


@pytest.mark.anyio
async def test_sync_tool_runs_in_a_worker_thread_and_async_tool_on_the_loop(kernel):
    threads: dict[str, int] = {}

    def sync_tool() -> str:
        threads["sync"] = threading.get_ident()
        return "s"

    async def async_tool() -> str:
        threads["async"] = threading.get_ident()
        return "a"

    server = MCPServer("s", tools=[sync_tool, async_tool], kernel=kernel)
    assert await server.execute_tool("sync_tool") == "s"
    assert await server.execute_tool("async_tool") == "a"
    loop_thread = threading.get_ident()
    assert threads["async"] == loop_thread
    assert threads["sync"] != loop_thread


def test_validate_input_rejects_non_objects():
    @tool
    def fn(x: int) -> int:
        """Doc."""
        return x

    with pytest.raises(ToolInputError, match="arguments must be an object, got list"):
        fn.validate_input([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ToolInputError, match="arguments must be an object, got str"):
        fn.validate_input("x=1")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Results over MCP
# ---------------------------------------------------------------------------


def _results_server(kernel: Any) -> MCPServer:
    server = MCPServer("results", kernel=kernel)

    @server.tool
    def totals(n: int) -> Total:
        """Structured."""
        return Total(total=n)

    @server.tool
    def totals_dict(n: int) -> Total:
        """Structured from a dict."""
        return {"total": n, "unit": "usd"}  # type: ignore[return-value]

    @server.tool
    def broken() -> Total:
        """Breaks its schema."""
        return {"total": "many"}  # type: ignore[return-value]

    @server.tool(
        output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    )
    def raw_schema(ok: Any) -> Any:
        """JSON Schema output."""
        return {"ok": ok}

    @server.tool
    def full() -> ToolResult:
        """Full control."""
        return ToolResult(
            content=["first", {"type": "text", "text": "second"}],
            structured={"k": 1},
            meta={"vendor/trace": "abc"},
        )

    @server.tool
    def soft_error() -> ToolResult:
        """An error result without raising."""
        return ToolResult(content=["nope"], is_error=True)

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True), meta={"vendor/x": "y"}
    )
    def annotated() -> str:
        """Annotated."""
        return "a"

    @server.tool
    def plain_dict() -> dict[str, int]:
        """Plain dict, no schema."""
        return {"a": 1}

    return server


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_structured_output_tool_result_annotations_meta_over_mcp(kernel, mode):
    async with connect_in_memory(_results_server(kernel), mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        r1 = await client.call_tool("totals", {"n": 2})
        r2 = await client.call_tool("totals_dict", {"n": 7})
        r3 = await client.call_tool("full", {})
        r4 = await client.call_tool("soft_error", {})
        r5 = await client.call_tool("plain_dict", {})
        r6 = await client.call_tool("raw_schema", {"ok": True})

    assert listed["totals"].output_schema is not None
    assert listed["totals"].output_schema["required"] == ["total"]
    assert listed["annotated"].annotations is not None
    assert listed["annotated"].annotations.read_only_hint is True
    assert listed["annotated"].annotations.idempotent_hint is True
    assert listed["annotated"].annotations.destructive_hint is None
    assert listed["annotated"].meta == {"vendor/x": "y"}

    assert r1.is_error is False
    assert r1.structured_content == {"total": 2, "unit": "eur"}
    assert json.loads(r1.content[0].text) == {"total": 2, "unit": "eur"}
    assert r2.structured_content == {"total": 7, "unit": "usd"}
    assert [b.text for b in r3.content] == ["first", "second"]
    assert r3.structured_content == {"k": 1}
    assert r3.meta is not None
    assert r3.meta["vendor/trace"] == "abc"
    assert r4.is_error is True
    assert r4.content[0].text == "nope"
    assert r5.structured_content is None
    assert r5.content[0].text == '{"a": 1}'
    assert r6.structured_content == {"ok": True}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_returning_content_blocks_sends_content_not_structured_output(kernel, mode):
    server = MCPServer("content", kernel=kernel)
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

    @server.tool
    def picture() -> ImageContent:
        """One image."""
        return ImageContent(type="image", data=pixel, mime_type="image/png")

    @server.tool
    def pictures() -> list[ImageContent | TextContent]:
        """An image and its caption."""
        return [
            ImageContent(type="image", data=pixel, mime_type="image/png"),
            TextContent(type="text", text="a dot"),
        ]

    @server.tool
    def images() -> list[ImageContent]:
        """Two images."""
        return [ImageContent(type="image", data=pixel, mime_type="image/png")] * 2

    async with connect_in_memory(server, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        one = await client.call_tool("picture", {})
        two = await client.call_tool("images", {})
        mixed = await client.call_tool("pictures", {})
    assert listed["picture"].output_schema is None
    assert listed["images"].output_schema is None
    assert (one.is_error, one.structured_content) == (False, None)
    assert [(b.type, b.mime_type, b.data) for b in one.content] == [("image", "image/png", pixel)]
    assert [b.type for b in two.content] == ["image", "image"]
    assert [b.type for b in mixed.content] == ["image", "text"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_output_that_breaks_its_schema_is_an_error_naming_the_field(kernel, mode):
    async with connect_in_memory(_results_server(kernel), mode=mode) as client:
        await client.list_tools()
        broken = await client.call_tool("broken", {})
        raw = await client.call_tool("raw_schema", {"ok": "yes"})
    assert broken.is_error is True
    assert broken.structured_content is None
    assert broken.content[0].text.startswith(
        "tool 'broken' returned output that breaks its output schema: total: Input should be a valid integer"
    )
    assert raw.is_error is True
    assert raw.content[0].text == "tool 'raw_schema' output: ok: 'yes' is not of type 'boolean'"


# ---------------------------------------------------------------------------
# Error paths over MCP, both eras
# ---------------------------------------------------------------------------


class RaisingHooks:
    """A plugin whose every tool event hook raises."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def on_tool_input_start(self, event):
        self.calls.append("start")
        raise RuntimeError("hook exploded")

    @hookimpl
    def on_tool_output(self, event):
        self.calls.append("output")
        raise ValueError("output hook exploded")


def _error_server(kernel: Any, callback_log: list[str]) -> MCPServer:
    server = MCPServer("errors", kernel=kernel)

    @server.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    @server.tool
    def boom() -> str:
        """Raises."""
        raise RuntimeError("kaput")

    def bad_callback(event):
        callback_log.append(event.tool_name)
        raise RuntimeError("callback exploded")

    @server.tool(on_input_available=bad_callback, on_output=bad_callback)
    def guarded(n: int) -> int:
        """Has a raising callback."""
        return n * 10

    return server


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_bad_input_is_an_error_result_naming_the_field(kernel, mode):
    async with connect_in_memory(_error_server(kernel, []), mode=mode) as client:
        await client.list_tools()
        wrong_type = await client.call_tool("echo", {"text": 5})
        missing = await client.call_tool("echo", {})
        extra = await client.call_tool("echo", {"text": "a", "other": 1})
    assert wrong_type.is_error is True
    assert wrong_type.content[0].text == "Invalid input for tool 'echo': text: Input should be a valid string"
    assert missing.is_error is True
    assert missing.content[0].text == "Invalid input for tool 'echo': text: Field required"
    assert extra.is_error is True
    assert extra.content[0].text == "Invalid input for tool 'echo': other: Extra inputs are not permitted"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_raising_tool_is_an_error_result_and_the_server_keeps_serving(kernel, mode, log_events):
    async with connect_in_memory(_error_server(kernel, []), mode=mode) as client:
        await client.list_tools()
        failed = await client.call_tool("boom", {})
        after = await client.call_tool("echo", {"text": "still here"})
    assert failed.is_error is True
    assert failed.content[0].text == "Tool 'boom' failed: RuntimeError: kaput"
    assert after.is_error is False
    assert after.content[0].text == "still here"
    warnings = [e for e in log_events if e["event"] == "tool call failed"]
    assert [(e["tool"], e["error"], e["log_level"]) for e in warnings] == [
        ("boom", "RuntimeError: kaput", "warning")
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_raising_per_tool_callback_is_logged_and_the_call_succeeds(kernel, mode, log_events):
    callback_log: list[str] = []
    async with connect_in_memory(_error_server(kernel, callback_log), mode=mode) as client:
        await client.list_tools()
        result = await client.call_tool("guarded", {"n": 4})
    assert result.is_error is False
    assert result.content[0].text == "40"
    assert callback_log == ["guarded", "guarded"]
    logged = [e for e in log_events if e["event"] == "tool callback failed; the call goes on"]
    assert [(e["tool"], e["callback"], e["log_level"]) for e in logged] == [
        ("guarded", "on_input_available", "error"),
        ("guarded", "on_output", "error"),
    ]
    assert all(e["exc_info"] is True for e in logged)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_raising_kernel_event_hook_is_logged_and_the_call_succeeds(kernel_with, mode, log_events):
    hooks = RaisingHooks()
    k = kernel_with()
    name = k.register(hooks, name="raising-hooks")
    async with connect_in_memory(_error_server(k, []), mode=mode) as client:
        await client.list_tools()
        result = await client.call_tool("echo", {"text": "ok"})
    assert result.is_error is False
    assert result.content[0].text == "ok"
    assert hooks.calls == ["start", "output"]
    logged = [e for e in log_events if e["event"] == "event hook failed; the call goes on"]
    assert [(e["hook"], e["plugin"]) for e in logged] == [
        ("on_tool_input_start", name),
        ("on_tool_output", name),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_a_jsonrpc_invalid_params_error(kernel, mode):
    async with connect_in_memory(_error_server(kernel, []), mode=mode) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("no_such_tool", {})
        after = await client.call_tool("echo", {"text": "x"})
    assert info.value.code == -32602
    assert info.value.message == "Unknown tool: 'no_such_tool'"
    assert after.content[0].text == "x"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_unknown_prompt_and_resource_are_errors(kernel, mode):
    async with connect_in_memory(_error_server(kernel, []), mode=mode) as client:
        with pytest.raises(MCPError) as prompt_error:
            await client.get_prompt("no_such_prompt", {})
        with pytest.raises(MCPError) as resource_error:
            await client.read_resource("mem://missing")
    assert prompt_error.value.code == -32602
    assert prompt_error.value.message == "Unknown prompt: 'no_such_prompt'"
    # -32002 on the 2025 era; 2026-07-28 (SEP-2164) uses -32602.
    assert resource_error.value.code == (-32002 if mode == "legacy" else -32602)
    assert resource_error.value.message == "Resource not found: mem://missing"


@pytest.mark.anyio
async def test_execute_tool_unknown_and_failing(kernel):
    server = _error_server(kernel, [])
    with pytest.raises(LookupError, match="MCPServer 'errors' has no tool 'nope'"):
        await server.execute_tool("nope")
    with pytest.raises(ToolExecutionError, match="Tool 'boom' failed: RuntimeError: kaput"):
        await server.execute_tool("boom")
    assert await server.execute_tool("echo", {"text": "direct"}) == "direct"
