"""HTTP benchmark: toolkernel-http against FastMCP, the SDK's MCPServer and a bare Starlette echo.

Not a test (the root pytest config skips tests/benchmarks); run it from the repo root:

    .venv/bin/python tests/benchmarks/http_transports.py            # full run, writes results/http.json
    .venv/bin/python tests/benchmarks/http_transports.py --quick    # smoke run, writes nothing
    .venv/bin/python tests/benchmarks/http_transports.py --only toolkernel --only fastmcp \
        --mode stateless-json

The same echo tool served four ways (the CONTENDERS table), each by its own uvicorn process
(default loop and HTTP parser, so uvloop/httptools when installed, for all of them alike):

* ``toolkernel``: ``python -m toolkernel serve docs/examples/echo_server.py:app --transport http``,
  the mode set through ``TOOLKERNEL_HTTP_STATELESS`` / ``TOOLKERNEL_HTTP_JSON_RESPONSE``
  (defaults otherwise: DNS-rebinding checks on, resumable event store in stateful mode);
* ``fastmcp``: FastMCP 4.2.3 ``http_app(stateless_http=..., json_response=...)``;
* ``sdk``: ``mcp.server.mcpserver.MCPServer.streamable_http_app(...)``;
* ``raw``: a bare Starlette route parsing the JSON-RPC body and answering it (the floor).

Two modes: ``stateless-json`` (no session, one JSON body per POST: the 2026-07-28 shape) and
``stateful-sse`` (every client initializes its own Mcp-Session-Id, each answer is an SSE stream).

The load generator is a minimal HTTP/1.1 client on raw asyncio streams (uvloop), not the SDK
client nor httpx, so that it takes as little of the machine as it can: ``--procs`` processes,
together ``--clients`` concurrent keep-alive connections, each posting ``tools/call echo`` back to back and
checking every answer (ids match, the text comes back). All processes start measuring at the
same instant and stop after ``--duration`` seconds. Contenders ALTERNATE inside every round
(A B C D, A B C D, ...) so machine noise lands on all of them alike. Reported per contender and
mode: calls/s (median over rounds, min, max), latency p50/p99 (pooled), the server process's
CPU time per call (user + system from /proc over the measured window: what the server spent,
which a busy machine disturbs far less than wall-clock rates), and ratios against fastmcp, sdk
and the raw floor (throughput: this/reference; cpu_efficiency: reference CPU per call / this).
The 1-minute load average is recorded before every round (the machine is often shared).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RESULTS = HERE / "results" / "http.json"
PROTOCOL_VERSION = "2025-06-18"
MODES = ("stateless-json", "stateful-sse")
ACCEPT = "application/json, text/event-stream"
PACKAGES = ("toolkernel", "toolkernel-http", "mcp", "fastmcp", "uvicorn", "starlette", "uvloop", "httptools")


@dataclass(frozen=True)
class Contender:
    name: str
    note: str


CONTENDERS = (
    Contender("toolkernel", "toolkernel serve --transport http (toolkernel-http on the SDK session manager)"),
    Contender("fastmcp", "FastMCP 4.x http_app under uvicorn"),
    Contender("sdk", "mcp SDK MCPServer.streamable_http_app under uvicorn"),
    Contender("raw", "bare Starlette route answering JSON-RPC, no MCP framework (the floor)"),
)
REFERENCES = ("fastmcp", "sdk", "raw")


# -- servers (run in their own processes: --serve NAME) ------------------------------------------


def _echo_result(request_id: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


def _raw_app(mode: str) -> Any:
    """The floor: parse the body, answer initialize and tools/call, nothing else."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    sse = mode == "stateful-sse"

    async def mcp(request: Request) -> Response:
        message = json.loads(await request.body())
        if "id" not in message:
            return Response(status_code=202)
        if message["method"] == "initialize":
            answer: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "0"},
                },
            }
        else:
            answer = _echo_result(message["id"], message["params"]["arguments"]["text"])
        headers = {"mcp-session-id": "raw-session"} if sse else {}
        if sse:
            return Response(
                f"event: message\ndata: {json.dumps(answer)}\n\n",
                media_type="text/event-stream",
                headers=headers,
            )
        return Response(json.dumps(answer), media_type="application/json", headers=headers)

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


def _fastmcp_app(stateless: bool, json_response: bool) -> Any:
    from fastmcp import FastMCP

    fast = FastMCP("echo")

    @fast.tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return fast.http_app(path="/mcp", stateless_http=stateless, json_response=json_response)


def _sdk_app(stateless: bool, json_response: bool) -> Any:
    from mcp.server.mcpserver import MCPServer

    sdk = MCPServer("echo")

    @sdk.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return sdk.streamable_http_app(stateless_http=stateless, json_response=json_response)


def _peer_app(name: str, mode: str) -> Any:
    stateless = json_response = mode == "stateless-json"
    if name == "raw":
        return _raw_app(mode)
    if name == "fastmcp":
        return _fastmcp_app(stateless, json_response)
    if name == "sdk":
        return _sdk_app(stateless, json_response)
    raise SystemExit(f"unknown peer {name!r}")


def serve_peer(name: str, mode: str, port: int) -> None:
    """Run one peer under uvicorn until killed."""
    import uvicorn

    uvicorn.run(_peer_app(name, mode), host="127.0.0.1", port=port, log_level="warning")


BASELINE = "toolkernel-before"
"""The contender ``--baseline DIR`` adds: toolkernel served from the kernel and HTTP plugin sources in DIR."""
_baseline: Path | None = None


def _server_command(name: str, mode: str, port: int) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if name == BASELINE and _baseline is not None:
        # Ahead of the editable installs on the path: the other tree's kernel and HTTP plugin.
        sources = [str(_baseline / "kernel" / "src"), str(_baseline / "plugins" / "http" / "src")]
        env["PYTHONPATH"] = os.pathsep.join([*sources, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        name = "toolkernel"
    if name == "toolkernel":
        env["TOOLKERNEL_HTTP_STATELESS"] = "true" if mode == "stateless-json" else "false"
        env["TOOLKERNEL_HTTP_JSON_RESPONSE"] = "true" if mode == "stateless-json" else "false"
        command = ["-m", "toolkernel", "serve", "docs/examples/echo_server.py:app", "--transport", "http"]
        return [sys.executable, *command, "--port", str(port)], env
    return [sys.executable, __file__, "--serve", name, "--mode", mode, "--port", str(port)], env


# -- load generator (run in its own processes: --load URL) ---------------------------------------


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 answer from ``reader``: the status, the lower-cased headers, the whole body.

    The body is framed by Content-Length or chunked transfer encoding (de-chunked here; the
    servers measured send no trailers); an answer with neither is a ``ValueError``. Shared by
    every raw client in this folder, so that they all read answers the same cheap way.
    """
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if line:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() != "chunked":
        raise ValueError(f"answer with neither content-length nor chunked body: {headers}")
    chunks = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers are sent: the final CRLF
            return status, headers, bytes(chunks)
        chunks.extend(await reader.readexactly(size + 2))
        del chunks[-2:]


class _Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol to post and read answers.

    Requests are written as ready-made bytes and answers parsed with a handful of
    ``readuntil``/``readexactly`` calls (Content-Length or chunked bodies), so the load
    generator spends a few tens of microseconds per call instead of an HTTP client's
    hundreds: on a 2-core machine every cycle it saves goes to the server under test.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str
    ) -> None:
        self.reader, self.writer = reader, writer
        self.head = (
            f"POST {path} HTTP/1.1\r\nhost: {host}\r\naccept: {ACCEPT}\r\n"
            f"content-type: application/json\r\nmcp-protocol-version: {PROTOCOL_VERSION}\r\n"
        ).encode()

    @classmethod
    async def open(cls, host: str, port: int, path: str) -> _Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"{host}:{port}", path)

    def close(self) -> None:
        self.writer.close()

    async def post(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """POST ``body``; the status, the lower-cased headers and the whole (de-chunked) body."""
        self.writer.write(b"%scontent-length: %d\r\n\r\n%s" % (self.head, len(body), body))
        return await read_response(self.reader)

    def with_session(self, session_id: str) -> None:
        self.head += f"mcp-session-id: {session_id}\r\n".encode()


async def _load(url: str, mode: str, clients: int, go: Path, duration: float, tag: str) -> dict[str, Any]:
    """One load process: open the clients, report ready, wait for ``go`` (the start time), then hammer."""
    address, _, path = url.removeprefix("http://").partition("/")
    host, _, port = address.partition(":")
    latencies: list[float] = []
    errors: list[str] = []
    calls = reconnects = 0

    async def connect() -> _Connection:
        connection = await _Connection.open(host, int(port), "/" + path)
        if mode == "stateful-sse":
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            }
            status, headers, body = await connection.post(json.dumps(init).encode())
            if status != 200 or "mcp-session-id" not in headers:
                raise RuntimeError(f"initialize failed: HTTP {status} {body[:200]!r}")
            connection.with_session(headers["mcp-session-id"])
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
            status, _, body = await connection.post(note)
            if status != 202:
                raise RuntimeError(f"notifications/initialized: HTTP {status} {body[:200]!r}")
        return connection

    async def client_loop(index: int) -> None:
        nonlocal calls, reconnects
        connection = await connect()
        request_id = 0
        ready.append(index)
        await started.wait()
        try:
            while True:
                request_id += 1
                text = f"{tag}-{index}-{request_id}"
                body = (
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
                    b'"params":{"name":"echo","arguments":{"text":"%s"}}}' % (request_id, text.encode())
                )
                sent = time.perf_counter()
                try:
                    answer = await connection.post(body)
                except (ConnectionError, asyncio.IncompleteReadError):
                    # The server closed a keep-alive connection (while this client waited at the
                    # barrier): reconnect (a new session in stateful mode). Counted, never silently.
                    reconnects += 1
                    connection.close()
                    connection = await connect()
                    answer = await connection.post(body)
                elapsed = time.perf_counter() - sent
                now = time.time()
                problem = _check(*answer, request_id, text)
                if now < start_at:
                    if problem:
                        errors.append(problem)
                    continue
                if now > start_at + duration:
                    return
                calls += 1
                latencies.append(elapsed)
                if problem:
                    errors.append(problem)
        finally:
            connection.close()

    ready: list[int] = []
    started = asyncio.Event()
    start_at = 0.0

    async def starter() -> None:
        nonlocal start_at
        while len(ready) < clients:  # noqa: ASYNC110 - a barrier across processes, by polling
            await asyncio.sleep(0.01)
        go.with_suffix(f".{tag}.ready").touch()
        while not go.exists():  # noqa: ASYNC110, ASYNC240
            await asyncio.sleep(0.01)
        start_at = float(go.read_text())  # noqa: ASYNC240
        started.set()

    async with asyncio.timeout(duration + 300), asyncio.TaskGroup() as tg:
        tg.create_task(starter())
        for index in range(clients):
            tg.create_task(client_loop(index))
    return {
        "calls": calls,
        "latencies": latencies,
        "errors": errors[:5],
        "error_count": len(errors),
        "reconnects": reconnects,
    }


def _check(status: int, headers: dict[str, str], body: bytes, request_id: int, text: str) -> str | None:
    """Why the answer to call ``request_id`` is wrong, or ``None``."""
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    if headers.get("content-type", "").startswith("text/event-stream"):
        datas = [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]
        answers = [json.loads(d) for d in datas if d]
        answer = next((a for a in answers if a.get("id") == request_id), None)
    else:
        answer = json.loads(body)
    if answer is None or answer.get("id") != request_id or "result" not in answer:
        return f"bad answer: {str(answer)[:200]}"
    got = answer["result"]["content"][0]["text"]
    return None if got == text and not answer["result"].get("isError") else f"wrong text {got!r}"


# -- orchestration ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            logs = sorted(
                Path(tempfile.gettempdir()).glob(f"bench-http-*-{url.split(':')[2].split('/')[0]}.log")
            )
            tail = logs[0].read_text()[-3000:] if logs else ""
            raise SystemExit(f"server for {url} exited with {proc.returncode}:\n{tail}")
        try:
            httpx.post(
                url, content=b"{}", headers={"content-type": "application/json", "accept": ACCEPT}, timeout=2
            )
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"server at {url} not ready after {timeout} s")


@contextlib.contextmanager
def _servers(names: list[str], mode: str, timeout: float) -> Iterator[dict[str, tuple[str, int]]]:
    """Start every contender's server for ``mode``; yield name -> (URL, pid); stop them all."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for name in names:
            port = _free_port()
            command, env = _server_command(name, mode, port)
            log = Path(tempfile.gettempdir()) / f"bench-http-{name}-{mode}-{port}.log"
            with log.open("wb") as stderr:
                procs.append(subprocess.Popen(command, cwd=REPO, env=env, stderr=stderr))
            urls[name] = f"http://127.0.0.1:{port}/mcp"
        for name, proc in zip(names, procs, strict=True):
            _wait_ready(urls[name], proc, timeout)
        yield {name: (urls[name], proc.pid) for name, proc in zip(names, procs, strict=True)}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all threads), from /proc; NaN where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_load(
    url: str, pid: int, mode: str, clients: int, procs: int, duration: float, warmup: float
) -> dict[str, Any]:
    """Drive ``url`` from ``procs`` processes; pooled calls, latencies, errors and server CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        go = Path(tmp) / "go"
        outs = [Path(tmp) / f"load{i}.json" for i in range(procs)]
        per_proc = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
        workers = [
            subprocess.Popen(
                [
                    *(sys.executable, __file__, "--load", url, "--mode", mode, "--clients", str(n)),
                    *("--go", str(go), "--duration", str(duration)),
                    *("--result", str(out), "--tag", f"p{i}"),
                ],
                cwd=REPO,
            )
            for i, (n, out) in enumerate(zip(per_proc, outs, strict=True))
        ]
        deadline = time.monotonic() + 120
        while not all(go.with_suffix(f".p{i}.ready").exists() for i in range(procs)):
            if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
                raise SystemExit(f"load generators for {url} did not get ready")
            time.sleep(0.02)
        start_at = time.time() + warmup
        staged = go.with_suffix(".staged")
        staged.write_text(repr(start_at))
        staged.replace(go)  # atomic: a generator never reads a half-written start time
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = _cpu_seconds(pid)
        time.sleep(max(0.0, start_at + duration - time.time()))
        cpu = _cpu_seconds(pid) - cpu_before
        for worker in workers:
            worker.wait(timeout=warmup + duration + 120)
        if missing := [str(out) for out in outs if not out.exists()]:
            raise SystemExit(
                f"load generator(s) against {url} failed (no {missing}); see their traceback above"
            )
        results = [json.loads(out.read_text()) for out in outs]
    latencies = sorted(lat for r in results for lat in r["latencies"])
    errors = [e for r in results for e in r["errors"]]
    return {
        "calls": sum(r["calls"] for r in results),
        "calls_per_s": sum(r["calls"] for r in results) / duration,
        "server_cpu_us_per_call": cpu / max(1, sum(r["calls"] for r in results)) * 1e6,
        "latencies": latencies,
        "error_count": sum(r["error_count"] for r in results),
        "reconnects": sum(r["reconnects"] for r in results),
        "errors": errors[:5],
    }


def _run_fast(coroutine: Any) -> Any:
    """Run ``coroutine`` on uvloop when it is installed (as every server here is), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--duration", type=float, default=5.0, help="measured seconds per contender per round"
    )
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="unmeasured seconds before each measurement"
    )
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients in all")
    parser.add_argument("--procs", type=int, default=2, help="load generator processes")
    parser.add_argument("--only", action="append", default=[], help="contender(s) to run (repeatable)")
    parser.add_argument(
        "--mode", action="append", default=[], choices=MODES, help="mode(s) to run (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 s; writes nothing")
    parser.add_argument("--start-timeout", type=float, default=120.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another commit (git archive REV | tar -x -C DIR): adds toolkernel served from "
        f"its kernel and HTTP plugin sources as the contender {BASELINE!r}, for before/after in one run",
    )
    # Internal roles: one server, or one load generator process.
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--load", help=argparse.SUPPRESS)
    parser.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="p", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.serve:
        serve_peer(args.serve, args.mode[0], args.port)
        return
    if args.load:
        load = _load(args.load, args.mode[0], args.clients, args.go, args.duration, args.tag)
        result = _run_fast(load)
        args.result.write_text(json.dumps(result))
        return

    if args.quick:
        args.rounds, args.duration, args.warmup = 2, 2.0, 1.0
    global _baseline
    names = [c.name for c in CONTENDERS if not args.only or c.name in args.only]
    notes = {c.name: c.note for c in CONTENDERS if c.name in names}
    if args.baseline is not None:
        _baseline = args.baseline.resolve()
        names.insert(0, BASELINE)
        notes[BASELINE] = f"toolkernel with the kernel and HTTP plugin of {_baseline}"
    modes = args.mode or list(MODES)
    report: dict[str, Any] = {
        "benchmark": "http",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load": os.getloadavg(),
        },
        "packages": {p: _version(p) for p in PACKAGES},
        "settings": {k: getattr(args, k) for k in ("rounds", "duration", "warmup", "clients", "procs")},
        "contenders": notes,
        "modes": {},
        "load_per_round": {},
    }
    for mode in modes:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        loads: list[float] = []
        with _servers(names, mode, args.start_timeout) as servers:
            # Round 0 is a warm-up (lazy imports, first-call caches, connection pools): not recorded.
            for round_no in range(args.rounds + 1):
                loads.append(os.getloadavg()[0])
                for name in names:
                    url, pid = servers[name]
                    run = _run_load(url, pid, mode, args.clients, args.procs, args.duration, args.warmup)
                    if run["error_count"]:
                        raise SystemExit(f"{name} ({mode}) answered wrong: {run['errors']}")
                    if round_no == 0:
                        continue
                    runs[name].append(run)
                    print(
                        f"[{mode}] round {round_no} {name:<10} {run['calls_per_s']:>9.0f} calls/s"
                        f"  (load {loads[-1]:.1f})",
                        flush=True,
                    )
        report["modes"][mode] = _summarize(runs)
        report["load_per_round"][mode] = loads
    _print(report)
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")


def _summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, items in runs.items():
        rates = [r["calls_per_s"] for r in items]
        pooled = sorted(lat for r in items for lat in r["latencies"])
        summary[name] = {
            "calls_per_s": {
                "median": statistics.median(rates),
                "min": min(rates),
                "max": max(rates),
                "rounds": rates,
            },
            "latency_ms": {"p50": _pct(pooled, 0.50) * 1e3, "p99": _pct(pooled, 0.99) * 1e3},
            "server_cpu_us_per_call": statistics.median(r["server_cpu_us_per_call"] for r in items),
            "calls": sum(r["calls"] for r in items),
            "reconnects": sum(r["reconnects"] for r in items),
        }
    for name, row in summary.items():
        row["ratios"] = {
            ref: {
                "throughput": row["calls_per_s"]["median"] / summary[ref]["calls_per_s"]["median"],
                "latency_p50": row["latency_ms"]["p50"] / summary[ref]["latency_ms"]["p50"],
                "latency_p99": row["latency_ms"]["p99"] / summary[ref]["latency_ms"]["p99"],
                "cpu_efficiency": summary[ref]["server_cpu_us_per_call"] / row["server_cpu_us_per_call"],
            }
            for ref in REFERENCES
            if ref in summary and ref != name
        }
    return summary


def _print(report: dict[str, Any]) -> None:
    refs = "".join(f"  {'x ' + r:>9} {'cpu ' + r:>9}" for r in REFERENCES)
    for mode, rows in report["modes"].items():
        loads = ", ".join(f"{x:.1f}" for x in report["load_per_round"][mode])
        print(f"\n{mode}: {report['settings']['clients']} concurrent clients; load average per round {loads}")
        head = f"{'contender':<11}{'calls/s':>9}{'min':>8}{'max':>8}{'p50 ms':>9}{'p99 ms':>9}{'cpu us':>8}"
        print(head + refs)
        for name, row in rows.items():
            rate, lat, ratios = row["calls_per_s"], row["latency_ms"], row["ratios"]
            vs = "".join(
                f"  {ratios[r]['throughput']:>8.2f}x {ratios[r]['cpu_efficiency']:>8.2f}x"
                if r in ratios
                else f"  {'-':>9} {'-':>9}"
                for r in REFERENCES
            )
            print(
                f"{name:<11}{rate['median']:>9.0f}{rate['min']:>8.0f}{rate['max']:>8.0f}"
                f"{lat['p50']:>9.2f}{lat['p99']:>9.2f}{row['server_cpu_us_per_call']:>8.0f}{vs}"
            )


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
