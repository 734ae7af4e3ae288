"""The payloads of the lifecycle hooks: what happened to which call or session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel.context import ToolContext
    from toolkernel.server import MCPServer


__all__ = [
    "SessionEvent",
    "ToolEvent",
]


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """One step of one tool call; fields that do not apply to the step are ``None``."""

    tool_name: str
    call_id: str
    context: ToolContext
    input_text_delta: str | None = None
    input: Any = None
    output: Any = None
    error: BaseException | None = None
    duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """A client connection opening or closing."""

    server: MCPServer
    transport: str
    session_id: str | None = None
