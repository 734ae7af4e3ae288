"""LangChain tools from real MCP servers, invoked through LangChain.

The servers are real: server-everything (npm) over stdio and a toolkernel server
spawned with ``toolkernel serve``. Only the agent-loop test uses a fake: no hosted
chat model can be reached from the test machine, so LangGraph's prebuilt agent is
driven by a scripted chat model that asks for one tool call and then answers; the tool
call itself goes to the real server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from toolkernel.client import MCPClient
from toolkernel.errors import ConfigError
from toolkernel_langchain import load_tools

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / "tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TK_APP = '''
from toolkernel import MCPServer

app = MCPServer("tk-tools", "1.0.0")


@app.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool
def divide(a: float, b: float) -> float:
    """a / b."""
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
'''


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _everything() -> dict[str, Any]:
    if not EVERYTHING.exists():
        message = f"server-everything not installed ({EVERYTHING}): run `cd tests/node && npm ci`"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return {"command": "node", "args": [str(EVERYTHING), "stdio"], "stderr": "devnull"}


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MCPClient]:
    app = tmp_path_factory.mktemp("tk") / "tk_tools.py"
    app.write_text(TK_APP)
    config = {
        "servers": {
            "everything": _everything(),
            "tk": {
                "command": sys.executable,
                "args": ["-m", "toolkernel", "serve", f"{app}:app"],
                "stderr": "devnull",
            },
        },
        "throw_on_load_error": True,
    }
    async with MCPClient(config, persist=False) as started:
        yield started


@pytest.fixture(scope="module")
async def tools(client: MCPClient) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in await load_tools(client)}


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call-{name}", "type": "tool_call"}


async def test_every_tool_of_both_servers_is_a_structured_tool(
    client: MCPClient, tools: dict[str, BaseTool]
) -> None:
    assert {t.name for t in await client.list_tools()} == set(tools)
    assert {"everything_echo", "everything_get-sum", "tk_echo", "tk_divide"} <= set(tools)
    echo = tools["tk_echo"]
    assert isinstance(echo, StructuredTool)
    assert echo.response_format == "content_and_artifact"
    assert echo.description == "Return the text unchanged."
    assert echo.args == {"text": {"title": "Text", "type": "string"}}


async def test_invoking_a_toolkernel_tool_gives_a_tool_message(tools: dict[str, BaseTool]) -> None:
    message = await tools["tk_echo"].ainvoke(_call("tk_echo", {"text": "through LangChain"}))
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call-tk_echo"
    assert message.status == "success"
    assert message.content == [{"type": "text", "text": "through LangChain"}]


async def test_server_everything_sum_and_structured_content(tools: dict[str, BaseTool]) -> None:
    summed = await tools["everything_get-sum"].ainvoke(_call("everything_get-sum", {"a": 2, "b": 40}))
    assert "42" in summed.content[0]["text"]
    weather = await tools["everything_get-structured-content"].ainvoke(
        _call("everything_get-structured-content", {"location": "Chicago"})
    )
    assert weather.artifact["structured_content"] == {
        "temperature": 36,
        "conditions": "Light rain / drizzle",
        "humidity": 82,
    }


async def test_images_stay_in_the_artifact_text_goes_to_the_model(tools: dict[str, BaseTool]) -> None:
    message = await tools["everything_get-tiny-image"].ainvoke(_call("everything_get-tiny-image", {}))
    assert all(block["type"] == "text" for block in message.content)
    images = [b for b in message.artifact["blocks"] if b["type"] == "image"]
    assert images
    assert images[0]["mime_type"] == "image/png"
    assert images[0]["base64"]


async def test_a_tool_error_is_an_error_tool_message(tools: dict[str, BaseTool]) -> None:
    message = await tools["tk_divide"].ainvoke(_call("tk_divide", {"a": 1, "b": 0}))
    assert message.status == "error"
    assert "cannot divide by zero" in str(message.content)


async def test_a_tool_error_raises_when_not_handled(client: MCPClient) -> None:
    (divide,) = [
        t for t in await load_tools(client, servers=["tk"], handle_tool_errors=False) if "divide" in t.name
    ]
    with pytest.raises(ToolException, match="cannot divide by zero"):
        await divide.ainvoke({"a": 1, "b": 0})


async def test_unknown_server_names_are_refused(client: MCPClient) -> None:
    with pytest.raises(ConfigError, match="nope"):
        await load_tools(client, servers=["nope"])


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model (no hosted model can be reached here): plays back scripted messages."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_langgraph_prebuilt_agent_calls_the_real_tool(tools: dict[str, BaseTool]) -> None:
    """The agent loop with a fake model; the tool call it makes reaches server-everything."""
    from langgraph.prebuilt import create_react_agent  # deprecated for langchain.agents, still shipped

    script = iter(
        [
            AIMessage(content="", tool_calls=[_call("everything_get-sum", {"a": 19, "b": 23})]),
            AIMessage(content="The sum is 42."),
        ]
    )
    agent = create_react_agent(ScriptedChatModel(messages=script), list(tools.values()))
    state = await agent.ainvoke({"messages": [("user", "What is 19 + 23?")]})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    assert tool_messages[0].name == "everything_get-sum"
    assert "42" in tool_messages[0].content[0]["text"]
    assert state["messages"][-1].content == "The sum is 42."
