"""Tracing: a span per MCP request and per tool call, lifecycle hooks as span events.

Attributes follow the MCP semantic conventions (``mcp.method.name``,
``gen_ai.tool.name``, ``jsonrpc.request.id``, ``mcp.session.id``...). When no tracer
provider is installed the request path skips span creation entirely, so tracing costs
one attribute read per message; :func:`configure_from_env` installs the OpenTelemetry
SDK from the standard ``OTEL_*`` variables.
"""

from __future__ import annotations

import os
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from toolkernel.errors import MissingDependencyError

if TYPE_CHECKING:
    from mcp.server.context import CallNext, ServerRequestContext
    from opentelemetry.trace import Span

_tracer = trace.get_tracer("toolkernel")


def tracing_enabled() -> bool:
    """True once a real tracer provider is installed (by us, the CLI, or the embedding app).

    Called on every message, so it reads the API's provider slot directly:
    ``get_tracer_provider()`` consults the environment on each call until a provider is set.
    """
    provider = getattr(trace, "_TRACER_PROVIDER", None)
    return provider is not None and not isinstance(provider, trace.NoOpTracerProvider)


def configure_from_env(environ: dict[str, str] | None = None) -> bool:
    """Install the OpenTelemetry SDK when ``OTEL_TRACES_EXPORTER`` asks for an exporter.

    ``console`` writes spans to stderr (stdout may be the MCP wire); ``otlp`` needs the
    ``opentelemetry-exporter-otlp`` package. Returns whether tracing is now enabled.
    """
    env = os.environ if environ is None else environ
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if tracing_enabled() or not names or names == ["none"]:
        return tracing_enabled()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(
        resource=Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "toolkernel")})
    )
    for name in names:
        if name == "console":
            exporter: Any = ConsoleSpanExporter(out=sys.stderr)
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                raise MissingDependencyError(
                    "OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: "
                    "pip install opentelemetry-exporter-otlp"
                ) from None
            exporter = OTLPSpanExporter()
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (use console, otlp or none)")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


class RequestSpans:
    """SDK server middleware: one SERVER span per inbound MCP message, when tracing is on."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        if not tracing_enabled():
            return await call_next(ctx)
        from opentelemetry.trace import SpanKind, StatusCode

        name = ctx.params.get("name") if ctx.params else None
        target = name if isinstance(name, str) else None
        attributes: dict[str, Any] = {
            "mcp.method.name": ctx.method,
            "mcp.protocol.version": ctx.protocol_version,
            "network.transport": "pipe" if ctx.request is None else "tcp",
        }
        if ctx.request_id is not None:
            attributes["jsonrpc.request.id"] = str(ctx.request_id)
        session_id = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
        if session_id:
            attributes["mcp.session.id"] = session_id
        if ctx.method == "tools/call" and target:
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = target
        elif ctx.method == "prompts/get" and target:
            attributes["gen_ai.prompt.name"] = target
        elif ctx.method == "resources/read" and ctx.params and isinstance(ctx.params.get("uri"), str):
            attributes["mcp.resource.uri"] = ctx.params["uri"]
        with _tracer.start_as_current_span(
            f"{ctx.method} {target}" if target else ctx.method,
            kind=SpanKind.SERVER,
            attributes=attributes,
            context=_parent(ctx),
            record_exception=True,
            set_status_on_exception=False,
        ) as span:
            try:
                result: Any = await call_next(ctx)
            except Exception as exc:
                code = getattr(getattr(exc, "error", None), "code", None)
                span.set_attribute("error.type", str(code) if code is not None else type(exc).__qualname__)
                span.set_status(StatusCode.ERROR, str(exc))
                raise
            is_error = (
                result.get("isError") if isinstance(result, dict) else getattr(result, "is_error", False)
            )
            if is_error is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(StatusCode.ERROR)
            return result


_NO_SPAN: AbstractContextManager[None] = nullcontext()


def tool_span(tool_name: str, call_id: str) -> AbstractContextManager[Span | None]:
    """An INTERNAL span around one tool execution, or a shared no-op when tracing is off."""
    if not tracing_enabled():
        return _NO_SPAN
    return _tracer.start_as_current_span(
        f"execute_tool {tool_name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": call_id,
        },
    )


def add_event(name: str, attributes: dict[str, Any] | None = None) -> None:
    """Record a lifecycle hook as an event on the current span (no-op without tracing)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, attributes or {})


def current_trace_ids() -> dict[str, str]:
    """``trace_id`` / ``span_id`` of the current span, for log lines; empty when none."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def _parent(ctx: ServerRequestContext[Any, Any]) -> Any:
    if not ctx.meta:
        return None
    from mcp.shared._otel import extract_trace_context

    return extract_trace_context(dict(ctx.meta))
