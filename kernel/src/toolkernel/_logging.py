"""Logging through structlog: console lines on a terminal, JSON otherwise, always to stderr.

structlog is imported on the first log line, not at start-up, so a server that logs
nothing pays nothing. Each line carries the current trace and span ids.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any


def configure_logging(level: str | int | None = None, *, json: bool | None = None) -> None:
    """Send structlog and stdlib logging to stderr; ``TOOLKERNEL_LOG_LEVEL`` sets the level."""
    import structlog

    level = level or os.environ.get("TOOLKERNEL_LOG_LEVEL", "INFO")
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"TOOLKERNEL_LOG_LEVEL: unknown level {level!r}")
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            _add_trace_ids,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(_STDERR)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    # A library that sets its own logger to DEBUG (bm25s does) is still held to the level.
    handler.setLevel(numeric)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING) if numeric < logging.WARNING else numeric)


class _CurrentStderr:
    """Whatever ``sys.stderr`` is at each write: test runners and notebooks swap it, and a
    stream bound at configuration time may be closed by the time a later line is logged."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_STDERR = _CurrentStderr()


def get_logger(name: str = "toolkernel") -> Any:
    """A structlog logger; configures stderr logging on first use if nobody did."""
    import structlog

    if not structlog.is_configured() or _writes_to_stdout(structlog.get_config()["logger_factory"]):
        configure_logging()
    return structlog.get_logger(name)


def _writes_to_stdout(factory: Any) -> bool:
    """Whether structlog is left at its default of printing to stdout, which may be the MCP wire.

    That happens when structlog was reset, or touched (``structlog.testing.capture_logs``)
    before anyone configured it; a factory an embedding application chose is left alone.
    """
    import structlog

    return isinstance(factory, structlog.PrintLoggerFactory) and getattr(factory, "_file", None) in (
        None,
        sys.stdout,
        sys.__stdout__,
    )


def _add_trace_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    from toolkernel._telemetry import current_trace_ids

    event.update(current_trace_ids())
    return event
