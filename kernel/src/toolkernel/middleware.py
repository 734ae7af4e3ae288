"""Around-the-call middleware: what a tool call looks like to code that wraps it.

A middleware is ``async def mw(call: ToolCall, call_next) -> ToolOutcome``. It may
inspect or rewrite ``call.arguments``, answer without calling ``call_next`` (a gate or
a cache), or time and rate-limit the rest of the chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel.context import ToolContext
    from toolkernel.tools import Tool


__all__ = [
    "CallNext",
    "ToolCall",
    "ToolMiddleware",
    "ToolOutcome",
    "chain",
]


@dataclass(slots=True)
class ToolCall:
    """A tool call on its way in: the tool, its raw arguments and the request's context."""

    tool: Tool
    arguments: dict[str, Any]
    context: ToolContext


@dataclass(slots=True)
class ToolOutcome:
    """What a tool call produced: MCP content blocks, optional structured content, error flag.

    ``value`` keeps the tool's own return value (or ``None`` for errors) so middleware
    such as a cache can reuse it.
    """

    content: list[Any]
    structured: Any = None
    is_error: bool = False
    value: Any = None
    meta: dict[str, Any] | None = field(default=None)

    @classmethod
    def error(cls, message: str) -> ToolOutcome:
        """An ``isError`` outcome whose text is ``message``."""
        from toolkernel.tools import text_block

        return cls(content=[text_block(message)], is_error=True)


CallNext = Callable[[ToolCall], Awaitable[ToolOutcome]]
ToolMiddleware = Callable[[ToolCall, CallNext], Awaitable[ToolOutcome]]


def chain(middleware: list[ToolMiddleware], inner: CallNext) -> CallNext:
    """Compose ``middleware`` around ``inner``, the first item outermost."""
    call_next = inner
    for mw in reversed(middleware):
        call_next = _bind(mw, call_next)
    return call_next


def _bind(mw: ToolMiddleware, call_next: CallNext) -> CallNext:
    async def step(call: ToolCall) -> ToolOutcome:
        return await mw(call, call_next)

    return step
