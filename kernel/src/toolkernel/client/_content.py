"""Tool results as standard content blocks, split into what the model reads and what stays aside.

Blocks follow LangChain's standard content-block shapes (``{"type": "text", "text": ...}``,
``{"type": "image", "base64": ..., "mime_type": ...}``, ``{"type": "file", ...}``), so
they drop into a tool message as they are. ``output_handling`` decides per MCP block
type whether a block goes into ``content`` (sent to the model) or ``artifacts`` (kept
for the application), as LangChain's ``outputHandling`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

ContentBlock = dict[str, Any]


@dataclass(frozen=True)
class ToolOutput:
    """One tool call's result, mapped.

    :ivar content: blocks for the model (by default: text and resource links).
    :ivar artifacts: blocks kept aside (by default: images, audio, embedded resources).
    :ivar structured_content: the tool's structured result, if it sent one.
    :ivar is_error: the tool reported a failure (only seen with ``raise_on_error=False``).
    :ivar result: the SDK's ``CallToolResult`` as received.
    """

    server: str
    tool: str
    content: list[ContentBlock]
    artifacts: list[ContentBlock]
    structured_content: dict[str, Any] | None
    is_error: bool
    result: types.CallToolResult = field(repr=False)

    @property
    def text(self) -> str:
        """The text blocks of ``content`` and ``artifacts`` joined by newlines."""
        return "\n".join(b["text"] for b in (*self.content, *self.artifacts) if b.get("type") == "text")


def to_block(block: Any) -> tuple[str, ContentBlock]:
    """``(mcp block type, standard block)`` for one MCP content block."""
    kind = getattr(block, "type", "unknown")
    extras: dict[str, Any] = {}
    annotations = getattr(block, "annotations", None)
    if annotations is not None:
        extras["annotations"] = annotations.model_dump(mode="json", exclude_none=True, by_alias=True)
    out: ContentBlock
    if kind == "text":
        out = {"type": "text", "text": block.text}
    elif kind in ("image", "audio"):
        out = {"type": kind, "base64": block.data, "mime_type": block.mime_type}
    elif kind == "resource":
        resource = block.resource
        mime = getattr(resource, "mime_type", None)
        if hasattr(resource, "text"):
            out = {"type": "text-plain", "text": resource.text, "mime_type": mime or "text/plain"}
        else:
            out = {"type": "file", "base64": resource.blob, "mime_type": mime}
        extras["uri"] = str(resource.uri)
    elif kind == "resource_link":
        out = {"type": "file", "url": str(block.uri), "mime_type": block.mime_type}
        extras.update({k: v for k, v in (("name", block.name), ("description", block.description)) if v})
    else:
        out = {"type": "non_standard", "value": block.model_dump(mode="json", by_alias=True)}
    if extras:
        out["extras"] = extras
    return kind, out


def map_result(
    server: str, tool: str, result: types.CallToolResult, handling: Mapping[Any, str]
) -> ToolOutput:
    """Split ``result``'s blocks by ``handling`` (MCP block type → ``content`` or ``artifact``)."""
    content: list[ContentBlock] = []
    artifacts: list[ContentBlock] = []
    for block in result.content:
        kind, mapped = to_block(block)
        (artifacts if handling.get(kind, "content") == "artifact" else content).append(mapped)
    return ToolOutput(
        server=server,
        tool=tool,
        content=content,
        artifacts=artifacts,
        structured_content=result.structured_content,
        is_error=bool(result.is_error),
        result=result,
    )
