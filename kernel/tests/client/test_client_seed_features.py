"""Prompt versions, sampling parameters and paginated lists, against toolkernel servers in both eras.

The servers are the documented examples (``docs/examples``), spawned over stdio with
``toolkernel serve``; a recording stdio proxy shows the list requests on the wire.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from toolkernel.client import MCPClient
from toolkernel.errors import MCPClientError

from .conftest import ROOT

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

EXAMPLES = ROOT / "docs/examples"
PROXY = Path(__file__).resolve().parent / "recording_proxy.py"
ERAS = ["legacy", "2026-07-28"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _served(app: str, protocol: str) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "toolkernel", "serve", str(EXAMPLES / app)],
        "cwd": str(ROOT),
        "protocol": protocol,
        "stderr": "devnull",
    }


@pytest.mark.parametrize("protocol", ERAS)
async def test_prompt_versions_are_listed_and_selected(client_kernel: Any, protocol: str) -> None:
    config = {"servers": {"p": _served("server/prompts.py:app", protocol)}, "throw_on_load_error": True}
    async with MCPClient(config, kernel=client_kernel, persist=False) as client:
        assert await client.prompt_versions("p", "summarize") == ["2024-01", "2025-06"]
        assert await client.prompt_versions("p", "explain") == []
        latest = await client.get_prompt("p", "summarize", {"text": "tides"})
        older = await client.get_prompt("p", "summarize", {"text": "tides"}, version="2024-01")
        with pytest.raises(MCPClientError, match="2025-06"):
            await client.get_prompt("p", "summarize", {"text": "tides"}, version="1999")
    assert latest.messages[0].content.text == "Summarize in three bullets:\ntides"  # type: ignore[union-attr]
    assert older.messages[0].content.text == "Summarize: tides"  # type: ignore[union-attr]


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_parameters_reach_the_handler(client_kernel: Any, protocol: str) -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def sample(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="two folders"), model="stub"
        )

    config = {"servers": {"w": _served("tools/roots_sampling.py:app", protocol)}, "throw_on_load_error": True}
    roots = [types.Root(uri="file:///srv/docs", name="docs")]
    async with MCPClient(
        config, kernel=client_kernel, persist=False, sampling_handler=sample, roots=roots
    ) as c:
        out = await c.call_tool("w_summarize_workspace", {})
    assert out.text == "two folders"
    (params,) = asked
    assert params.max_tokens == 100
    assert params.stop_sequences == ["\n\n"]
    assert params.include_context == "thisServer"
    assert params.model_preferences is not None
    assert params.model_preferences.speed_priority == 0.8
    assert [hint.name for hint in params.model_preferences.hints or []] == ["claude"]
    assert "file:///srv/docs" in str(params.messages[0].content)


@pytest.mark.parametrize("protocol", ERAS)
async def test_paginated_lists_are_followed_to_the_end(
    client_kernel: Any, protocol: str, tmp_path: Path
) -> None:
    log = tmp_path / "methods.log"
    server = _served("server/pagination.py:app", protocol)
    server["args"] = [str(PROXY), str(log), sys.executable, *server["args"]]
    config = {"servers": {"c": server}, "throw_on_load_error": True}
    async with MCPClient(config, kernel=client_kernel, persist=False) as client:
        prompts = (await client.list_prompts())["c"]
    assert [p.name for p in prompts] == [f"template_{n}" for n in range(5)]
    assert log.read_text().split().count("prompts/list") == 3  # pages of 2, 2 and 1
