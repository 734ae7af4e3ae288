"""What tracing costs on the per-call path: kernel tool calls with and without a tracer provider.

Each configuration runs in its own process (OpenTelemetry's global provider can be set
once per process), alternating, and times N in-process calls of an echo tool through
the kernel's full call path (hooks, middleware, validation, output check) plus the
per-request span middleware:

- ``bare``: the tool's own steps only (validate, invoke, check output): the floor.
- ``off``: the kernel path, no tracer provider installed (toolkernel's default).
- ``sdk-no-exporter``: an OpenTelemetry SDK provider with no span processor.
- ``sdk-memory``: an SDK provider exporting every span to memory.

Usage: python tests/benchmarks/telemetry_overhead.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

CONFIGS = ("bare", "off", "sdk-no-exporter", "sdk-memory")
RESULTS = Path(__file__).with_name("results") / "telemetry_overhead.json"


def child(config: str, calls: int) -> float:
    """Run ``calls`` calls in this process under ``config``; return nanoseconds per call."""
    import anyio

    from toolkernel import Kernel, MCPServer, ToolContext
    from toolkernel._telemetry import RequestSpans
    from toolkernel.calls import ToolCaller

    if config.startswith("sdk"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        provider = TracerProvider()
        if config == "sdk-memory":
            provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        trace.set_tracer_provider(provider)

    server = MCPServer("bench", "1.0.0", kernel=Kernel(load_entry_points=False))

    @server.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    tool = server.all_tools()["echo"]
    caller = ToolCaller(server.kernel, [])
    spans = RequestSpans()

    class Ctx:  # the fields RequestSpans reads from an SDK request context
        method = "tools/call"
        params: ClassVar[dict[str, str]] = {"name": "echo"}
        protocol_version = "2025-11-25"
        request_id = 1
        request = None
        meta = None
        session = None

    async def run() -> float:
        args = {"text": "hello"}
        ctx = ToolContext(server=server, tool_name="echo", call_id="1")

        async def through_kernel(_: object) -> object:
            return await caller.call(tool, args, ctx)

        started = time.perf_counter_ns()
        for _ in range(calls):
            if config == "bare":
                tool.check_output(await tool.invoke(tool.validate_input(args), ctx))
            else:
                await spans(Ctx(), through_kernel)  # type: ignore[arg-type]
        return (time.perf_counter_ns() - started) / calls

    # Sync tools run in a worker thread; make the echo tool async to time the kernel, not the thread hop.
    async def aecho(text: str) -> str:
        return text

    tool.fn, tool.is_async = aecho, True
    return anyio.run(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(child(args.child, args.calls))
        return
    samples: dict[str, list[float]] = {c: [] for c in CONFIGS}
    for round_no in range(args.rounds):
        for config in CONFIGS:
            out = subprocess.run(
                [sys.executable, __file__, "--child", config, "--calls", str(args.calls)],
                capture_output=True,
                text=True,
                timeout=300,
                check=True,
            )
            samples[config].append(float(out.stdout.strip()))
        print(
            f"round {round_no + 1}/{args.rounds}: "
            + " | ".join(f"{c} {samples[c][-1]:,.0f} ns" for c in CONFIGS)
        )
    medians = {c: statistics.median(v) for c, v in samples.items()}
    print(f"\n{'config':18s} {'ns/call':>10s} {'vs off':>8s}")
    for c in CONFIGS:
        print(f"{c:18s} {medians[c]:>10,.0f} {medians[c] / medians['off']:>8.2f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"calls": args.calls, "rounds": args.rounds, "median_ns": medians, "samples_ns": samples},
            indent=2,
        )
    )
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
