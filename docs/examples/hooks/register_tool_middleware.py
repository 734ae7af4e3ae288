"""Two middleware: a gate that refuses tools marked destructive, and a timer."""

import time

import structlog

from toolkernel import ToolOutcome, hookimpl


async def refuse_destructive(call, call_next):
    annotations = call.tool.annotations
    if annotations is not None and annotations.destructive_hint:
        return ToolOutcome.error(f"{call.tool.name} is destructive and this server is read-only")
    return await call_next(call)


async def timed(call, call_next):
    started = time.perf_counter()
    outcome = await call_next(call)
    elapsed_ms = (time.perf_counter() - started) * 1000
    structlog.get_logger("timing").info("tool timed", tool=call.tool.name, ms=round(elapsed_ms, 1))
    return outcome


@hookimpl
def register_tool_middleware(registry):
    registry.add(refuse_destructive)  # outermost: runs first
    registry.add(timed, name="timer")
