"""The tool call path: lifecycle events, middleware, validation, the call, the result.

Follow a call from here: :meth:`ToolCaller.call` fires ``on_tool_input_start`` and
``on_tool_input_delta``, runs the middleware chain (plugins' first, then the
server's), and at its centre :meth:`ToolCaller._execute` validates the input
(``on_tool_input_available``), invokes the tool and checks its output
(``on_tool_output``). Any failure becomes an ``isError`` outcome and an
``on_tool_error`` event; only :class:`~toolkernel.context.InputRequired` escapes,
to become an ``input_required`` result on the 2026-07-28 era, and
:class:`~toolkernel.errors.ProtocolError`, to become a JSON-RPC error.
"""

from __future__ import annotations

import inspect
import json
import time
from typing import TYPE_CHECKING, Any

from toolkernel._telemetry import add_event, tool_span
from toolkernel.context import InputRequired, ToolContext
from toolkernel.errors import ProtocolError
from toolkernel.events import ToolEvent
from toolkernel.middleware import ToolCall, ToolMiddleware, ToolOutcome, chain
from toolkernel.tools import Tool, ToolInputError, ToolOutputError

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel

__all__ = [
    "ToolCaller",
]

_CALLBACKS = {
    "on_tool_input_start": "on_input_start",
    "on_tool_input_delta": "on_input_delta",
    "on_tool_input_available": "on_input_available",
    "on_tool_output": "on_output",
}


class ToolCaller:
    """Runs tool calls for one served server through the kernel's hooks and middleware."""

    def __init__(self, kernel: Kernel, middleware: list[ToolMiddleware]) -> None:
        self._kernel = kernel
        self._server_mw = list(middleware)
        plugin_mw = [entry.value for entry in kernel.tool_middleware.entries()]
        self._chain = chain([*plugin_mw, *middleware], self._execute)
        self._hooked = {hook: kernel.listens(hook) for hook in (*_CALLBACKS, "on_tool_error")}
        self._generation = kernel._generation

    def serves(self, kernel: Kernel, middleware: list[ToolMiddleware]) -> bool:
        """Whether this caller was built for ``kernel`` as its plugins are now, and this exact
        middleware list."""
        return (
            kernel is self._kernel
            and kernel._generation == self._generation
            and middleware == self._server_mw
        )

    async def call(self, tool: Tool, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run ``tool`` on ``arguments``; never raises except to ask the client for input."""
        with tool_span(tool.name, ctx.call_id):
            if self._fires("on_tool_input_start", tool):
                await self._event("on_tool_input_start", tool, ctx)
            if self._fires("on_tool_input_delta", tool):
                delta = json.dumps(arguments, ensure_ascii=False, default=str)
                await self._event("on_tool_input_delta", tool, ctx, input_text_delta=delta)
            try:
                return await self._chain(ToolCall(tool, arguments, ctx))
            except (InputRequired, ProtocolError):
                raise
            except Exception as exc:
                await self._error(tool, ctx, exc, None)
                return ToolOutcome.error(
                    f"Tool {tool.name!r} failed in middleware: {type(exc).__name__}: {exc}"
                )

    async def _execute(self, call: ToolCall) -> ToolOutcome:
        tool, ctx = call.tool, call.context
        started = time.perf_counter()
        try:
            validated = tool.validate_input(call.arguments)
        except ToolInputError as exc:
            await self._error(tool, ctx, exc, started)
            return ToolOutcome.error(f"Invalid input for tool {tool.name!r}: {exc}")
        if self._fires("on_tool_input_available", tool):
            await self._event("on_tool_input_available", tool, ctx, input=validated)
        try:
            value = await tool.invoke(validated, ctx)
            content, structured, meta, is_error = tool.check_output(value)
        except (InputRequired, ProtocolError):
            raise
        except ExceptionGroup as group:
            # Questions asked from a task group fail together: that is one input_required round.
            asked = _asked(group)
            if asked is not None:
                raise asked from None
            await self._error(tool, ctx, group, started)
            return ToolOutcome.error(f"Tool {tool.name!r} failed: {type(group).__name__}: {group}")
        except ToolOutputError as exc:
            await self._error(tool, ctx, exc, started)
            return ToolOutcome.error(str(exc))
        except Exception as exc:
            await self._error(tool, ctx, exc, started)
            return ToolOutcome.error(f"Tool {tool.name!r} failed: {type(exc).__name__}: {exc}")
        if self._fires("on_tool_output", tool):
            duration = time.perf_counter() - started
            await self._event("on_tool_output", tool, ctx, output=value, duration_s=duration)
        return ToolOutcome(content=content, structured=structured, is_error=is_error, value=value, meta=meta)

    async def _error(self, tool: Tool, ctx: ToolContext, exc: BaseException, started: float | None) -> None:
        from toolkernel._logging import get_logger

        get_logger("toolkernel.tools").warning(
            "tool call failed", tool=tool.name, call_id=ctx.call_id, error=f"{type(exc).__name__}: {exc}"
        )
        duration = time.perf_counter() - started if started is not None else None
        await self._event("on_tool_error", tool, ctx, error=exc, duration_s=duration)

    def _fires(self, hook: str, tool: Tool) -> bool:
        """Whether ``hook`` has a listener for ``tool``: checked before making the event, which
        most calls need none of (a coroutine per step costs more than the check)."""
        return getattr(tool, _CALLBACKS[hook]) is not None or self._hooked[hook]

    async def _event(self, hook: str, tool: Tool, ctx: ToolContext, **fields: Any) -> None:
        """Fire the per-tool callback and the kernel hook for one lifecycle step."""
        callback = getattr(tool, _CALLBACKS[hook]) if hook in _CALLBACKS else None
        if callback is None and not self._hooked[hook]:
            return
        event = ToolEvent(tool_name=tool.name, call_id=ctx.call_id, context=ctx, **fields)
        add_event(hook, {"gen_ai.tool.name": tool.name})
        if callback is not None:
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                from toolkernel._logging import get_logger

                get_logger("toolkernel.tools").exception(
                    "tool callback failed; the call goes on", tool=tool.name, callback=_CALLBACKS[hook]
                )
        if self._hooked[hook]:
            await self._kernel.emit(hook, event=event)


def _asked(group: BaseExceptionGroup[Any]) -> InputRequired | ProtocolError | None:
    """The one exception standing for ``group`` when it holds only questions (or a protocol error)."""
    found: list[BaseException] = []

    def leaves(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                leaves(inner)
        else:
            found.append(exc)

    leaves(group)
    errors = [e for e in found if isinstance(e, ProtocolError)]
    if errors:
        return errors[0]
    asks = [e for e in found if isinstance(e, InputRequired)]
    return max(asks, key=lambda a: len(a.requests)) if asks and len(asks) == len(found) else None
