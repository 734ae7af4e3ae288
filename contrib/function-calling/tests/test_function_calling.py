"""Tool definitions and dispatch against the real OpenAI and Anthropic SDK types and a real MCP server.

No network and no model: the tests build the SDKs' own tool-call objects (what a
response would hold), dispatch them to a toolkernel server spawned over stdio, and
validate what comes back against the SDKs' parameter types.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from anthropic.types import TextBlock, ToolParam, ToolResultBlockParam, ToolUseBlock
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter

from toolkernel.client import MCPClient, NamespacedTool
from toolkernel_function_calling import Dispatcher, anthropic_tools, openai_response_tools, openai_tools

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

APP = '''
from mcp_types import ImageContent

from toolkernel import MCPServer

app = MCPServer("calc", "1.0.0")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@app.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@app.tool
def dot():  # no return annotation: an annotated model would be sent as structured content
    """A 1x1 PNG."""
    return ImageContent(type="image", mime_type="image/png", data=PNG)


@app.tool
def now() -> str:
    """No parameters at all."""
    return "noon"
'''


def _valid(kind: Any, value: dict[str, Any]) -> None:
    """``value`` validates as the SDK's TypedDict ``kind`` and has no top-level key it does not know."""
    TypeAdapter(kind).validate_python(value)
    assert set(value) <= kind.__required_keys__ | kind.__optional_keys__, sorted(value)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MCPClient]:
    app = tmp_path_factory.mktemp("calc") / "calc.py"
    app.write_text(APP)
    server = {
        "command": sys.executable,
        "args": ["-m", "toolkernel", "serve", f"{app}:app"],
        "stderr": "devnull",
    }
    config = {"servers": {"calc": server}, "throw_on_load_error": True}
    async with MCPClient(config, persist=False) as started:
        yield started


@pytest.fixture(scope="module")
async def tools(client: MCPClient) -> list[NamespacedTool]:
    return await client.list_tools()


async def test_openai_chat_tools_match_the_sdk_type(tools: list[NamespacedTool]) -> None:
    definitions = openai_tools(tools)
    for definition in definitions:
        _valid(ChatCompletionFunctionToolParam, definition)
    by_name = {d["function"]["name"]: d["function"] for d in definitions}
    assert set(by_name) == {"calc_add", "calc_fail", "calc_dot", "calc_now"}
    assert by_name["calc_add"]["description"] == "Add two integers."
    assert by_name["calc_add"]["parameters"]["required"] == ["a", "b"]
    assert by_name["calc_now"]["parameters"]["properties"] == {}
    assert all(d["function"]["strict"] for d in openai_tools(tools, strict=True))


async def test_openai_responses_and_anthropic_tools_match_the_sdk_types(tools: list[NamespacedTool]) -> None:
    for definition in openai_response_tools(tools):
        _valid(FunctionToolParam, definition)
    for definition in anthropic_tools(tools):
        _valid(ToolParam, definition)
    (add,) = [d for d in anthropic_tools(tools) if d["name"] == "calc_add"]
    assert add["input_schema"]["properties"]["a"]["type"] == "integer"


def _chat_call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(
        id=call_id, type="function", function=Function(name=name, arguments=arguments)
    )


async def test_openai_chat_tool_calls_are_answered_in_order(client: MCPClient) -> None:
    calls = [
        _chat_call("c1", "calc_add", json.dumps({"a": 2, "b": 40})),
        _chat_call("c2", "calc_fail", json.dumps({"reason": "on purpose"})),
        _chat_call("c3", "calc_add", "{not json"),
        _chat_call("c4", "calc_missing", "{}"),
        _chat_call("c5", "calc_now", ""),
    ]
    answers = await Dispatcher(client).openai(calls)
    for answer in answers:
        _valid(ChatCompletionToolMessageParam, answer)
    assert [a["tool_call_id"] for a in answers] == ["c1", "c2", "c3", "c4", "c5"]
    texts = [a["content"] for a in answers]
    assert texts[0] == "42"
    assert texts[1].startswith("Error:")
    assert "on purpose" in texts[1]
    assert "not valid JSON" in texts[2]
    assert "unknown tool 'calc_missing'" in texts[3]
    assert texts[4] == "noon"


async def test_openai_dicts_work_as_well_as_sdk_objects(client: MCPClient) -> None:
    call = _chat_call("d1", "calc_add", '{"a": 1, "b": 2}').model_dump()
    assert await Dispatcher(client).openai([call]) == [{"role": "tool", "tool_call_id": "d1", "content": "3"}]


async def test_openai_responses_function_calls(client: MCPClient) -> None:
    items = [
        ResponseFunctionToolCall(
            type="function_call", call_id="r1", name="calc_add", arguments='{"a": 5, "b": 6}'
        ),
    ]
    (answer,) = await Dispatcher(client).openai_responses(items)
    _valid(FunctionCallOutput, answer)
    assert answer == {"type": "function_call_output", "call_id": "r1", "output": "11"}


async def test_anthropic_tool_use_blocks(client: MCPClient) -> None:
    content = [
        TextBlock(type="text", text="Let me compute that."),
        ToolUseBlock(type="tool_use", id="t1", name="calc_add", input={"a": 20, "b": 22}),
        ToolUseBlock(type="tool_use", id="t2", name="calc_fail", input={"reason": "nope"}),
        ToolUseBlock(type="tool_use", id="t3", name="calc_dot", input={}),
    ]
    results = await Dispatcher(client).anthropic(content)
    for result in results:
        _valid(ToolResultBlockParam, result)
    assert [r["tool_use_id"] for r in results] == ["t1", "t2", "t3"]
    assert results[0]["content"] == [{"type": "text", "text": "42"}]
    assert results[0]["is_error"] is False
    assert results[1]["is_error"] is True
    assert "nope" in results[1]["content"][0]["text"]
    images = [b for b in results[2]["content"] if b["type"] == "image"]
    assert images[0]["source"]["media_type"] == "image/png"
    assert images[0]["source"]["type"] == "base64"
