"""The server the official MCP conformance suite tests, written with toolkernel's own API.

Every tool, resource, template and prompt the suite's server scenarios call, named and
shaped as the suite (``@modelcontextprotocol/conformance`` 0.2.0-alpha.12, and 0.1.16 before it)
expects: the 2025 scenarios, the 2026-07-28 ones (input_required round trips, stateless
diagnostics, custom headers), the tasks extension's and a skill for the skills extension. Served by
``toolkernel serve tests/conformance/server.py:app --transport http --port P`` at /mcp;
the test sets ``TOOLKERNEL_HTTP_RETRY_MS`` so SSE polling reconnects quickly.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp_types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

from toolkernel import MCPServer, Resource, ResourceTemplate, ToolContext, create_tool, prompt, tool
from toolkernel._logging import get_logger
from toolkernel.errors import ProtocolError

IMAGE_PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
AUDIO_WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# The server's first log line loads structlog, which can take longer on a busy machine than
# the 500 ms the suite waits for test_logging_tool's answer: load it now, before serving.
get_logger("toolkernel.conformance").debug("conformance fixture loaded")

app = MCPServer(
    "toolkernel-conformance",
    "1.0.0",
    description="Everything the MCP conformance suite asks for.",
    skills=[Path(__file__).parent / "skills" / "pdf-processing"],
)


# -- tools ------------------------------------------------------------------------------------


@app.tool
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@app.tool
def test_image_content() -> list[ImageContent]:
    """Tests image content response."""
    return [ImageContent(type="image", data=IMAGE_PNG_BASE64, mime_type="image/png")]


@app.tool
def test_audio_content() -> list[AudioContent]:
    """Tests audio content response."""
    return [AudioContent(type="audio", data=AUDIO_WAV_BASE64, mime_type="audio/wav")]


@app.tool
def test_embedded_resource() -> list[EmbeddedResource]:
    """Tests embedded resource content response."""
    resource = TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return [EmbeddedResource(type="resource", resource=resource)]


@app.tool
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Tests response with multiple content types (text, image, resource)."""
    resource = TextResourceContents(
        uri="test://mixed-content-resource",
        mime_type="application/json",
        text='{"test": "data", "value": 123}',
    )
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=IMAGE_PNG_BASE64, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=resource),
    ]


@app.tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Tests tool that emits log messages during execution."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@app.tool
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Tests tool that reports progress notifications."""
    await ctx.progress(0, 100, "Completed step 0 of 100")
    await asyncio.sleep(0.05)
    await ctx.progress(50, 100, "Completed step 50 of 100")
    await asyncio.sleep(0.05)
    await ctx.progress(100, 100, "Completed step 100 of 100")
    return "Progress reported"


@app.tool
async def test_sampling(prompt: str, ctx: ToolContext) -> str:
    """Tests server-initiated sampling (LLM completion request)."""
    sampled = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {sampled.text}"


class UserResponse(BaseModel):
    """What test_elicitation asks the user for."""

    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@app.tool
async def test_elicitation(message: str, ctx: ToolContext) -> str:
    """Tests server-initiated elicitation (user input request)."""
    answer = await ctx.elicit(message, UserResponse)
    content = answer.data.model_dump_json() if answer.data is not None else "{}"
    return f"User response: action={answer.action}, content={content}"


class SEP1034Defaults(BaseModel):
    """Every primitive type with a default (SEP-1034)."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


@app.tool
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)."""
    answer = await ctx.elicit("Please provide user information", SEP1034Defaults)
    content = answer.data.model_dump_json() if answer.data is not None else "{}"
    return f"Elicitation result: action={answer.action}, content={content}"


class SEP1330Enums(BaseModel):
    """The five enum shapes of SEP-1330."""

    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["option1", "option2", "option3"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={"items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            }
        },
    )


@app.tool
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Tests elicitation with enum schema variations per SEP-1330."""
    answer = await ctx.elicit("Please select values using different enum schema types", SEP1330Enums)
    content = answer.data.model_dump_json() if answer.data is not None else "{}"
    return f"Elicitation completed: action={answer.action}, content={content}"


@app.tool
def test_error_handling() -> str:
    """Tests error response handling."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool
async def test_reconnection(ctx: ToolContext) -> str:
    """Tests SSE polling by closing the response stream mid-call (SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


async def _json_schema_2020_12(data: dict[str, Any], ctx: ToolContext) -> str:
    """Echo the arguments; the point is the input schema's 2020-12 keywords."""
    return json.dumps(data)


app.add_tool(
    create_tool(
        id="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        input_schema={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": False,
        },
        execute=_json_schema_2020_12,
    )
)


@app.tool
def test_custom_header(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Routes on its region argument, which clients mirror in an Mcp-Param-Region header (SEP-2243)."""
    return f"Region: {region}"


# -- 2026-07-28: input_required round trips (SEP-2322) -------------------------------------------


class Name(BaseModel):
    """A name."""

    name: str


class Confirm(BaseModel):
    """A yes or no."""

    ok: bool


class Color(BaseModel):
    """A favourite colour."""

    color: str


class Context(BaseModel):
    """What a prompt should be about."""

    context: str


@app.tool
async def test_input_required_result_elicitation(ctx: ToolContext) -> str:
    """Asks the user's name (one elicitation), then greets them."""
    answer = await ctx.elicit("What is your name?", Name, key="user_name")
    return f"Hello, {answer.data.name if answer.data else 'stranger'}!"


@app.tool
async def test_input_required_result_sampling(ctx: ToolContext) -> str:
    """Asks the client's LLM one question."""
    sampled = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"The model says: {sampled.text}"


@app.tool
async def test_input_required_result_list_roots(ctx: ToolContext) -> str:
    """Asks the client for its roots and names them."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(r.uri for r in roots)


@app.tool
async def test_input_required_result_request_state(ctx: ToolContext) -> str:
    """Asks for a confirmation; the answer comes back with the signed request state."""
    answer = await ctx.elicit("Please confirm", Confirm, key="confirm")
    return f"state-ok: confirmed={answer.data.ok if answer.data else False}"


@app.tool
async def test_input_required_result_multiple_inputs(ctx: ToolContext) -> str:
    """Asks three questions at once: an elicitation, a sampling request and the roots."""
    answers: dict[str, Any] = {}

    async def name() -> None:
        answers["name"] = await ctx.elicit("What is your name?", Name, key="user_name")

    async def greeting() -> None:
        answers["greeting"] = await ctx.sample("Generate a greeting", max_tokens=50, key="greeting")

    async def roots() -> None:
        answers["roots"] = await ctx.list_roots(key="client_roots")

    async with anyio.create_task_group() as group:
        for ask in (name, greeting, roots):
            group.start_soon(ask)
    return f"{answers['greeting'].text} {answers['name'].data.name}, {len(answers['roots'])} root(s)"


@app.tool
async def test_input_required_result_multi_round(ctx: ToolContext) -> str:
    """Asks two questions, one round each."""
    name = await ctx.elicit("Step 1: What is your name?", Name, key="step1")
    color = await ctx.elicit("Step 2: What is your favorite color?", Color, key="step2")
    return f"{name.data.name if name.data else '?'} likes {color.data.color if color.data else '?'}"


@app.tool
async def test_input_required_result_tampered_state(ctx: ToolContext) -> str:
    """Asks one question; a retry whose request state was altered is refused with -32602."""
    answer = await ctx.elicit("Please confirm", Confirm, key="confirm")
    return f"confirmed={answer.data.ok if answer.data else False}"


@app.tool
async def test_input_required_result_capabilities(ctx: ToolContext) -> str:
    """Asks only what the client can answer: sampling and/or elicitation, as it declared."""
    said: list[str] = []

    async def sample() -> None:
        said.append((await ctx.sample("Say something", max_tokens=20, key="sampling_question")).text)

    async def elicit() -> None:
        answer = await ctx.elicit("What is your name?", Name, key="elicitation_question")
        said.append(answer.data.name if answer.data else "")

    async with anyio.create_task_group() as group:
        if ctx.client_supports("sampling"):
            group.start_soon(sample)
        if ctx.client_supports("elicitation"):
            group.start_soon(elicit)
    return "Answers: " + ", ".join(said)


@prompt()
async def test_input_required_result_prompt(ctx: ToolContext) -> list[PromptMessage]:
    """A prompt that asks the user what it should be about before it renders."""
    answer = await ctx.elicit("What context should the prompt use?", Context, key="user_context")
    context = answer.data.context if answer.data else "nothing"
    return [_user(TextContent(type="text", text=f"Write about {context}."))]


# -- 2026-07-28: stateless diagnostics (SEP-2575) ---------------------------------------------------


@app.tool
async def test_missing_capability(ctx: ToolContext) -> str:
    """Needs sampling: a client that did not declare it is refused with -32021."""
    sampled = await ctx.sample("Say hello", max_tokens=10)
    return sampled.text


@app.tool
async def test_streaming_elicitation(ctx: ToolContext) -> str:
    """Elicits mid-call: on 2026-07-28 an input_required result, never a request on the stream."""
    answer = await ctx.elicit("What is your name?", Name)
    return f"Hello, {answer.data.name if answer.data else 'stranger'}!"


@app.tool
async def test_logging_tool(ctx: ToolContext) -> str:
    """Logs; a 2026-07-28 request that set no log level receives none of it."""
    await ctx.info("test_logging_tool ran")
    return "logged"


def _dynamic_tool() -> str:
    """Exists only between two calls of test_trigger_tool_change."""
    return "dynamic"


@app.tool
async def test_trigger_tool_change() -> str:
    """Adds or removes the tool test_dynamic_tool, then tells clients the list changed."""
    if "test_dynamic_tool" in app.all_tools():
        app.remove_tool("test_dynamic_tool")
    else:
        app.add_tool(tool(_dynamic_tool, name="test_dynamic_tool"))
    await app.notify_list_changed("tools")
    return "tool list changed"


@prompt(name="test_dynamic_prompt")
def _dynamic_prompt() -> str:
    """Exists only between two calls of test_trigger_prompt_change."""
    return "dynamic"


@app.tool
async def test_trigger_prompt_change() -> str:
    """Adds or removes the prompt test_dynamic_prompt, then tells clients the list changed."""
    if "test_dynamic_prompt" in app.all_prompts():
        app.remove_prompt("test_dynamic_prompt")
    else:
        app.add_prompt(_dynamic_prompt)
    await app.notify_list_changed("prompts")
    return "prompt list changed"


# -- tasks (the io.modelcontextprotocol/tasks extension, SEP-2663) ----------------------------------


@app.tool
def greet(name: str) -> str:
    """Greets synchronously; never a task."""
    return f"Hello, {name}!"


@app.tool(task="optional")
async def slow_compute(seconds: float, label: str = "") -> str:
    """Sleeps ``seconds``, then answers: a task when the client supports tasks."""
    await asyncio.sleep(seconds)
    return f"Computed {label or 'result'} after {seconds:g}s"


@app.tool(task="required")
async def failing_job() -> str:
    """Runs only as a task, and ends in a tool error after a moment."""
    await asyncio.sleep(0.5)
    raise RuntimeError("failing_job failed, as it always does")


@app.tool(task="optional")
async def protocol_error_job() -> str:
    """Ends in a protocol error (the task fails rather than completing with isError)."""
    await asyncio.sleep(0.1)
    raise ProtocolError(-32603, "protocol_error_job: internal failure")


class Confirmation(BaseModel):
    """Whether to go ahead."""

    confirm: bool


@app.tool(task="optional")
async def confirm_delete(filename: str, ctx: ToolContext) -> str:
    """Asks for confirmation (the task waits, input_required), then pretends to delete."""
    answer = await ctx.elicit(f"Delete {filename}?", Confirmation)
    confirmed = answer.action == "accept" and answer.data is not None and answer.data.confirm
    return f"{filename} deleted" if confirmed else f"{filename} kept"


class NamedConfirmation(BaseModel):
    """A name and whether to go ahead."""

    name: str = ""
    confirm: bool = False


@app.tool(task="optional")
async def multi_input(ctx: ToolContext) -> str:
    """Asks two questions at once: the task shows both pending until each is answered."""
    names: list[str] = []

    async def ask(n: int) -> None:
        answer = await ctx.elicit(f"Question {n}: your name?", NamedConfirmation)
        names.append(answer.data.name if answer.data else "")

    async with anyio.create_task_group() as group:
        group.start_soon(ask, 1)
        group.start_soon(ask, 2)
    return "Answers: " + ", ".join(sorted(names))


@app.tool(task="required", task_start="detach")
async def test_tool_with_task(ctx: ToolContext) -> str:
    """Asks for a name inside the request (input_required), then goes on as a task."""
    answer = await ctx.elicit("What is your name?", Name, key="user_name")
    await ctx.run_as_task()
    await asyncio.sleep(0.2)
    return f"Hello from the task, {answer.data.name if answer.data else 'stranger'}!"


# -- resources ---------------------------------------------------------------------------------


app.add_resource(
    Resource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource for testing",
        mime_type="text/plain",
        read=lambda: "This is the content of the static text resource.",
    )
)
app.add_resource(
    Resource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
        read=lambda: base64.b64decode(IMAGE_PNG_BASE64),
    )
)
app.add_resource(
    Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource that can be subscribed to for updates",
        mime_type="text/plain",
        read=lambda: "Watched resource content",
    )
)
app.add_resource(
    ResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
        read=lambda id: json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}),
    )
)


# -- prompts -----------------------------------------------------------------------------------


def _user(content: TextContent | ImageContent | EmbeddedResource) -> PromptMessage:
    return PromptMessage(role="user", content=content)


@prompt()
def test_simple_prompt() -> list[PromptMessage]:
    """A simple prompt without arguments."""
    return [_user(TextContent(type="text", text="This is a simple prompt for testing."))]


@prompt(complete={"arg1": lambda value: [v for v in ("paris", "park", "party") if v.startswith(value)]})
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[PromptMessage]:
    """A prompt with required arguments."""
    return [_user(TextContent(type="text", text=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[PromptMessage]:
    """A prompt that includes an embedded resource."""
    resource = TextResourceContents(
        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
    )
    return [
        _user(EmbeddedResource(type="resource", resource=resource)),
        _user(TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@prompt()
def test_prompt_with_image() -> list[PromptMessage]:
    """A prompt that includes image content."""
    return [
        _user(ImageContent(type="image", data=IMAGE_PNG_BASE64, mime_type="image/png")),
        _user(TextContent(type="text", text="Please analyze the image above.")),
    ]


for _prompt in (
    test_input_required_result_prompt,
    test_simple_prompt,
    test_prompt_with_arguments,
    test_prompt_with_embedded_resource,
    test_prompt_with_image,
):
    app.add_prompt(_prompt)
