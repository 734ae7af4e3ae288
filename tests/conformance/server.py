"""The server the official MCP conformance suite tests, written with toolkernel's own API.

Every tool, resource, template and prompt the suite's server scenarios call, named and
shaped as the suite (``@modelcontextprotocol/conformance`` 0.1.16) expects. Served by
``toolkernel serve tests/conformance/server.py:app --transport http --port P`` at /mcp;
the test sets ``TOOLKERNEL_HTTP_RETRY_MS`` so SSE polling reconnects quickly.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from mcp_types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

from toolkernel import MCPServer, Resource, ResourceTemplate, ToolContext, create_tool, prompt

IMAGE_PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
AUDIO_WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

app = MCPServer(
    "toolkernel-conformance", "1.0.0", description="Everything the MCP conformance suite asks for."
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
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                }
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
        execute=_json_schema_2020_12,
    )
)


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
    test_simple_prompt,
    test_prompt_with_arguments,
    test_prompt_with_embedded_resource,
    test_prompt_with_image,
):
    app.add_prompt(_prompt)
