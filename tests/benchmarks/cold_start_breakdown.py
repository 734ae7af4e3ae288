"""Where a stdio server's cold start goes: toolkernel's start-up taken apart, beside FastMCP's.

Not a test; run it from the repo root (it reuses ``stdio.py``'s harness):

    .venv/bin/python tests/benchmarks/cold_start_breakdown.py [--runs 10] [--first discover] [--out FILE]

Each contender is spawned ``--runs`` times, contenders alternating within every round, and
timed from spawn to the first byte of its ``initialize`` answer (wall), with the server's
CPU (user + sys from /proc) read at that moment. The floors are the raw JSON-lines loop of
``peers/raw_echo.py`` run after an import: nothing, ``pydantic`` with one model, ``toolkernel``,
``mcp.server.lowlevel``. The toolkernel rows are ``toolkernel serve`` of the echo example:
as shipped; with no entry-point plugins (``TOOLKERNEL_LOAD_PLUGINS=``, only the built-ins);
and with the SDK answering ``initialize`` (``TOOLKERNEL_STDIO_EARLY_INITIALIZE=0``).
``--first discover`` opens with a 2026-07-28 ``server/discover`` instead of ``initialize``
(the raw loops answer it with "no such method": still their first answer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import stdio  # tests/benchmarks/stdio.py: the same harness, so the figures compare

SERVE = ("-m", "toolkernel", "serve", "docs/examples/echo_server.py:app")
RAW = "tests/benchmarks/peers/raw_echo.py"


def _after(imports: str) -> tuple[str, ...]:
    """The raw loop, run after ``imports``: the floor those imports set."""
    return ("-c", f"{imports}\nimport runpy\nrunpy.run_path({RAW!r}, run_name='__main__')")


CONTENDERS = (
    stdio.Contender("raw", (RAW,), "raw JSON-lines loop: Python's own start-up"),
    stdio.Contender(
        "raw+pydantic",
        _after("from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\nM(x=1)"),
        "the raw loop after importing pydantic and using one model",
    ),
    stdio.Contender("raw+toolkernel", _after("import toolkernel"), "the raw loop after `import toolkernel`"),
    stdio.Contender(
        "raw+mcp-lowlevel",
        _after("import mcp.server.lowlevel"),
        "the raw loop after the SDK's low-level server",
    ),
    stdio.Contender(
        "toolkernel", SERVE, "toolkernel serve, as shipped (first request answered before the SDK loads)"
    ),
    stdio.Contender(
        "tk-builtins-only",
        SERVE,
        "toolkernel serve with no entry-point plugins",
        (("TOOLKERNEL_LOAD_PLUGINS", ""),),
    ),
    stdio.Contender(
        "tk-sdk-init",
        SERVE,
        "toolkernel serve, the SDK answering the first request",
        (("TOOLKERNEL_STDIO_EARLY_INITIALIZE", "0"),),
    ),
    stdio.Contender("fastmcp", ("tests/benchmarks/peers/fastmcp_echo.py",), "FastMCP 4.x, banner off"),
)


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "toolkernel-bench", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def discover_start(contender: stdio.Contender, launch: stdio.Launch) -> tuple[float, float | None]:
    """Spawn -> first byte of the answer to ``server/discover``, and the server's CPU by then."""
    srv = stdio.Server(contender, launch)
    try:
        srv.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": ENVELOPE}})
        lines = srv.wait_lines(1)
        cpu = stdio.cpu_seconds(srv.proc.pid)
        if srv.parse(lines[0]).get("id") != 1:
            srv.fail(f"first stdout line is not the discover answer: {lines[0][:300]!r}")
        return srv.first_byte_at - srv.spawned_at, cpu
    finally:
        srv.close()


def first_answer(first: str, contender: stdio.Contender, launch: stdio.Launch) -> tuple[float, float | None]:
    if first == "discover":
        return discover_start(contender, launch)
    cs = stdio.cold_start(contender, launch)
    return cs.initialize_s, cs.initialize_cpu_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="cold starts per contender (default 10)")
    parser.add_argument("--out", type=Path, default=None, help="write the samples here as JSON")
    parser.add_argument(
        "--first", choices=("initialize", "discover"), default="initialize", help="the client's first request"
    )
    args = parser.parse_args()
    launch = stdio.Launch(sys.executable, stdio.server_env(True), 60.0)
    load_start = os.getloadavg()
    wall: dict[str, list[float]] = {c.name: [] for c in CONTENDERS}
    cpu: dict[str, list[float]] = {c.name: [] for c in CONTENDERS}
    for c in CONTENDERS:  # warm the bytecode and page caches (not measured)
        first_answer(args.first, c, launch)
    for r in range(args.runs):
        for c in CONTENDERS:
            seconds, used = first_answer(args.first, c, launch)
            wall[c.name].append(seconds)
            if used is not None:
                cpu[c.name].append(used)
        print(f"round {r + 1}/{args.runs} done", flush=True)
    load_end = os.getloadavg()
    ref_wall, ref_cpu = statistics.median(wall["fastmcp"]), statistics.median(cpu["fastmcp"])
    rows = {}
    print(f"\n{'contender':<17} {'wall med s':>10} {'x fmcp':>7} {'cpu med s':>10} {'x fmcp':>7}  note")
    for c in CONTENDERS:
        w, u = statistics.median(wall[c.name]), statistics.median(cpu[c.name])
        rows[c.name] = {"wall_median_s": round(w, 4), "cpu_median_s": round(u, 4), "note": c.note}
        rows[c.name] |= {"wall_runs": [round(v, 4) for v in wall[c.name]], "cpu_runs": cpu[c.name]}
        print(f"{c.name:<17} {w:>10.3f} {w / ref_wall:>7.2f} {u:>10.3f} {u / ref_cpu:>7.2f}  {c.note}")
    print(f"load average {load_start[0]:.1f} -> {load_end[0]:.1f}")
    if args.out is not None:
        doc = {
            "benchmark": f"stdio cold start (spawn -> {args.first} answer), toolkernel taken apart",
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg": {"start": [round(v, 2) for v in load_start], "end": [round(v, 2) for v in load_end]},
            "runs": args.runs,
            "results": rows,
        }
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
