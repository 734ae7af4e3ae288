"""Testing kit for toolkernel and its plugins: a pytest plugin plus helpers.

Install it with ``pip install 'toolkernel[test]'``; enable it with ``-p toolkernel.testing``
or ``pytest_plugins = ["toolkernel.testing"]`` in a top-level ``conftest.py``.
Fixtures: ``kernel`` (a fresh kernel with only the built-ins), ``kernel_with``
(the same plus given plugins), ``spans`` (spans recorded in memory), ``log_events``
(structlog events captured as dicts) and ``anyio_backend`` (asyncio). Helpers:
:func:`connect_in_memory` connects an ``mcp`` SDK client to a server through memory
streams, running the full kernel path without a subprocess. Contract suites per
plugin kind live in submodules (``toolkernel.testing.stores``).
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

try:
    import pytest
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "toolkernel.testing needs pytest: pip install 'toolkernel[test]'", name=exc.name
    ) from exc

from toolkernel.errors import ConfigError, MCPClientError

if TYPE_CHECKING:
    from mcp.client import Client
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolkernel._kernel import Kernel
    from toolkernel.server import MCPServer

__all__ = ["connect_in_memory", "connect_sdk_client"]


@contextlib.asynccontextmanager
async def connect_in_memory(
    server: MCPServer, *, kernel: Kernel | None = None, mode: str = "legacy", **client_options: Any
) -> AsyncIterator[Client]:
    """An SDK ``Client`` talking to ``server`` over memory streams, through the kernel's full path.

    ``mode`` is the client's protocol era: ``"legacy"`` (the 2025 handshake) or
    ``"auto"`` (2026-07-28 ``server/discover``).
    """
    import anyio
    from mcp.client import Client
    from mcp.shared.message import SessionMessage

    if kernel is not None:
        server._kernel = kernel
    app = server.kernel.serving_app(server)
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](100)

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        yield to_client_recv, to_server_send

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: app.run_session(to_server_recv, to_client_send, transport="memory"))
        try:
            async with Client(transport(), mode=mode, **client_options) as client:
                yield client
        finally:
            tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def connect_sdk_client(
    kernel: Kernel, server: str, *, mode: str = "auto", **client_options: Any
) -> AsyncIterator[Client]:
    """A bare SDK ``Client`` over the kernel's client transport for ``server`` (a URL or a command line).

    For tests of transports and eras below :class:`~toolkernel.MCPClient`; protocol
    errors surface as :class:`~toolkernel.MCPClientError`.
    """
    from mcp.client import Client
    from mcp.shared.exceptions import MCPError

    if not server.strip():
        raise ConfigError("SERVER is empty: give a URL or a command line")
    target: str | list[str] = server if "://" in server else shlex.split(server)
    transport = kernel.client_transport(target if isinstance(target, list) else server)
    if mode not in ("auto", "legacy") and not mode[:4].isdigit():
        raise ConfigError(f"--mode {mode!r}: use auto, legacy or a protocol version such as 2026-07-28")
    try:
        async with Client(transport, mode=mode, **client_options) as client:
            yield client
    except BaseException as exc:
        leaf = _single_leaf(exc)
        if isinstance(leaf, MCPError):
            raise MCPClientError(server, leaf.message, leaf.code) from leaf
        if leaf is not exc:
            raise leaf from None
        raise


def _single_leaf(exc: BaseException) -> BaseException:
    """The one real error inside nested exception groups (the SDK's task groups add them)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, the backend the kernel's transports use."""
    return "asyncio"


@pytest.fixture
def kernel() -> Kernel:
    """A fresh kernel with only the built-in plugins (no entry-point discovery)."""
    from toolkernel._kernel import Kernel

    return Kernel(load_entry_points=False)


@pytest.fixture
def kernel_with() -> Callable[..., Kernel]:
    """``kernel_with(plugin, ...)``: a fresh kernel with the built-ins and the given plugins."""
    from toolkernel._kernel import Kernel

    def make(*plugins: object, **options: Any) -> Kernel:
        return Kernel(load_entry_points=False, plugins=plugins, **options)

    return make


_exporter: InMemorySpanExporter | None = None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans finished during the test, recorded in memory.

    Installs an OpenTelemetry SDK tracer provider for the rest of the session (the
    global provider can be set only once per process) and clears it for each test.
    """
    global _exporter
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if _exporter is None:
        _exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
    _exporter.clear()
    yield _exporter
    _exporter.clear()


@pytest.fixture
def log_events() -> Iterator[list[MutableMapping[str, Any]]]:
    """structlog events emitted during the test, as dicts."""
    import structlog

    from toolkernel._logging import get_logger

    get_logger()  # configure first, so the capture does not leave structlog at its stdout default
    with structlog.testing.capture_logs() as captured:
        yield captured
