"""The public API is pinned, and importing it stays cheap."""

import json
import subprocess
import sys

import toolkernel

EXPECTED = [
    "AuthInfo",
    "ConfigError",
    "Elicitation",
    "Filter",
    "IndexInfo",
    "Kernel",
    "MCPClient",
    "MCPClientConfig",
    "MCPClientError",
    "MCPServer",
    "MissingDependencyError",
    "PluginLoadError",
    "Prompt",
    "PromptArgument",
    "QueryResult",
    "RegistrationError",
    "RequestValues",
    "Resource",
    "ResourceTemplate",
    "Sampled",
    "ServerStore",
    "SessionEvent",
    "Tool",
    "ToolAnnotations",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolEvent",
    "ToolExecutionError",
    "ToolOutcome",
    "ToolResult",
    "ToolkernelError",
    "UnsupportedFilterError",
    "VectorStore",
    "VectorStoreError",
    "create_tool",
    "hookimpl",
    "prompt",
    "tool",
]


def test_all_is_pinned_and_sorted():
    assert toolkernel.__all__ == EXPECTED
    assert (
        sorted(toolkernel.__all__, key=str.lower) == toolkernel.__all__
        or sorted(toolkernel.__all__) == EXPECTED
    )
    for name in EXPECTED:
        assert getattr(toolkernel, name) is not None


def test_import_loads_no_protocol_or_backend_library():
    """The client and the vector contract load on first use; nothing heavy loads at import."""
    heavy = [
        "toolkernel.client",
        "toolkernel.vectors",
        "toolkernel.filters",
        "mcp",
        "mcp_types",
        "structlog",
        "numpy",
        "httpx",
        "qdrant_client",
        "psycopg",
        "chromadb",
        "opentelemetry.sdk",
        "starlette",
        "uvicorn",
        "jsonschema",
    ]
    code = (
        f"import sys, toolkernel; print(__import__('json').dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


def test_kernel_with_every_installed_plugin_imports_no_backend():
    """Discovering and listing every installed plugin imports none of their backend libraries."""
    backends = [
        "qdrant_client",
        "psycopg",
        "chromadb",
        "numpy",
        "onnxruntime",
        "wordllama",
        "uvicorn",
        "starlette",
        "mcp",
    ]
    code = (
        "import sys, toolkernel; k = toolkernel.Kernel(); k.plugins(); "
        f"print(__import__('json').dumps([m for m in {backends!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == []
