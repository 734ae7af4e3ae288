"""Soak and hostile probes against ``toolkernel serve`` (HTTP, and stdio for one probe). Not a test.

Run from the repo root:

    .venv/bin/python tests/benchmarks/soak.py            # full run, writes results/soak.json
    .venv/bin/python tests/benchmarks/soak.py --quick    # a tenth of every count, writes nothing

Every phase starts its own server (``tests/benchmarks/peers/soak_server.py`` under
``toolkernel serve --transport http --port 0``, loopback only, default options unless a
phase says otherwise) and reads the server process's resident memory (VmRSS) from /proc:

* **soak**: ``--sessions`` stateful SSE sessions, ``--calls`` echo calls spread over them
  (``--workers`` at a time), each session initialized, used and DELETEd; RSS at the start,
  when half the sessions are done, and at the end; errors counted.
* **large results**: ``--large`` calls returning 1 MB each over 20 sessions, then DELETE of
  every session; RSS before, at the peak and after (the bound is: back within 50 MB).
* **abandoned sessions**: ``--abandoned`` ``initialize`` requests never followed by another,
  as fast as they go; then a well-behaved client opens a session and calls a tool.
* **slowloris**: ``--slowloris`` connections that send half their headers and stall, with
  ``header_timeout_s`` at 2 s; a well-behaved client meanwhile; how many slow connections
  the server closed (408) within 4 s.
* **surrogate**: a tool result with a lone surrogate, in all five modes (stdio, stateful
  SSE, stateful JSON, stateless SSE, stateless JSON): the answer and how long it took.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGET = "tests/benchmarks/peers/soak_server.py:app"
RESULTS = HERE / "results" / "soak.json"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"


@contextlib.contextmanager
def served(**options: str) -> Iterator[tuple[str, int]]:
    """``toolkernel serve`` over HTTP with ``TOOLKERNEL_HTTP_<OPTION>`` settings; yields (url, pid)."""
    env = {**os.environ, "TOOLKERNEL_LOG_LEVEL": "ERROR"}
    env.update({f"TOOLKERNEL_HTTP_{k.upper()}": v for k, v in options.items()})
    command = [sys.executable, "-m", "toolkernel", "serve", TARGET, "--transport", "http", "--port", "0"]
    proc = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            found = re.search(r"on (http://\S+)", proc.stderr.readline())
            url = found.group(1) if found else None
        if url is None:
            raise RuntimeError("the server did not start")
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def answer_of(response: httpx.Response, request_id: Any) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("application/json"):
        messages = [json.loads(response.content)] if response.content else []
    else:
        messages = [
            json.loads(x[5:]) for x in response.text.splitlines() if x.startswith("data:") and x[5:].strip()
        ]
    for message in messages:
        if message.get("id") == request_id:
            return dict(message)
    raise RuntimeError(f"no answer for {request_id!r}: {response.status_code} {response.text[:200]!r}")


async def open_session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    response = await client.post(url, json=init, headers=HEADERS)
    answer_of(response, 0)
    session = {**HEADERS, "mcp-protocol-version": VERSION}
    if "mcp-session-id" in response.headers:
        session["mcp-session-id"] = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await client.post(url, json=note, headers=session)
    return session


async def call(
    client: httpx.AsyncClient,
    url: str,
    session: dict[str, str],
    request_id: int,
    name: str,
    arguments: dict[str, Any],
) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return answer_of(await client.post(url, json=body, headers=session), request_id)


@contextlib.asynccontextmanager
async def http() -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        yield client


# -- phases -------------------------------------------------------------------------------------------


async def soak(sessions: int, calls: int, workers: int) -> dict[str, Any]:
    per_session = max(1, calls // sessions)
    with served() as (url, pid):
        async with http() as client:
            warm = await open_session(client, url)
            await call(client, url, warm, 1, "echo", {"text": "warm"})
            await client.delete(url, headers=warm)
            result: dict[str, Any] = {"rss_start_mb": rss_mb(pid), "errors": 0, "calls": 0}
            queue = list(range(sessions))
            done = 0
            started = time.monotonic()

            async def worker() -> None:
                nonlocal done
                while queue:
                    queue.pop()
                    try:
                        session = await open_session(client, url)
                        for i in range(per_session):
                            text = f"call {i}"
                            got = await call(client, url, session, i + 1, "echo", {"text": text})
                            if got.get("result", {}).get("content", [{}])[0].get("text") != text:
                                result["errors"] += 1
                            result["calls"] += 1
                        if (await client.delete(url, headers=session)).status_code != 200:
                            result["errors"] += 1
                    except Exception:
                        result["errors"] += 1
                    done += 1
                    if done == sessions // 2:
                        result["rss_middle_mb"] = rss_mb(pid)

            await asyncio.gather(*(worker() for _ in range(workers)))
            result["seconds"] = time.monotonic() - started
            result["rss_end_mb"] = rss_mb(pid)
            result["sessions"] = sessions
    return result


async def large_results(count: int) -> dict[str, Any]:
    sessions_n = 20
    with served() as (url, pid):
        async with http() as client:
            warm = await open_session(client, url)
            await call(client, url, warm, 1, "big", {"size": 1_000_000})
            await client.delete(url, headers=warm)
            await asyncio.sleep(1)
            result: dict[str, Any] = {"rss_start_mb": rss_mb(pid), "errors": 0, "calls": count}
            sessions = [await open_session(client, url) for _ in range(sessions_n)]
            peak = 0.0

            async def use(session: dict[str, str]) -> None:
                nonlocal peak
                for i in range(count // sessions_n):
                    got = await call(client, url, session, i + 1, "big", {"size": 1_000_000})
                    if len(got["result"]["content"][0]["text"]) != 1_000_000:
                        result["errors"] += 1
                    peak = max(peak, rss_mb(pid))

            for group in range(0, sessions_n, 4):
                await asyncio.gather(*(use(s) for s in sessions[group : group + 4]))
            result["rss_peak_mb"] = peak
            result["rss_before_delete_mb"] = rss_mb(pid)
            for session in sessions:
                await client.delete(url, headers=session)
            await asyncio.sleep(1)
            result["rss_after_delete_mb"] = rss_mb(pid)
            result["delta_mb"] = result["rss_after_delete_mb"] - result["rss_start_mb"]
    return result


async def abandoned(count: int) -> dict[str, Any]:
    with served() as (url, pid):
        async with http() as client:
            params = {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "flood", "version": "0"},
            }
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
            statuses: dict[int, int] = {}
            remaining = count
            started = time.monotonic()

            async def flood() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    status = (await client.post(url, json=init, headers=HEADERS)).status_code
                    statuses[status] = statuses.get(status, 0) + 1

            await asyncio.gather(*(flood() for _ in range(32)))
            seconds = time.monotonic() - started
            begun = time.monotonic()
            try:
                session = await open_session(client, url)
                got = await call(client, url, session, 1, "echo", {"text": "served"})
                served_ok = got["result"]["content"][0]["text"] == "served"
            except Exception as exc:
                served_ok = False
                print("well-behaved client failed:", exc, file=sys.stderr)
            return {
                "initialize_requests": count,
                "statuses": statuses,
                "flood_seconds": seconds,
                "well_behaved_client_served": served_ok,
                "well_behaved_seconds": time.monotonic() - begun,
                "rss_mb": rss_mb(pid),
            }


async def slowloris(count: int) -> dict[str, Any]:
    with served(header_timeout_s="2") as (url, _pid):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        socks = []
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            sock.setblocking(False)
            socks.append(sock)
        begun = time.monotonic()
        async with http() as client:
            session = await open_session(client, url)
            got = await call(client, url, session, 1, "echo", {"text": "served"})
        served_seconds = time.monotonic() - begun
        await asyncio.sleep(4)
        closed = 0
        for sock in socks:
            try:
                data = sock.recv(65536)
                closed += data.startswith(b"HTTP/1.1 408") or data == b""
            except BlockingIOError:
                pass
            sock.close()
        return {
            "slow_connections": count,
            "closed_by_server_within_4s": closed,
            "well_behaved_client_served": got["result"]["content"][0]["text"] == "served",
            "well_behaved_seconds": served_seconds,
        }


async def surrogate() -> dict[str, Any]:
    results: dict[str, Any] = {}
    modes = {
        "stateful-sse": {},
        "stateful-json": {"json_response": "true"},
        "stateless-sse": {"stateless": "true"},
        "stateless-json": {"stateless": "true", "json_response": "true"},
    }
    for mode, options in modes.items():
        with served(**options) as (url, _pid):
            async with http() as client:
                session = await open_session(client, url)
                begun = time.monotonic()
                try:
                    got = await asyncio.wait_for(call(client, url, session, 1, "listing", {}), 30)
                    results[mode] = {"answer": got.get("error"), "seconds": time.monotonic() - begun}
                except Exception as exc:
                    results[mode] = {"answer": f"no answer: {exc!r}", "seconds": time.monotonic() - begun}
    command = [sys.executable, "-m", "toolkernel", "serve", TARGET]
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "soak", "version": "0"}}
    proc.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode() + b"\n"
    )
    await asyncio.wait_for(proc.stdout.readline(), 60)
    begun = time.monotonic()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "listing", "arguments": {}}}
    proc.stdin.write(json.dumps(body).encode() + b"\n")
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        results["stdio"] = {"answer": json.loads(line).get("error"), "seconds": time.monotonic() - begun}
    except TimeoutError:
        results["stdio"] = {"answer": "no answer within 30 s", "seconds": 30.0}
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 30)
    return results


async def run(args: argparse.Namespace) -> dict[str, Any]:
    scale = 10 if args.quick else 1
    results: dict[str, Any] = {}
    print("soak ...", file=sys.stderr)
    results["soak"] = await soak(args.sessions // scale, args.calls // scale, args.workers)
    print("large results ...", file=sys.stderr)
    results["large_results"] = await large_results(args.large // scale)
    print("abandoned sessions ...", file=sys.stderr)
    results["abandoned_sessions"] = await abandoned(args.abandoned // scale)
    print("slowloris ...", file=sys.stderr)
    results["slowloris"] = await slowloris(args.slowloris // scale)
    print("surrogate ...", file=sys.stderr)
    results["surrogate"] = await surrogate()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--large", type=int, default=1000)
    parser.add_argument("--abandoned", type=int, default=10000)
    parser.add_argument("--slowloris", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a tenth of every count; writes nothing")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    text = json.dumps(results, indent=2)
    print(text)
    if not args.quick:
        RESULTS.write_text(text + "\n")


if __name__ == "__main__":
    main()
