"""The conformance suite's server fixture written with the ``mcp`` SDK's own ``MCPServer``.

The yardstick beside toolkernel's fixture (``tests/conformance/server.py``): the same tools,
resources and prompts, each written the way the SDK's API has it (``Context`` for
logging, progress, elicitation and sampling; ``InputRequiredResult`` returned by hand for
2026-07-28 round trips). The SDK has no tasks extension and no skills, so those fixtures
are absent. Serves Streamable HTTP: ``python sdk_server.py PORT``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from pydantic import BaseModel, Field

from toolkernel_http._events import InMemoryEventStore

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

mcp = MCPServer("sdk-conformance", request_state_security=RequestStateSecurity.ephemeral())


@mcp.tool()
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list[types.ImageContent]:
    """Tests image content response."""
    return [types.ImageContent(type="image", data=IMAGE, mime_type="image/png")]


@mcp.tool()
def test_audio_content() -> list[types.AudioContent]:
    """Tests audio content response."""
    return [types.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")]


def _text_resource(uri: str, text: str, mime: str = "text/plain") -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


@mcp.tool()
def test_embedded_resource() -> list[types.EmbeddedResource]:
    """Tests embedded resource content response."""
    return [_text_resource("test://embedded-resource", "This is an embedded resource content.")]


@mcp.tool()
def test_multiple_content_types() -> list[types.TextContent | types.ImageContent | types.EmbeddedResource]:
    """Tests response with multiple content types (text, image, resource)."""
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
        _text_resource("test://mixed-content-resource", '{"test": "data", "value": 123}', "application/json"),
    ]


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    return "Progress reported"


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    result = await ctx.session.create_message(messages=[message], max_tokens=100)
    return f"LLM response: {getattr(result.content, 'text', '')}"


class UserResponse(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)."""
    answer = await ctx.elicit(message, UserResponse)
    content = answer.data.model_dump_json() if answer.action == "accept" else "{}"
    return f"User response: action={answer.action}, content={content}"


class Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)."""
    answer = await ctx.elicit("Please provide user information", Defaults)
    content = answer.data.model_dump_json() if answer.action == "accept" else "{}"
    return f"Elicitation result: action={answer.action}, content={content}"


class Enums(BaseModel):
    untitledSingle: str = Field(description="Simple enum", json_schema_extra={"enum": ["option1", "option2"]})
    titledSingle: str = Field(
        description="Titled enum",
        json_schema_extra={
            "oneOf": [{"const": "value1", "title": "First"}, {"const": "value2", "title": "Second"}]
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum", json_schema_extra={"enum": ["opt1", "opt2"], "enumNames": ["One", "Two"]}
    )
    untitledMulti: list[str] = Field(
        description="Multi", json_schema_extra={"items": {"type": "string", "enum": ["option1", "option2"]}}
    )
    titledMulti: list[str] = Field(
        description="Titled multi",
        json_schema_extra={
            "items": {"anyOf": [{"const": "value1", "title": "A"}, {"const": "value2", "title": "B"}]}
        },
    )


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema variations per SEP-1330."""
    answer = await ctx.elicit("Please select values using different enum schema types", Enums)
    content = answer.data.model_dump_json() if answer.action == "accept" else "{}"
    return f"Elicitation completed: action={answer.action}, content={content}"


@mcp.tool()
def test_error_handling() -> str:
    """Tests error response handling."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_reconnection(ctx: Context) -> str:
    """Tests SSE polling by closing the response stream mid-call (SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


class Address(BaseModel):
    street: str | None = None
    city: str | None = None


@mcp.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str | None = None, address: Address | None = None) -> str:
    """Echo the arguments."""
    return json.dumps({"name": name})


# MCPServer derives a tool's schema from its signature; the suite wants this exact one.
mcp._tool_manager.get_tool("json_schema_2020_12_tool").parameters = {  # type: ignore[union-attr]
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
}


@mcp.tool()
def test_custom_header(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Routes on its region argument (SEP-2243)."""
    return f"Region: {region}"


# -- 2026-07-28 round trips, by hand: the tool returns InputRequiredResult until answered --------


def _elicit(message: str, field: str, kind: str = "string") -> types.ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def _answers(ctx: Context) -> dict[str, Any]:
    return {
        k: v.model_dump(by_alias=True) if isinstance(v, BaseModel) else v
        for k, v in (ctx.input_responses or {}).items()
    }


def _ask(ctx: Context, wanted: dict[str, Any], state: str | None = None) -> types.InputRequiredResult | None:
    missing = {k: v for k, v in wanted.items() if k not in _answers(ctx)}
    if not missing:
        return None
    return types.InputRequiredResult(input_requests=missing, request_state=state)


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> Any:
    """Asks the user's name."""
    if asked := _ask(ctx, {"user_name": _elicit("What is your name?", "name")}):
        return asked
    name = _answers(ctx)["user_name"].get("content", {}).get("name", "stranger")
    return f"Hello, {name}!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> Any:
    """Asks the client's LLM one question."""
    if asked := _ask(ctx, {"capital_question": _sample("What is the capital of France?", 100)}):
        return asked
    return f"The model says: {_answers(ctx)['capital_question'].get('content', {}).get('text', '')}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> Any:
    """Asks the client for its roots."""
    if asked := _ask(ctx, {"client_roots": types.ListRootsRequest()}):
        return asked
    return "Roots: " + ", ".join(r["uri"] for r in _answers(ctx)["client_roots"].get("roots", []))


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> Any:
    """Asks for a confirmation and round-trips state."""
    if ctx.request_state is None:
        return types.InputRequiredResult(
            input_requests={"confirm": _elicit("Please confirm", "ok", "boolean")}, request_state="round-1"
        )
    return f"state-ok ({ctx.request_state})"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> Any:
    """Asks three questions at once."""
    wanted = {
        "user_name": _elicit("What is your name?", "name"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": types.ListRootsRequest(),
    }
    if asked := _ask(ctx, wanted, state="multiple"):
        return asked
    return "All inputs received"


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> Any:
    """Two rounds, one question each."""
    if ctx.request_state is None:
        return types.InputRequiredResult(
            input_requests={"step1": _elicit("Step 1: What is your name?", "name")}, request_state="round-1"
        )
    if ctx.request_state == "round-1":
        return types.InputRequiredResult(
            input_requests={"step2": _elicit("Step 2: What is your favorite color?", "color")},
            request_state="round-2",
        )
    return "Both steps done"


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> Any:
    """Round-trips state the SDK seals; an altered one is refused by the SDK."""
    if ctx.request_state is None:
        return types.InputRequiredResult(
            input_requests={"confirm": _elicit("Please confirm", "ok", "boolean")}, request_state="sealed"
        )
    return "state accepted"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> Any:
    """Asks only what the client declared."""
    caps = ctx.client_capabilities
    wanted: dict[str, Any] = {}
    if caps is not None and caps.sampling is not None:
        wanted["sampling_question"] = _sample("Say something", 20)
    if caps is not None and caps.elicitation is not None:
        wanted["elicitation_question"] = _elicit("What is your name?", "name")
    if asked := _ask(ctx, wanted):
        return asked
    return "done"


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> Any:
    """A prompt that asks before rendering."""
    if asked := _ask(ctx, {"user_context": _elicit("What context should the prompt use?", "context")}):
        return asked
    return "Write about " + str(_answers(ctx)["user_context"].get("content", {}).get("context"))


@mcp.tool()
async def test_missing_capability(ctx: Context) -> Any:
    """Needs sampling."""
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None:
        from mcp.shared.exceptions import MCPError

        raise MCPError(-32021, "sampling required", {"requiredCapabilities": {"sampling": {}}})
    return "ok"


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> Any:
    """Elicits (input_required on 2026-07-28)."""
    if asked := _ask(ctx, {"name": _elicit("What is your name?", "name")}):
        return asked
    return "ok"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs."""
    await ctx.info("test_logging_tool ran")
    return "logged"


def _dynamic() -> str:
    """Exists between two list-change triggers."""
    return "dynamic"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Adds or removes a tool and says so."""
    try:
        mcp.remove_tool("test_dynamic_tool")
    except Exception:
        mcp.add_tool(_dynamic, name="test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "tool list changed"


@mcp.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Adds a prompt and says so."""
    mcp.prompt(name=f"test_dynamic_prompt_{id(ctx)}")(_dynamic)
    await ctx.notify_prompts_changed()
    return "prompt list changed"


# -- resources and prompts ------------------------------------------------------------------------


@mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing"""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing"""
    return base64.b64decode(IMAGE)


@mcp.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource that can be subscribed to for updates"""
    return "Watched resource content"


@mcp.resource("test://template/{id}/data", name="template", mime_type="application/json")
def template(id: str) -> str:
    """A resource template with parameter substitution"""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
    """A prompt that includes an embedded resource."""
    return [
        _text_resource(resourceUri, "Embedded resource content for testing."),
        "Please process the embedded resource above.",
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[Any]:
    """A prompt that includes image content."""
    return [
        types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
        "Please analyze the image above.",
    ]


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
    values = [v for v in ("paris", "park", "party") if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), has_more=False)


# MCPServer has no decorator for logging/setLevel or resource subscriptions: the low-level server does.
async def _set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def _subscribe(ctx: Any, params: Any) -> types.EmptyResult:
    return types.EmptyResult()


mcp._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)
mcp._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
mcp._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _subscribe)


if __name__ == "__main__":
    mcp.run(
        "streamable-http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        event_store=InMemoryEventStore(),
        retry_interval=100,
    )
