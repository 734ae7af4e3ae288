"""docs/plugins/http.md is complete and its examples run."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from toolkernel_http import HTTPClientOptions, HTTPServerOptions, InMemoryEventStore, MCPHTTPApp

from .conftest import make_server, serving

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugins" / "http.md"
TEXT = DOC.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)


def _run(block: str) -> dict[str, Any]:
    """Execute a doc block with ``app`` importable as the user's server module."""
    module = types.ModuleType("app")
    module.app = make_server()  # type: ignore[attr-defined]
    sys.modules["app"] = module
    try:
        namespace: dict[str, Any] = {}
        exec(compile(block, str(DOC), "exec"), namespace)
        return namespace
    finally:
        del sys.modules["app"]


def _block(needle: str) -> str:
    return next(b for b in BLOCKS if needle in b)


@pytest.mark.parametrize("model", [HTTPServerOptions, HTTPClientOptions])
def test_every_option_is_documented(model: type[Any]) -> None:
    """Each option field has a row in the page's tables."""
    missing = [name for name in model.model_fields if f"| `{name}` |" not in TEXT]
    assert not missing, f"undocumented {model.__name__} fields: {missing}"


def test_event_store_example() -> None:
    """The event store example builds an app on a bigger in-memory store."""
    namespace = _run(_block("InMemoryEventStore(max_events=100_000)"))
    assert isinstance(namespace["mcp_app"], MCPHTTPApp)
    store = namespace["options"].event_store
    assert isinstance(store, InMemoryEventStore)
    assert store.max_events == 100_000


@pytest.mark.anyio
async def test_starlette_mount_example_serves() -> None:
    """The mounting example answers tool calls at /tools/mcp."""
    namespace = _run(_block("starlette_app = Starlette("))
    with anyio.fail_after(60):
        async with (
            serving(namespace["starlette_app"]) as base,
            Client(streamable_http_client(f"{base}/tools/mcp"), mode="auto") as client,  # type: ignore[arg-type]
        ):
            result = await client.call_tool("echo", {"text": "docs"})
            assert result.content[0].text == "docs"  # type: ignore[union-attr]


def test_fastapi_mount_example() -> None:
    """The FastAPI variant mounts the same app (runs where FastAPI is installed)."""
    pytest.importorskip("fastapi", reason="FastAPI comes with toolkernel-http[test]")
    namespace = _run(_block("fastapi_app = FastAPI("))
    assert namespace["fastapi_app"].router.lifespan_context is not None
