"""What requiring a token costs: stateless HTTP with JWT validation against none, in one run.

Not a test (the root pytest config skips tests/benchmarks); run it from the repo root:

    .venv/bin/python tests/benchmarks/oauth_cost.py            # writes results/oauth.json
    .venv/bin/python tests/benchmarks/oauth_cost.py --quick    # smoke run, writes nothing

Two ``toolkernel serve docs/examples/echo_server.py:app --transport http`` processes, stateless
with JSON answers (the 2026-07-28 shape), identical except that one runs with ``--auth jwt``
(toolkernel-oauth's JWT validator: an RS256 signature checked against the key set, ``iss``,
``exp``, ``aud`` = the server's URL; a token verified once is remembered for ``cache_s``, so a
client reusing its token pays the signature check once a minute). The load generator is a
minimal keep-alive HTTP/1.1 client on raw asyncio streams, ``--clients`` connections each
posting ``tools/call echo`` back to back (with ``Authorization: Bearer <JWT>`` for both servers,
so requests are the same bytes) and checking every answer. The two servers ALTERNATE over
``--rounds`` rounds so machine noise lands on both alike. Reported: calls/s per round (median,
min, max), the server process's CPU time per call (from /proc), the throughput ratio
with/without auth (the target is at least 0.85), and, measured in-process, the microseconds one
request's validation takes: a full verification (signature and claims) and a remembered token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

from http_transports import read_response  # noqa: E402 - the benchmarks' one HTTP/1.1 answer reader

RESULTS = HERE / "results" / "oauth.json"
ISSUER = "https://issuer.bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keys() -> tuple[Any, dict[str, Any]]:
    from joserfc.jwk import KeySet, RSAKey

    key = RSAKey.generate_key(2048, parameters={"kid": "bench"})
    return key, KeySet([key]).as_dict(private=False)


def _token(key: Any, audience: str) -> str:
    from joserfc import jwt

    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "bench", "aud": audience, "iat": now, "exp": now + 3600, "scope": "mcp"}
    return jwt.encode({"alg": "RS256", "kid": "bench", "typ": "at+jwt"}, claims, key)  # RFC 9068


def _config(jwks: dict[str, Any], path: Path) -> None:
    """A toolkernel.toml with the jwt validator trusting ``jwks`` (inline, so no key server is needed)."""
    keys = ", ".join("{ " + ", ".join(f'{k} = "{v}"' for k, v in jwk.items()) + " }" for jwk in jwks["keys"])
    path.write_text(f'[plugins.oauth.jwt]\nissuer = "{ISSUER}"\njwks = {{ keys = [{keys}] }}\n')


def _start(port: int, auth: bool, config: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TOOLKERNEL_HTTP_STATELESS": "true", "TOOLKERNEL_HTTP_JSON_RESPONSE": "true"}
    command = [sys.executable, "-m", "toolkernel", "--config", str(config), "serve"]
    command += ["docs/examples/echo_server.py:app", "--transport", "http", "--port", str(port)]
    if auth:
        command += ["--auth", "jwt"]
    return subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL)


def _wait(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server on port {port} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"server on port {port} did not start")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _load(port: int, token: str, clients: int, duration: float) -> tuple[int, list[str]]:
    """``clients`` keep-alive connections posting ``tools/call echo`` for ``duration`` seconds."""
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: application/json, text/event-stream\r\n"
        f"content-type: application/json\r\nmcp-protocol-version: 2025-06-18\r\n"
        f"authorization: Bearer {token}\r\n"
    ).encode()
    calls = 0
    errors: list[str] = []
    stop = time.perf_counter() + duration

    async def client(index: int) -> None:
        nonlocal calls
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        request_id = 0
        try:
            while time.perf_counter() < stop:
                request_id += 1
                text = f"c{index}-{request_id}"
                body = (
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
                    b'"params":{"name":"echo","arguments":{"text":"%s"}}}' % (request_id, text.encode())
                )
                writer.write(b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body))
                status, _, answer = await read_response(reader)
                if status != 200 or text.encode() not in answer:
                    errors.append(f"HTTP {status}: {answer[:120]!r}")
                    return
                calls += 1
        finally:
            writer.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return calls, errors


def _validation_us(jwks: dict[str, Any], token: str, audience: str, iterations: int) -> dict[str, float]:
    """Microseconds per validation in-process: the validator alone, and with the resource server's checks."""
    from toolkernel_oauth.resource import ResourceServer
    from toolkernel_oauth.settings import JWTSettings
    from toolkernel_oauth.validators import JWTValidator

    cold = JWTValidator(JWTSettings(issuer=ISSUER, jwks=jwks, cache_s=0))
    warm = JWTValidator(JWTSettings(issuer=ISSUER, jwks=jwks))
    guard = ResourceServer(warm)

    async def timed(check: Any) -> float:
        started = time.perf_counter()
        for _ in range(iterations):
            await check()
        return round((time.perf_counter() - started) / iterations * 1e6, 1)

    async def run() -> dict[str, float]:
        assert await guard.verify(token, audience) is not None
        return {
            "full_verification_us": await timed(lambda: cold.verify(token)),
            "remembered_token_us": await timed(lambda: warm.verify(token)),
            "resource_server_remembered_us": await timed(lambda: guard.verify(token, audience)),
        }

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per server per round")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="2 short rounds, nothing written")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.duration = 2, 2.0

    key, jwks = _keys()
    ports = {"no auth": _free_port(), "jwt": _free_port()}
    tokens = {name: _token(key, f"http://127.0.0.1:{port}/mcp") for name, port in ports.items()}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "toolkernel.toml"
        _config(jwks, config)
        procs = {name: _start(port, name == "jwt", config) for name, port in ports.items()}
        try:
            for name, proc in procs.items():
                _wait(ports[name], proc)
            rates: dict[str, list[float]] = {name: [] for name in ports}
            cpu: dict[str, list[float]] = {name: [] for name in ports}
            asyncio.run(_load(ports["jwt"], tokens["jwt"], args.clients, 1.0))  # warm both up
            asyncio.run(_load(ports["no auth"], tokens["no auth"], args.clients, 1.0))
            for round_ in range(args.rounds):
                order = list(ports) if round_ % 2 == 0 else list(reversed(ports))
                for name in order:
                    before = _cpu(procs[name].pid)
                    calls, errors = asyncio.run(_load(ports[name], tokens[name], args.clients, args.duration))
                    spent = _cpu(procs[name].pid) - before
                    if errors or not calls:
                        raise SystemExit(f"{name}: {errors[:3]}")
                    rates[name].append(calls / args.duration)
                    cpu[name].append(spent / calls * 1e6)
                    print(f"round {round_ + 1} {name:8s} {calls / args.duration:8.0f} calls/s", flush=True)
        finally:
            for proc in procs.values():
                proc.terminate()
                proc.wait(timeout=10)

    summary: dict[str, Any] = {}
    for name in ports:
        summary[name] = {
            "calls_per_s_median": round(statistics.median(rates[name])),
            "calls_per_s_min": round(min(rates[name])),
            "calls_per_s_max": round(max(rates[name])),
            "server_cpu_us_per_call_median": round(statistics.median(cpu[name]), 1),
        }
    paired = [a / b for a, b in zip(rates["jwt"], rates["no auth"], strict=True)]
    summary["throughput_ratio_jwt_vs_none"] = round(statistics.median(paired), 3)
    summary["cpu_ratio_jwt_vs_none"] = round(
        summary["no auth"]["server_cpu_us_per_call_median"] / summary["jwt"]["server_cpu_us_per_call_median"],
        3,
    )
    summary["validation"] = _validation_us(jwks, tokens["jwt"], f"http://127.0.0.1:{ports['jwt']}/mcp", 2000)
    summary["setup"] = {
        "rounds": args.rounds,
        "duration_s": args.duration,
        "clients": args.clients,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(summary, indent=2))
    if not args.quick:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
