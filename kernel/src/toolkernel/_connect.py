"""Open an SDK client session to a server named by a URL or a command line."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from toolkernel.errors import ConfigError, MCPClientError

if TYPE_CHECKING:
    from mcp.client import Client

    from toolkernel._kernel import Kernel


@contextlib.asynccontextmanager
async def connect(
    kernel: Kernel, server: str, *, mode: str = "auto", **client_options: Any
) -> AsyncIterator[Client]:
    """An initialized ``mcp.client.Client`` over the transport that reaches ``server``."""
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
