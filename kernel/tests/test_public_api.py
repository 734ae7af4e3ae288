"""The public API is pinned, and importing it stays cheap."""

import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
import typing

import pytest

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


# Every public module's __all__, pinned (httpx's test_exported_members does the same).
PUBLIC_MODULES: dict[str, list[str]] = {
    "toolkernel.auth": [
        "AuthInfo",
        "AuthProvider",
        "AuthProviderFactory",
        "ClientAuthFactory",
    ],
    "toolkernel.calls": [
        "ToolCaller",
    ],
    "toolkernel.chunkers": [
        "Chunk",
        "Chunker",
        "ChunkerFactory",
    ],
    "toolkernel.cli": [
        "Command",
        "CommandRegistry",
        "Configure",
        "Run",
        "build_parser",
        "main",
        "port_number",
        "positive_seconds",
    ],
    "toolkernel.client": [
        "HTTPServerConfig",
        "LoadedSkill",
        "MCPClient",
        "MCPClientConfig",
        "MemoryServerStore",
        "NamespacedTool",
        "ReliabilityPolicy",
        "RestartPolicy",
        "ServerSnapshot",
        "ServerState",
        "ServerStore",
        "Skill",
        "SkillFile",
        "SqliteServerStore",
        "StateChange",
        "StdioServerConfig",
        "ToolError",
        "ToolOutput",
        "ToolRef",
    ],
    "toolkernel.client.config": [
        "ContentKind",
        "DEFAULT_OUTPUT_HANDLING",
        "Destination",
        "HTTPServerConfig",
        "MCPClientConfig",
        "ReliabilityPolicy",
        "RestartPolicy",
        "ServerConfig",
        "StdioServerConfig",
        "check_server_name",
        "format_errors",
        "validate_config",
        "validate_server",
    ],
    "toolkernel.client.errors": [
        "CONNECTION_CLOSED",
        "ProtocolError",
        "REQUEST_CANCELLED",
        "REQUEST_TIMEOUT",
        "RequestTimeout",
        "ToolError",
    ],
    "toolkernel.client.storage": [
        "MemoryServerStore",
        "ServerStore",
        "SqliteServerStore",
        "default_store_path",
    ],
    "toolkernel.config": [
        "KernelConfig",
        "env_prefix",
        "find_config",
        "load_config",
        "plugin_settings",
        "section_variables",
    ],
    "toolkernel.context": [
        "Elicitation",
        "InputRequired",
        "LogLevel",
        "ModelPreferences",
        "RequestValues",
        "Root",
        "Sampled",
        "ToolContext",
        "encode_state",
        "state_key",
        "use_state_key",
    ],
    "toolkernel.embedders": [
        "Embedder",
        "EmbedderFactory",
        "caller_shows_progress",
        "progress_shown_by_caller",
        "split_embedder_name",
    ],
    "toolkernel.entities": [
        "EntityExtractor",
        "EntityExtractorFactory",
    ],
    "toolkernel.errors": [
        "ConfigError",
        "MCPClientError",
        "MISSING_REQUIRED_CLIENT_CAPABILITY",
        "MissingDependencyError",
        "PluginLoadError",
        "ProtocolError",
        "RegistrationError",
        "ToolExecutionError",
        "ToolkernelError",
        "missing_capability",
    ],
    "toolkernel.events": [
        "SessionEvent",
        "ToolEvent",
    ],
    "toolkernel.filters": [
        "ALL_OPERATORS",
        "And",
        "Condition",
        "FIELD_OPERATORS",
        "FieldOperator",
        "Filter",
        "FilterLimits",
        "LOGICAL_OPERATORS",
        "Node",
        "Nor",
        "Not",
        "Or",
        "Scalar",
        "check_filter_limits",
        "coerce_filter",
        "matches",
        "parse_filter",
        "regex_search",
        "require_supported",
    ],
    "toolkernel.hookspecs": [
        "on_server_start",
        "on_server_stop",
        "on_session_start",
        "on_session_stop",
        "on_tool_error",
        "on_tool_input_available",
        "on_tool_input_delta",
        "on_tool_input_start",
        "on_tool_output",
        "register_auth_providers",
        "register_chunkers",
        "register_client_auth",
        "register_client_transports",
        "register_commands",
        "register_embedders",
        "register_entity_extractors",
        "register_kb_extensions",
        "register_prompts",
        "register_readers",
        "register_rerankers",
        "register_resources",
        "register_server_transports",
        "register_settings",
        "register_shared_state",
        "register_tool_middleware",
        "register_tools",
        "register_vector_stores",
    ],
    "toolkernel.knowledge": [
        "ChunkRecord",
        "DocumentChunks",
        "ExtensionState",
        "IngestBatch",
        "KBContext",
        "KBExtension",
        "KBExtensionFactory",
        "RetrievalRequest",
        "RetrievedChunk",
        "ScoredChunk",
        "SeedSource",
        "ServedSearch",
        "StateSegment",
    ],
    "toolkernel.matching_store": [
        "MatchingStore",
        "OpenIndex",
    ],
    "toolkernel.middleware": [
        "CallNext",
        "ToolCall",
        "ToolMiddleware",
        "ToolOutcome",
        "chain",
    ],
    "toolkernel.prompts": [
        "Prompt",
        "PromptArgument",
        "PromptOutput",
        "prompt",
    ],
    "toolkernel.readers": [
        "MissingDependency",
        "ReadDocument",
        "Reader",
        "ReaderFunction",
        "Skipped",
    ],
    "toolkernel.registries": [
        "AuthProviderRegistry",
        "ChunkerRegistry",
        "ClientAuthRegistry",
        "ClientTransportRegistry",
        "ClientTransportSpec",
        "EmbedderRegistry",
        "EntityExtractorRegistry",
        "Entry",
        "KBExtensionRegistry",
        "MiddlewareRegistry",
        "OriginResolver",
        "PromptRegistry",
        "ReaderRegistry",
        "ReaderSpec",
        "Registry",
        "RerankerRegistry",
        "ResourceRegistry",
        "ServerTransportRegistry",
        "SettingsRegistry",
        "SharedStateRegistry",
        "ToolRegistry",
        "VectorStoreRegistry",
    ],
    "toolkernel.remote_batches": [
        "RetryOptions",
        "Retryable",
        "map_batches",
        "retry_after",
        "with_retries",
    ],
    "toolkernel.rerankers": [
        "Reranker",
        "RerankerFactory",
    ],
    "toolkernel.resources": [
        "Completer",
        "ReadResult",
        "Resource",
        "ResourceLister",
        "ResourcePage",
        "ResourceTemplate",
        "call_maybe_async",
    ],
    "toolkernel.server": [
        "Agent",
        "AskInput",
        "MCPServer",
        "Package",
        "Remote",
        "Repository",
        "Workflow",
    ],
    "toolkernel.shared_state": [
        "SCOPE_SEPARATOR",
        "STORE_TIMEOUT_S",
        "Broadcast",
        "BroadcastSubscriptionBus",
        "EventLog",
        "InMemoryBroadcast",
        "InMemorySessionRegistry",
        "MemorySharedState",
        "QueuedJob",
        "SessionRecord",
        "SessionRegistry",
        "SharedState",
        "SharedStateFactory",
        "StoreUnavailable",
        "TaskQueue",
        "redact_url",
    ],
    "toolkernel.skills": [
        "DIRECTORY_MIME",
        "MAX_BYTES",
        "MAX_FILES",
        "SKILLS_EXTENSION",
        "SKILL_MD",
        "Skill",
        "mime_type",
    ],
    "toolkernel.tasks": [
        "ANSWER_TIMEOUT",
        "DEFAULT_ANSWER_TIMEOUT_S",
        "DEFAULT_POLL_INTERVAL_MS",
        "DEFAULT_TTL_MS",
        "InMemoryTaskStore",
        "TASKS_EXTENSION",
        "TERMINAL",
        "TaskHandle",
        "TaskRecord",
        "TaskRunner",
        "TaskStatus",
        "TaskStore",
        "TaskSupport",
        "Work",
    ],
    "toolkernel.store_helpers": [
        "LazyResource",
        "QueryArgs",
        "check_delete",
        "check_filter",
        "check_query",
        "create_index_once",
        "ids_to_delete",
        "matching_ids",
        "score_from_distance",
        "search_matching",
    ],
    "toolkernel.testing": [
        "connect_in_memory",
        "connect_sdk_client",
    ],
    "toolkernel.testing.services": [
        "ChromaService",
        "LOG_TAIL_LINES",
        "PostgresService",
        "ServiceStartError",
        "chroma_server",
        "free_port",
        "log_tail",
        "postgres_server",
        "postgres_standby",
        "start_postgres",
        "stop_postgres",
    ],
    "toolkernel.testing.readers": ["ReaderContract"],
    "toolkernel.testing.stores": [
        "FILTER_CASES",
        "FILTER_RECORDS",
        "NUMBER_CASES",
        "NUMBER_RECORDS",
        "SOLE_OPERATOR_FILTERS",
        "VectorStoreContract",
        "exact_scores",
    ],
    "toolkernel.threads": [
        "WorkerThreads",
    ],
    "toolkernel.tools": [
        "Tool",
        "ToolAnnotations",
        "ToolCallback",
        "ToolInputError",
        "ToolOutputError",
        "ToolResult",
        "create_tool",
        "text_block",
        "tool",
    ],
    "toolkernel.transports": [
        "ClientTransportFactory",
        "ClientTransportOptions",
        "ReadStreamBase",
        "ServeOptions",
        "ServerTransport",
        "ServerTransportFactory",
        "ServingApp",
        "WriteStreamBase",
    ],
    "toolkernel.vectors": [
        "FilterInput",
        "IndexExistsError",
        "IndexInfo",
        "IndexNotFoundError",
        "InvalidFilterError",
        "METRICS",
        "Metadata",
        "MetadataValue",
        "Metric",
        "QueryResult",
        "Scalar",
        "UnsupportedFilterError",
        "UpsertBatch",
        "VectorInputError",
        "VectorStore",
        "VectorStoreError",
        "VectorStoreFactory",
        "check_index_args",
        "check_index_name",
        "check_metadata",
        "check_options",
        "check_top_k",
        "check_upsert",
        "check_vector",
        "query_results",
    ],
    "toolkernel.wire": [
        "answering",
        "encode_message",
        "encode_result",
        "misplaced_id",
        "refusal",
        "too_long",
        "valid_id",
    ],
}


def _public_modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(toolkernel.__path__, "toolkernel.")
        if not any(part.startswith("_") for part in info.name.split(".")[1:])
    )


def test_every_public_module_is_pinned():
    assert _public_modules() == sorted(PUBLIC_MODULES)


@pytest.mark.parametrize("name", sorted(PUBLIC_MODULES))
def test_module_all_is_pinned_and_complete(name):
    module = importlib.import_module(name)
    assert module.__all__ == PUBLIC_MODULES[name]
    for exported in module.__all__:
        assert hasattr(module, exported), f"{name}.__all__ names {exported!r}, which does not exist"
    source = inspect.getsource(module)
    defined = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, typing.TypeVar)
        and not inspect.ismodule(value)
        and (
            getattr(value, "__module__", None) == name
            if inspect.isclass(value) or inspect.isfunction(value)
            else re.search(rf"^{attr}\s*(:[^=]*)?=", source, re.M) is not None
        )
    }
    missing = sorted(defined - set(module.__all__))
    assert not missing, f"{name} defines public {missing} outside __all__: export them or add a leading _"
