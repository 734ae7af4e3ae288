"""MCPClient's pure parts: config validation, tool names, content mapping, stores."""

from __future__ import annotations

import mcp_types as types
import pytest

from toolkernel.client import MCPClient, MCPClientConfig, MemoryServerStore, RestartPolicy, SqliteServerStore
from toolkernel.client._content import map_result
from toolkernel.client._names import MAX_TOOL_NAME, ToolRef, build_table
from toolkernel.client.config import validate_server
from toolkernel.errors import ConfigError

# -- config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"servers": {"a": {"url": "ftp://x"}}}, "servers.a.url: must be an http:// or https:// URL"),
        (
            {"servers": {"a": {"neither": 1}}},
            "servers.a: a server needs either `command` (stdio) or `url` (HTTP)",
        ),
        (
            {"servers": {"a": {"command": "x", "timeout": 0}}},
            "servers.a.timeout: Input should be greater than 0",
        ),
        ({"servers": {"a": {"command": ""}}}, "servers.a.command: String should have at least 1 character"),
        (
            {"servers": {"a": {"command": "x", "colour": 1}}},
            "servers.a.colour: Extra inputs are not permitted",
        ),
        ({"servers": {"a": {"url": "http://h", "transport": "ws"}}}, "servers.a.transport: Input should be"),
        ({"servers": {"a": {"command": "x", "protocol": "v2"}}}, "servers.a.protocol: use auto, legacy or"),
        ({"servers": {"a b": {"command": "x"}}}, "servers: server name 'a b': use 1-64 letters"),
        ({"policy": {"stdio_restart": {"max_attempts": -1}}}, "policy.stdio_restart.max_attempts:"),
        (
            {"output_handling": {"image": "model"}},
            "output_handling.image: Input should be 'content' or 'artifact'",
        ),
        ({"timeout": "soon"}, "timeout: Input should be a valid number"),
    ],
)
def test_config_errors_name_the_field_path(config: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        MCPClient(config, store=MemoryServerStore())
    assert message in str(info.value)


def test_server_kinds_and_defaults() -> None:
    config = MCPClientConfig.model_validate(
        {"servers": {"local": {"command": "node", "args": ["s.js"]}, "web": {"url": "https://h/mcp"}}}
    )
    assert config.servers["local"].kind == "stdio"
    assert config.servers["web"].kind == "http"
    assert config.output_handling == {
        "text": "content",
        "image": "artifact",
        "audio": "artifact",
        "resource": "artifact",
        "resource_link": "content",
    }
    everything_aside = MCPClientConfig.model_validate({"output_handling": "artifact"})
    assert set(everything_aside.output_handling.values()) == {"artifact"}


def test_validate_server_names_the_server() -> None:
    with pytest.raises(ConfigError, match=r"servers\.docs\.url: must be an http"):
        validate_server("docs", {"url": "docs.example.com"})


def test_backoff_grows_and_is_capped() -> None:
    policy = RestartPolicy(delay=1, multiplier=2, max_delay=5, jitter=0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 10)] == [1, 2, 4, 5, 5]
    jittered = RestartPolicy(delay=1, jitter=0.5)
    assert all(0.5 <= jittered.backoff(1) <= 1.5 for _ in range(50))


# -- names ----------------------------------------------------------------------------------------


def test_names_are_server_prefixed_and_reversible() -> None:
    table = build_table([("a", "x"), ("b", "x"), ("a", "y")])
    assert table == {"a_x": ToolRef("a", "x"), "a_y": ToolRef("a", "y"), "b_x": ToolRef("b", "x")}


def test_long_and_unsafe_names_fit_and_never_collide() -> None:
    long_tool = "t" * 100
    table = build_table(
        [("srv", long_tool), ("srv", long_tool + "2"), ("s", "a.b"), ("s", "a_b")], extra_prefix="tk"
    )
    assert all(len(name) <= MAX_TOOL_NAME for name in table)
    assert all(
        set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") for name in table
    )
    assert sorted(ref.tool for ref in table.values()) == sorted([long_tool, long_tool + "2", "a.b", "a_b"])
    assert table["tk_s_a_b"] == ToolRef("s", "a_b")


def test_without_server_prefix_only_duplicates_are_prefixed() -> None:
    table = build_table([("a", "x"), ("b", "x"), ("a", "only")], prefix_with_server=False)
    assert set(table) == {"a_x", "b_x", "only"}


# -- content ---------------------------------------------------------------------------------------


def _result() -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="hello"),
            types.ImageContent(type="image", data="aW1n", mime_type="image/png"),
            types.AudioContent(type="audio", data="YXVk", mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="A", mime_type="text/plain"),
            ),
            types.ResourceLink(type="resource_link", uri="file:///b.bin", name="b", mime_type="x/y"),
        ],
        structured_content={"k": 1},
    )


def test_blocks_split_into_content_and_artifacts_by_type() -> None:
    config = MCPClientConfig()
    out = map_result("s", "t", _result(), dict(config.output_handling))
    assert out.content == [
        {"type": "text", "text": "hello"},
        {"type": "file", "url": "file:///b.bin", "mime_type": "x/y", "extras": {"name": "b"}},
    ]
    assert out.artifacts == [
        {"type": "image", "base64": "aW1n", "mime_type": "image/png"},
        {"type": "audio", "base64": "YXVk", "mime_type": "audio/wav"},
        {"type": "text-plain", "text": "A", "mime_type": "text/plain", "extras": {"uri": "file:///a.txt"}},
    ]
    assert out.structured_content == {"k": 1}
    assert out.text == "hello"


def test_output_handling_is_configurable() -> None:
    config = MCPClientConfig.model_validate({"output_handling": {"image": "content", "text": "artifact"}})
    out = map_result("s", "t", _result(), dict(config.output_handling))
    assert [b["type"] for b in out.content] == ["image", "file"]
    assert [b["type"] for b in out.artifacts] == ["text", "audio", "text-plain"]


# -- stores -----------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_store_round_trip(kind: str, tmp_path: object) -> None:
    from pathlib import Path

    store = MemoryServerStore() if kind == "memory" else SqliteServerStore(Path(str(tmp_path)) / "s.db")
    await store.save("app", "b", {"url": "http://h/mcp", "headers": {"x": "1"}})
    await store.save("app", "a", {"command": "node"})
    await store.save("other", "a", {"command": "python"})
    await store.save("app", "a", {"command": "deno"})
    assert await store.load("app") == {
        "a": {"command": "deno"},
        "b": {"url": "http://h/mcp", "headers": {"x": "1"}},
    }
    await store.delete("app", "b")
    await store.delete("app", "missing")
    assert await store.load("app") == {"a": {"command": "deno"}}
    assert await store.load("other") == {"a": {"command": "python"}}
    await store.close()


def test_a_store_must_implement_the_protocol() -> None:
    with pytest.raises(ConfigError, match="store must implement ServerStore"):
        MCPClient({}, store=object())  # type: ignore[arg-type]


def test_importing_the_client_stays_cheap() -> None:
    """So ``toolkernel`` can re-export MCPClient without loading the SDK or logging at import."""
    import json
    import subprocess
    import sys

    heavy = ["mcp", "mcp_types", "structlog", "httpx", "sqlite3"]
    code = (
        f"import sys, json, toolkernel.client; print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []
