"""Run the tool calls a model returned and build the messages that carry the results back.

Calls come as the SDKs' objects or as plain dicts of the same shape (fields are read by
attribute or key). Every call gets an answer: a tool's error result, arguments that
are not a JSON object, an unknown tool or a failed call become an error result the
model reads, so one bad call never loses the others' answers. Calls run concurrently;
answers keep the calls' order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from toolkernel.errors import MCPClientError

if TYPE_CHECKING:
    from toolkernel.client import MCPClient, ToolOutput


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: SDK objects and plain dicts alike."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass(frozen=True)
class CallResult:
    """One call's outcome: the tool's output, or why there is none (``error``)."""

    output: ToolOutput | None
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None or (self.output is not None and self.output.is_error)

    @property
    def text(self) -> str:
        """What the model reads: the tool's text, its structured result, or the error."""
        if self.error is not None:
            return f"Error: {self.error}"
        assert self.output is not None
        text = self.output.text
        if not text and self.output.structured_content is not None:
            text = json.dumps(self.output.structured_content)
        return f"Error: {text or 'the tool failed'}" if self.output.is_error else text


class Dispatcher:
    """Runs model tool calls through ``client`` (a started :class:`~toolkernel.client.MCPClient`).

    :param timeout: seconds per call (default: the server's request timeout).
    """

    def __init__(self, client: MCPClient, *, timeout: float | None = None) -> None:
        self.client = client
        self.timeout = timeout

    async def call(self, name: str, arguments: Any) -> CallResult:
        """Call tool ``name`` with ``arguments`` (a JSON object or its text); never raises for the tool."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return CallResult(None, f"arguments for {name!r} are not valid JSON: {exc.msg}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return CallResult(None, f"arguments for {name!r} must be a JSON object")
        try:
            output = await self.client.call_tool(
                name, dict(arguments), timeout=self.timeout, raise_on_error=False
            )
        except MCPClientError as exc:
            return CallResult(None, str(exc))
        return CallResult(output)

    async def _all(self, calls: list[tuple[str, Any]]) -> list[CallResult]:
        results: list[CallResult | None] = [None] * len(calls)

        async def run(index: int, name: str, arguments: Any) -> None:
            results[index] = await self.call(name, arguments)

        async with anyio.create_task_group() as tg:
            for index, (name, arguments) in enumerate(calls):
                tg.start_soon(run, index, name, arguments)
        return [r for r in results if r is not None]

    async def _answer(
        self, items: Iterable[Any], pick: Callable[[Any], tuple[str, Any] | None], reply: Callable[..., Any]
    ) -> list[dict[str, Any]]:
        chosen = [(item, call) for item in items if (call := pick(item)) is not None]
        results = await self._all([call for _, call in chosen])
        return [reply(item, result) for (item, _), result in zip(chosen, results, strict=True)]

    async def openai(self, tool_calls: Iterable[Any] | None) -> list[dict[str, Any]]:
        """Chat Completions: one ``{"role": "tool", "tool_call_id", "content"}`` per function call."""
        return await self._answer(
            tool_calls or (),
            lambda c: (
                (_field(_field(c, "function"), "name"), _field(_field(c, "function"), "arguments"))
                if _field(c, "type") in ("function", None)
                else None
            ),
            lambda c, r: {"role": "tool", "tool_call_id": _field(c, "id"), "content": r.text},
        )

    async def openai_responses(self, output: Iterable[Any]) -> list[dict[str, Any]]:
        """Responses API: a ``function_call_output`` item (``call_id``, ``output``) per ``function_call``."""
        return await self._answer(
            output,
            lambda i: (
                (_field(i, "name"), _field(i, "arguments")) if _field(i, "type") == "function_call" else None
            ),
            lambda i, r: {"type": "function_call_output", "call_id": _field(i, "call_id"), "output": r.text},
        )

    async def anthropic(self, content: Iterable[Any]) -> list[dict[str, Any]]:
        """Messages API: one ``tool_result`` block per ``tool_use`` block, for the next user message."""
        return await self._answer(
            content,
            lambda b: (_field(b, "name"), _field(b, "input")) if _field(b, "type") == "tool_use" else None,
            lambda b, r: {
                "type": "tool_result",
                "tool_use_id": _field(b, "id"),
                "content": _anthropic_content(r),
                "is_error": r.is_error,
            },
        )


def _anthropic_content(result: CallResult) -> list[dict[str, Any]]:
    """A result as Anthropic content blocks: its text, and its images as base64 image blocks."""
    blocks: list[dict[str, Any]] = []
    text = result.text
    if text:
        blocks.append({"type": "text", "text": text})
    if result.output is not None and not result.is_error:
        for block in (*result.output.content, *result.output.artifacts):
            if block.get("type") == "image" and block.get("base64"):
                source = {"type": "base64", "media_type": block.get("mime_type"), "data": block["base64"]}
                blocks.append({"type": "image", "source": source})
    return blocks or [{"type": "text", "text": "(no content)"}]
