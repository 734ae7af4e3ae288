"""Stdio benchmark: toolkernel's echo server against FastMCP, the SDK's MCPServer and a raw loop.

Not a test (the root pytest config skips tests/benchmarks); run it as a script from the repo root:

    .venv/bin/python tests/benchmarks/stdio.py            # full run, writes results/stdio.json
    .venv/bin/python tests/benchmarks/stdio.py --quick    # smoke run, writes nothing
    .venv/bin/python tests/benchmarks/stdio.py --only raw --only sdk

Three measurements per contender, each taken with the contenders ALTERNATING inside every
round (A B C D, A B C D, ...) so machine noise lands on all of them alike:

* throughput: one server process per round; initialize handshake (protocol 2025-06-18 and
  notifications/initialized), a short sequential warm-up, then N ``tools/call echo`` requests
  written by a writer thread while the reader thread collects the responses (fully pipelined).
  calls/s = N / (first request written -> last response read). Every response is checked
  afterwards: ids match one to one, content text equals the text sent, no error. The server
  process's CPU time (user + sys, all threads, from /proc) over the batch gives CPU µs per call,
  which a busy machine disturbs far less than wall-clock throughput.
* sequential latency: in the same process, before the pipelined batch, M calls one at a time
  (write, wait for the answer); p50/p99 over all rounds pooled.
* cold start: spawn -> first byte of the initialize result on stdout (the initialize request is
  written straight after spawn, so it waits in the pipe); median and p90. Then, in the same
  process, notifications/initialized and tools/list: spawn -> the tools/list answer is "ready",
  the time until a client can use the server (toolkernel answers initialize before it loads
  the SDK, so its ready time also holds the SDK's import).

The contender list is the CONTENDERS table. A contender that dies, stalls or answers wrong makes
the whole run fail with its stderr tail; leave it out with ``--only``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RESULTS = HERE / "results" / "stdio.json"

PROTOCOL_VERSION = "2025-06-18"


@dataclass(frozen=True)
class Contender:
    name: str
    args: tuple[str, ...]  # after the python interpreter
    note: str
    env: tuple[tuple[str, str], ...] = ()  # set for this contender's processes only


# The table. Order here is the order within every round. All are run from the repo root.
CONTENDERS: tuple[Contender, ...] = (
    Contender(
        "toolkernel",
        ("-m", "toolkernel", "serve", "docs/examples/echo_server.py:app"),
        "toolkernel serve, stdio (default transport)",
    ),
    Contender(
        "tk-sdk-init",
        ("-m", "toolkernel", "serve", "docs/examples/echo_server.py:app"),
        "toolkernel serve, stdio, initialize answered by the SDK (TOOLKERNEL_STDIO_EARLY_INITIALIZE=0)",
        (("TOOLKERNEL_STDIO_EARLY_INITIALIZE", "0"),),
    ),
    Contender("fastmcp", ("tests/benchmarks/peers/fastmcp_echo.py",), "FastMCP 4.x, @mcp.tool, banner off"),
    Contender("sdk", ("tests/benchmarks/peers/sdk_echo.py",), "mcp SDK MCPServer, its stdio transport"),
    Contender("raw", ("tests/benchmarks/peers/raw_echo.py",), "raw JSON-lines loop, no SDK (the floor)"),
)
REFERENCES = ("fastmcp", "sdk")  # ratios are given against these

PACKAGES = ("toolkernel", "mcp", "fastmcp", "pydantic", "pydantic-core", "anyio", "uvloop", "orjson")


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Launch:
    """How servers are started: interpreter, environment, per-wait timeout."""

    python: str
    env: dict[str, str]
    timeout: float


def server_env(pyc: bool) -> dict[str, str]:
    """The servers' environment.

    With ``pyc`` (the default) bytecode caching is forced on and redirected to a prefix outside
    the tree, so cold start is measured the way users see it from the second launch on (an
    environment with PYTHONDONTWRITEBYTECODE=1 and no .pyc files recompiles every import on every
    spawn, which swamps everything else). The warm-up spawn fills the cache.
    """
    env = dict(os.environ)
    if pyc:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "toolkernel-bench-pycache")
    return env


# --------------------------------------------------------------------------- server process


class Server:
    """One spawned server: stdin writer, a reader thread collecting stdout lines, stderr to a file."""

    def __init__(self, contender: Contender, launch: Launch) -> None:
        self.contender = contender
        self.timeout = launch.timeout
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self._cond = threading.Condition()
        self._lines: list[bytes] = []
        self._target = 0
        self.target_reached_at = 0.0
        self.first_byte_at = 0.0
        self._eof = False
        self.spawned_at = time.perf_counter()
        self.proc = subprocess.Popen(
            [launch.python, *contender.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=REPO,
            env={**launch.env, **dict(contender.env)},
            bufsize=0,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._stdout_fd = self.proc.stdout.fileno()
        self._reader = threading.Thread(target=self._read_loop, name=f"read-{contender.name}", daemon=True)
        self._reader.start()

    # -- reading
    def _read_loop(self) -> None:
        buf = b""
        fd = self._stdout_fd
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            now = time.perf_counter()
            if not chunk:
                with self._cond:
                    self._eof = True
                    self._cond.notify_all()
                return
            if not self.first_byte_at:
                self.first_byte_at = now
            buf += chunk
            if b"\n" not in chunk:
                continue
            *complete, buf = buf.split(b"\n")
            with self._cond:
                self._lines.extend(line for line in complete if line.strip())
                if self._target and not self.target_reached_at and len(self._lines) >= self._target:
                    self.target_reached_at = now
                self._cond.notify_all()

    def wait_lines(self, count: int, timeout: float | None = None) -> list[bytes]:
        """Block until at least ``count`` stdout lines have arrived in total; return them all."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._cond:
            while len(self._lines) < count:
                if self._eof:
                    self.fail(f"stdout closed after {len(self._lines)} of {count} lines")
                left = deadline - time.monotonic()
                if left <= 0:
                    self.fail(f"timed out waiting for line {count} (got {len(self._lines)})")
                self._cond.wait(left)
            return self._lines

    def set_target(self, count: int) -> None:
        with self._cond:
            self._target = count
            self.target_reached_at = 0.0
            if len(self._lines) >= count:
                self.target_reached_at = time.perf_counter()

    @property
    def line_count(self) -> int:
        with self._cond:
            return len(self._lines)

    # -- writing
    def write(self, data: bytes) -> None:
        try:
            self._stdin.write(data)
        except (BrokenPipeError, OSError) as exc:
            self.fail(f"write failed: {exc!r}")

    def write_raw(self, data: bytes) -> None:
        """Write without catching errors (for the writer thread, which reports them itself)."""
        self._stdin.write(data)

    def send(self, msg: dict[str, Any]) -> None:
        self.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def request(self, mid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Sequential request: send, wait for the response with this id, return it."""
        seen = self.line_count
        self.send({"jsonrpc": "2.0", "id": mid, "method": method, "params": params})
        while True:
            lines = self.wait_lines(seen + 1)
            for raw in lines[seen:]:
                msg = self.parse(raw)
                if msg.get("id") == mid and ("result" in msg or "error" in msg):
                    if "error" in msg:
                        self.fail(f"{method} id={mid} answered with error {msg['error']!r}")
                    return msg
            seen = len(lines)

    # -- failure and shutdown
    def stderr_tail(self, limit: int = 4000) -> str:
        try:
            self._stderr.seek(0)
            data = self._stderr.read()
        except (OSError, ValueError):
            return "<stderr unavailable>"
        return data[-limit:].decode(errors="replace")

    def parse(self, raw: bytes) -> dict[str, Any]:
        try:
            msg = json.loads(raw)
        except ValueError:
            self.fail(f"non-JSON line on stdout: {raw[:300]!r}")
        if not isinstance(msg, dict):
            self.fail(f"stdout line is not a JSON object: {raw[:300]!r}")
        return msg

    def fail(self, why: str) -> NoReturn:
        if self._eof:  # stdout closed: give the process a moment to report its exit code
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
        rc = self.proc.poll()
        state = "still running" if rc is None else f"exited rc={rc}"
        self._stop()
        tail = self.stderr_tail()
        self.close()
        raise BenchError(f"[{self.contender.name}] {why} (server {state})\n--- stderr tail ---\n{tail}")

    def close(self) -> None:
        self._stop()
        self._stderr.close()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self._stdin.close()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --------------------------------------------------------------------------- protocol helpers


def initialize_params() -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "toolkernel-bench", "version": "0"},
    }


def check_initialize(srv: Server, msg: dict[str, Any]) -> None:
    result = msg.get("result")
    if not isinstance(result, dict) or "protocolVersion" not in result:
        srv.fail(f"bad initialize result: {msg!r:.500}")
    if result["protocolVersion"] != PROTOCOL_VERSION:
        srv.fail(f"server negotiated {result['protocolVersion']!r}, expected {PROTOCOL_VERSION}")


def handshake(srv: Server) -> None:
    msg = srv.request(0, "initialize", initialize_params())
    check_initialize(srv, msg)
    srv.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def call_params(text: str) -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": text}}


def check_echo(srv: Server, msg: dict[str, Any], text: str) -> None:
    if "error" in msg:
        srv.fail(f"id={msg.get('id')} error {msg['error']!r}")
    result = msg.get("result")
    try:
        assert isinstance(result, dict)
        got = result["content"][0]["text"]
        is_error = result.get("isError", False)
    except (AssertionError, KeyError, IndexError, TypeError):
        srv.fail(f"id={msg.get('id')} malformed tools/call result: {msg!r:.500}")
    if is_error:
        srv.fail(f"id={msg.get('id')} isError=true: {result!r:.500}")
    if got != text:
        srv.fail(f"id={msg.get('id')} echoed {got!r}, sent {text!r}")


# --------------------------------------------------------------------------- measurements


@dataclass
class Samples:
    throughput: list[float] = field(default_factory=list)  # calls/s, one per round
    cpu_us: list[float] = field(default_factory=list)  # server CPU µs per pipelined call, per round
    latency_us: list[float] = field(default_factory=list)  # sequential per-call, all rounds pooled
    cold_s: list[float] = field(default_factory=list)  # spawn -> first byte of initialize result
    cold_cpu_s: list[float] = field(default_factory=list)  # server CPU used by then
    ready_s: list[float] = field(default_factory=list)  # spawn -> the tools/list answer
    ready_cpu_s: list[float] = field(default_factory=list)  # server CPU used by then


def check_tools(srv: Server) -> None:
    msg = srv.request(1, "tools/list", {})
    tools = msg.get("result", {}).get("tools", [])
    if not any(isinstance(t, dict) and t.get("name") == "echo" for t in tools):
        srv.fail(f"tools/list has no echo tool: {msg!r:.500}")


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (all its threads) from /proc; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def sequential(srv: Server, first_id: int, count: int, warmup: int) -> list[float]:
    """``warmup + count`` calls one at a time; the per-call latencies (µs) after the warm-up."""
    latencies: list[float] = []
    for i in range(warmup + count):
        text = f"seq-{i}"
        t0 = time.perf_counter()
        msg = srv.request(first_id + i, "tools/call", call_params(text))
        dt = time.perf_counter() - t0
        check_echo(srv, msg, text)
        if i >= warmup:
            latencies.append(dt * 1e6)
    return latencies


@dataclass
class Batch:
    calls_per_s: float
    server_cpu_us_per_call: float | None  # user + system CPU of the server process, per call


def pipelined(srv: Server, first_id: int, calls: int) -> Batch:
    """``calls`` requests written back to back by a writer thread; every response checked.

    Besides wall-clock calls/s it reports the server's CPU time per call, which a busy machine
    disturbs far less than wall-clock time (the server gets fewer slices, not more work).
    """
    # everything is encoded up front so that the client costs as little as possible while timed
    base = srv.line_count
    texts = [f"hello world {i}" for i in range(calls)]
    payload = b"".join(
        json.dumps(
            {"jsonrpc": "2.0", "id": first_id + i, "method": "tools/call", "params": call_params(t)},
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i, t in enumerate(texts)
    )
    chunks = [payload[i : i + (1 << 16)] for i in range(0, len(payload), 1 << 16)]
    write_error: list[BaseException] = []

    def writer() -> None:
        try:
            for chunk in chunks:
                srv.write_raw(chunk)
        except BaseException as exc:  # reported by the main thread
            write_error.append(exc)

    srv.set_target(base + calls)
    wt = threading.Thread(target=writer, name=f"write-{srv.contender.name}", daemon=True)
    batch_timeout = max(60.0, calls / 50)
    cpu0 = cpu_seconds(srv.proc.pid)
    t0 = time.perf_counter()
    wt.start()
    # responses may be interleaved with notifications: wait until there are `calls` responses
    need = base + calls
    while True:
        lines = srv.wait_lines(need, timeout=batch_timeout)
        if write_error:
            srv.fail(f"writer failed: {write_error[0]!r}")
        batch = [srv.parse(raw) for raw in lines[base:]]
        responses = [m for m in batch if "id" in m and ("result" in m or "error" in m)]
        if len(responses) >= calls:
            break
        need = len(lines) + (calls - len(responses))
        srv.set_target(need)
    t1 = srv.target_reached_at or time.perf_counter()
    cpu1 = cpu_seconds(srv.proc.pid)
    wt.join(timeout=srv.timeout)
    if wt.is_alive():
        srv.fail("writer thread stuck")

    seen: set[int] = set()
    for msg in responses:
        rid = msg["id"]
        idx = rid - first_id if isinstance(rid, int) else -1
        if not 0 <= idx < calls:
            srv.fail(f"response with unexpected id {rid!r}")
        if idx in seen:
            srv.fail(f"duplicate response id {rid}")
        seen.add(idx)
        check_echo(srv, msg, texts[idx])
    if len(seen) != calls:
        srv.fail(f"{calls - len(seen)} responses missing")
    if srv.proc.poll() is not None:
        srv.fail("server exited during the run")
    cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / calls * 1e6
    return Batch(calls / (t1 - t0), cpu)


def throughput_round(
    contender: Contender, launch: Launch, calls: int, seq_calls: int, warmup: int
) -> tuple[Batch, list[float]]:
    """One fresh server: handshake, tools/list, sequential latencies, then one pipelined batch."""
    srv = Server(contender, launch)
    try:
        handshake(srv)
        check_tools(srv)
        latencies = sequential(srv, 10, seq_calls, warmup)
        return pipelined(srv, 10 + warmup + seq_calls, calls), latencies
    finally:
        srv.close()


@dataclass(frozen=True)
class ColdStart:
    initialize_s: float  # spawn -> first byte of the initialize result
    initialize_cpu_s: float | None  # server CPU (user + sys) read just after that
    ready_s: float  # spawn -> the tools/list answer, asked right after the initialize answer
    ready_cpu_s: float | None


def cold_start(contender: Contender, launch: Launch) -> ColdStart:
    """Spawn -> first byte of the initialize result, then -> the tools/list answer, with server CPU."""
    srv = Server(contender, launch)
    try:
        srv.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params()})
        lines = srv.wait_lines(1)
        # Read at once: most servers now idle waiting for the next message; toolkernel goes on
        # loading the SDK, so a few ms of that may count here too.
        cpu = cpu_seconds(srv.proc.pid)
        first = srv.first_byte_at
        msg = srv.parse(lines[0])
        if msg.get("id") != 0:
            srv.fail(f"first stdout line is not the initialize result: {lines[0][:300]!r}")
        check_initialize(srv, msg)
        srv.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        check_tools(srv)
        ready = time.perf_counter()
        return ColdStart(first - srv.spawned_at, cpu, ready - srv.spawned_at, cpu_seconds(srv.proc.pid))
    finally:
        srv.close()


# --------------------------------------------------------------------------- statistics and output


def pct(values: Sequence[float], q: float) -> float:
    """Percentile by linear interpolation between closest ranks (q in 0..100)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(samples: dict[str, Samples]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, s in samples.items():
        tp = s.throughput
        med = statistics.median(tp)
        out[name] = {
            "throughput_calls_per_s": {
                "median": round(med, 1),
                "min": round(min(tp), 1),
                "max": round(max(tp), 1),
                "spread_pct": round(100 * (max(tp) - min(tp)) / med, 1),
                "rounds": [round(v, 1) for v in tp],
            },
            "server_cpu_us_per_call": (
                {
                    "median": round(statistics.median(s.cpu_us), 1),
                    "min": round(min(s.cpu_us), 1),
                    "max": round(max(s.cpu_us), 1),
                    "rounds": [round(v, 1) for v in s.cpu_us],
                }
                if s.cpu_us
                else None
            ),
            "sequential_latency_us": {
                "p50": round(pct(s.latency_us, 50), 1),
                "p99": round(pct(s.latency_us, 99), 1),
                "mean": round(statistics.fmean(s.latency_us), 1),
                "samples": len(s.latency_us),
            },
            "cold_start_s": {
                "median": round(statistics.median(s.cold_s), 4),
                "p90": round(pct(s.cold_s, 90), 4),
                "min": round(min(s.cold_s), 4),
                "runs": [round(v, 4) for v in s.cold_s],
                "server_cpu_median": round(statistics.median(s.cold_cpu_s), 3) if s.cold_cpu_s else None,
                "server_cpu_runs": [round(v, 3) for v in s.cold_cpu_s],
            },
            "ready_s": {
                "median": round(statistics.median(s.ready_s), 4),
                "p90": round(pct(s.ready_s, 90), 4),
                "runs": [round(v, 4) for v in s.ready_s],
                "server_cpu_median": round(statistics.median(s.ready_cpu_s), 3) if s.ready_cpu_s else None,
                "server_cpu_runs": [round(v, 3) for v in s.ready_cpu_s],
            },
        }
    for row in out.values():
        ratios: dict[str, dict[str, float | None]] = {}
        for ref in REFERENCES:
            if ref not in out:
                continue
            r = out[ref]
            cpu, ref_cpu = row["server_cpu_us_per_call"], r["server_cpu_us_per_call"]
            cold_cpu = row["cold_start_s"]["server_cpu_median"]
            ref_cold_cpu = r["cold_start_s"]["server_cpu_median"]
            ready_cpu, ref_ready_cpu = row["ready_s"]["server_cpu_median"], r["ready_s"]["server_cpu_median"]
            ratios[f"vs_{ref}"] = {
                # ref CPU / this CPU: how many times less server CPU a call costs (higher is better)
                "cpu_efficiency": round(ref_cpu["median"] / cpu["median"], 3) if cpu and ref_cpu else None,
                "throughput": round(
                    row["throughput_calls_per_s"]["median"] / r["throughput_calls_per_s"]["median"], 3
                ),
                "latency_p50": round(
                    row["sequential_latency_us"]["p50"] / r["sequential_latency_us"]["p50"], 3
                ),
                "cold_start": round(row["cold_start_s"]["median"] / r["cold_start_s"]["median"], 3),
                "cold_start_cpu": round(cold_cpu / ref_cold_cpu, 3) if cold_cpu and ref_cold_cpu else None,
                "ready": round(row["ready_s"]["median"] / r["ready_s"]["median"], 3),
                "ready_cpu": round(ready_cpu / ref_ready_cpu, 3) if ready_cpu and ref_ready_cpu else None,
            }
        row["ratios"] = ratios
    return out


def machine_facts(python: str) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        # the server under test may be uncommitted work: say so, or the commit means nothing
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "kernel/src", "docs/examples", "tests/benchmarks/peers"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit, dirty = "", ""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "server_python": python,
        "packages": versions,
        "git_commit": commit,
        "uncommitted_server_code": bool(dirty),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loadavg_start": [round(v, 2) for v in os.getloadavg()],
    }


def print_table(summary: dict[str, dict[str, Any]], contenders: Sequence[Contender]) -> None:
    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    cols = [
        ("contender", 11),
        ("calls/s", 8),
        ("spread", 6),
        ("x fmcp", 6),
        ("x sdk", 6),
        ("cpu µs/call", 11),
        ("cpu-eff x fmcp", 14),
        ("seq p50 µs", 10),
        ("seq p99 µs", 10),
        ("cold med s", 10),
        ("cold p90 s", 10),
        ("cold x fmcp", 11),
        ("cold cpu s", 10),
        ("x fmcp", 6),
        ("ready med s", 11),
        ("x fmcp", 6),
        ("ready cpu s", 11),
        ("x fmcp", 6),
    ]
    print()
    print("  ".join(title.rjust(w) if i else title.ljust(w) for i, (title, w) in enumerate(cols)))
    for c in contenders:
        row = summary[c.name]
        tp = row["throughput_calls_per_s"]
        cpu = row["server_cpu_us_per_call"]
        lat = row["sequential_latency_us"]
        cold = row["cold_start_s"]
        ready = row["ready_s"]
        rf = row["ratios"].get("vs_fastmcp", {})
        rs = row["ratios"].get("vs_sdk", {})
        cells = [
            c.name,
            f"{tp['median']:.0f}",
            f"±{tp['spread_pct'] / 2:.0f}%",
            ratio(rf.get("throughput")),
            ratio(rs.get("throughput")),
            f"{cpu['median']:.0f}" if cpu else "-",
            ratio(rf.get("cpu_efficiency")),
            f"{lat['p50']:.0f}",
            f"{lat['p99']:.0f}",
            f"{cold['median']:.3f}",
            f"{cold['p90']:.3f}",
            ratio(rf.get("cold_start")),
            f"{cold['server_cpu_median']:.3f}" if cold["server_cpu_median"] else "-",
            ratio(rf.get("cold_start_cpu")),
            f"{ready['median']:.3f}",
            ratio(rf.get("ready")),
            f"{ready['server_cpu_median']:.3f}" if ready["server_cpu_median"] else "-",
            ratio(rf.get("ready_cpu")),
        ]
        pairs = enumerate(zip(cells, (w for _, w in cols), strict=True))
        print("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in pairs))
    print()
    print("calls/s: pipelined, median of rounds; spread: ±half the per-round (max - min), % of the median")
    print("cpu µs/call: server process user+sys CPU per pipelined call (robust on a busy machine);")
    print("cpu-eff x fmcp: FastMCP's CPU per call / this row's (higher is better)")
    print("cold cpu s: server CPU (user+sys) from spawn to its initialize answer, median;")
    print("            its x fmcp: / FastMCP's (lower is better)")
    print("ready: spawn -> the tools/list answer asked right after the initialize answer (wall, CPU)")


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    names = [c.name for c in CONTENDERS]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=7, help="throughput rounds (default 7)")
    p.add_argument("--calls", type=int, default=5000, help="pipelined calls per round (default 5000)")
    p.add_argument("--seq-calls", type=int, default=500, help="sequential calls per round (default 500)")
    p.add_argument("--warmup", type=int, default=100, help="sequential warm-up calls per round (default 100)")
    p.add_argument("--cold-runs", type=int, default=10, help="cold starts per contender (default 10)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these contenders (repeat or comma-separate): {', '.join(names)}",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: 2 rounds, 1000 calls, 100 seq, 3 cold")
    p.add_argument("--timeout", type=float, default=30.0, help="per-wait timeout in seconds (default 30)")
    p.add_argument(
        "--no-pyc",
        action="store_true",
        help="leave the environment's bytecode settings alone (by default .pyc caching is forced on, "
        "with PYTHONPYCACHEPREFIX in the temp dir)",
    )
    p.add_argument("--python", default=sys.executable, help="interpreter for the servers (default: this one)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"JSON results path (default {RESULTS.relative_to(REPO)} for a full run; "
        "--quick/--only runs write nothing unless --out is given)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.calls, args.seq_calls, args.warmup, args.cold_runs = 2, 1000, 100, 50, 3
    only = {n.strip() for item in args.only for n in item.split(",") if n.strip()}
    unknown = only - set(names)
    if unknown:
        p.error(f"unknown contender(s) {sorted(unknown)}; known: {names}")
    args.contenders = [c for c in CONTENDERS if not only or c.name in only]
    if args.out is None and not args.quick and not only:
        args.out = RESULTS
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The client has a reader and a writer thread; a short switch interval keeps either from
    # waiting on the GIL for the default 5 ms while the other is busy (a convoy that would
    # throttle the fastest servers and look like server slowness).
    sys.setswitchinterval(0.0005)
    contenders: list[Contender] = args.contenders
    facts = machine_facts(args.python)
    print(
        f"python {facts['python']} on {facts['cpus_usable']} cpus; "
        + ", ".join(f"{k} {v}" for k, v in facts["packages"].items() if v)
    )
    print(
        f"contenders: {', '.join(c.name for c in contenders)}; rounds={args.rounds} calls={args.calls} "
        f"seq={args.seq_calls} cold={args.cold_runs}"
    )
    launch = Launch(args.python, server_env(not args.no_pyc), args.timeout)
    samples = {c.name: Samples() for c in contenders}
    try:
        # warm the page cache / bytecode caches once per contender (not measured)
        for c in contenders:
            cold_start(c, launch)
        for r in range(args.rounds):
            line = []
            for c in contenders:
                batch, lat = throughput_round(c, launch, args.calls, args.seq_calls, args.warmup)
                samples[c.name].throughput.append(batch.calls_per_s)
                if batch.server_cpu_us_per_call is not None:
                    samples[c.name].cpu_us.append(batch.server_cpu_us_per_call)
                samples[c.name].latency_us.extend(lat)
                cpu = batch.server_cpu_us_per_call
                line.append(
                    f"{c.name} {batch.calls_per_s:,.0f}/s"
                    + (f" {cpu:.0f}µs-cpu" if cpu is not None else "")
                    + f" p50 {pct(lat, 50):.0f}µs"
                )
            print(f"round {r + 1}/{args.rounds}: " + " | ".join(line), flush=True)
        for r in range(args.cold_runs):
            line = []
            for c in contenders:
                cs = cold_start(c, launch)
                s = samples[c.name]
                s.cold_s.append(cs.initialize_s)
                s.ready_s.append(cs.ready_s)
                if cs.initialize_cpu_s is not None and cs.ready_cpu_s is not None:
                    s.cold_cpu_s.append(cs.initialize_cpu_s)
                    s.ready_cpu_s.append(cs.ready_cpu_s)
                cpu = cs.initialize_cpu_s
                line.append(
                    f"{c.name} {cs.initialize_s:.3f}s"
                    + (f" ({cpu:.2f}s cpu)" if cpu is not None else "")
                    + f" ready {cs.ready_s:.3f}s"
                )
            print(f"cold {r + 1}/{args.cold_runs}: " + " | ".join(line), flush=True)
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1

    facts["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    summary = summarize(samples)
    print_table(summary, contenders)
    if args.out is not None:
        doc = {
            "benchmark": "stdio echo: pipelined tools/call throughput, sequential latency, cold start",
            "machine": facts,
            "settings": {
                "rounds": args.rounds,
                "pipelined_calls_per_round": args.calls,
                "sequential_calls_per_round": args.seq_calls,
                "warmup_calls_per_round": args.warmup,
                "cold_runs": args.cold_runs,
                "protocol_version": PROTOCOL_VERSION,
                "bytecode_cache": "default environment" if args.no_pyc else "forced on (PYTHONPYCACHEPREFIX)",
                "order": "contenders alternate within every round",
            },
            "contenders": {
                c.name: {"command": ["python", *c.args], "env": dict(c.env), "note": c.note}
                for c in contenders
            },
            "results": summary,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
