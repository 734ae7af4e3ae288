"""``toolkernel auth login`` as a user runs it, against a real authorization server (npm
oidc-provider under Node 22) protecting a real ``toolkernel kb serve --auth jwt``.

Every process is real: the knowledge base is ingested with the fast ``local/wordllama-256``
embedder, the server and the login are subprocesses, and the user's browser is
:func:`drive_login` submitting the provider's development login and consent pages over HTTP,
then following the redirect to the login's loopback listener. With and without dynamic
client registration, ``--no-browser`` each time: one authorization URL is shown, the login
exits 0, and the token it kept is accepted by the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from .conftest import loopback_socket
from .test_oauth_e2e import drive_login, oidc_provider

pytestmark = [pytest.mark.node, pytest.mark.timeout(300)]

TOOLKERNEL = [sys.executable, "-m", "toolkernel"]
EMBEDDER = "local/wordllama-256"
DOC = "Lighthouses guide ships along the coast at night with a rotating beam of light.\n"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-document knowledge base embedded with the fast wordllama model."""
    root = tmp_path_factory.mktemp("kb")
    (root / "docs").mkdir()
    (root / "docs" / "lighthouses.md").write_text(DOC)
    home = root / "kb"
    subprocess.run(
        [*TOOLKERNEL, "kb", "ingest", str(root / "docs"), "--kb", str(home), "--embedder", EMBEDDER],
        check=True,
        capture_output=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    return home


@contextlib.contextmanager
def protected_kb(kb: Path, *, registration: bool) -> Iterator[dict[str, Any]]:
    """oidc-provider, and ``kb serve --auth jwt`` trusting it; yields the URL, issuer and server log."""
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()  # kb serve binds it again (SO_REUSEADDR); the URL must be known to the provider first
    url = f"http://127.0.0.1:{port}/mcp"
    with oidc_provider(url, "jwt", ttl=300, registration=registration) as issuer:
        env = {
            **os.environ,
            "TOOLKERNEL_OAUTH_AUTHORIZATION_SERVERS": json.dumps([issuer]),
            "TOOLKERNEL_OAUTH_JWT": json.dumps({"issuer": issuer, "jwks_uri": f"{issuer}/jwks"}),
        }
        env.pop("TOOLKERNEL_OAUTH_TOKENS", None)
        serve = ["kb", "serve", "--kb", str(kb), "--transport", "http", "--port", str(port), "--auth", "jwt"]
        server = subprocess.Popen(
            [*TOOLKERNEL, *serve],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stderr is not None
            started = server.stderr.readline()
            assert f"on {url}" in started, started
            yield {"url": url, "issuer": issuer, "started": started, "server": server}
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)


def login(url: str, tokens: Path, *extra: str) -> tuple[int, list[str]]:
    """Run ``auth login URL --no-browser``, be the user for every URL it shows; its exit code and stderr."""
    env = {**os.environ, "TOOLKERNEL_OAUTH_TOKENS": str(tokens)}
    proc = subprocess.Popen(
        [*TOOLKERNEL, "auth", "login", url, "--no-browser", "--timeout", "120", *extra],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            shown = re.search(r"(http://127\.0\.0\.1:\d+/auth\?\S+)", line)
            if shown:
                redirect = parse_qs(urlsplit(shown.group(1)).query)["redirect_uri"][0]
                back = anyio.run(drive_login, shown.group(1), redirect)
                with httpx2.Client(timeout=30) as browser:
                    assert browser.get(back).status_code == 200  # the loopback listener took it
        return proc.wait(timeout=120), lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def search_with(url: str, token: str) -> subprocess.CompletedProcess[str]:
    args = json.dumps({"query": "lighthouse beam", "top_k": 1})
    return subprocess.run(
        [*TOOLKERNEL, "call", url, "search", "--args", args, "--header", f"Authorization: Bearer {token}"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def kept_token(tokens: Path, url: str) -> str:
    return str(json.loads(tokens.read_text())[url]["tokens"]["access_token"])


@pytest.mark.parametrize("registration", [True, False], ids=["dynamic-registration", "pre-registered-client"])
def test_login_then_the_protected_kb_accepts_the_token(kb: Path, tmp_path: Path, registration: bool) -> None:
    tokens = tmp_path / "tokens.json"
    extra = () if registration else ("--client-id", "cli-client")
    with protected_kb(kb, registration=registration) as env:
        url = env["url"]
        assert "authentication on: jwt" in env["started"]
        code, lines = login(url, tokens, *extra)
        assert code == 0, "".join(lines)
        assert sum("/auth?" in line for line in lines) == 1, "".join(lines)  # one URL, one state
        assert lines[-1].startswith(f"logged in to {url}")
        found = search_with(url, kept_token(tokens, url))
        assert found.returncode == 0, found.stderr
        assert "Lighthouses" in found.stdout
        refused = search_with(url, "forged.token.value")
        assert refused.returncode == 3
        assert refused.stderr.count("\n") == 1
        assert f"{url} refused the token (HTTP 401" in refused.stderr
        assert "gave up" not in refused.stderr


def test_login_without_registration_or_client_id_says_what_to_do(kb: Path, tmp_path: Path) -> None:
    """No dynamic registration and no --client-id: one line naming the fix, exit 2, no token
    (it used to POST /register to the MCP server itself and fail with two tracebacks)."""
    with protected_kb(kb, registration=False) as env:
        code, lines = login(env["url"], tmp_path / "tokens.json")
    assert code == 2, "".join(lines)
    assert len(lines) == 1, "".join(lines)
    assert lines[0].startswith(f"toolkernel: error: auth login: the authorization server {env['issuer']}")
    assert "offers no dynamic client registration" in lines[0]
    assert "--client-id" in lines[0]
    assert not (tmp_path / "tokens.json").exists()


def test_a_refused_request_is_logged_once_with_its_reason(kb: Path) -> None:
    with protected_kb(kb, registration=True) as env:
        token = "forged.token.value"
        assert search_with(env["url"], token).returncode == 3
        server: subprocess.Popen[str] = env["server"]
        server.terminate()
        _, log = server.communicate(timeout=30)
    refused = [json.loads(line) for line in log.splitlines() if '"request refused"' in line]
    assert refused, log
    assert {r["status"] for r in refused} == {401}
    assert all(r["reason"].startswith("jwt:") for r in refused), refused
    assert token not in log


@pytest.mark.parametrize("timeout", ["-1", "nan", "soon"])
def test_a_bad_login_timeout_is_one_line(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkernel.cli import main

    with pytest.raises(SystemExit) as info:
        main(["auth", "login", "http://127.0.0.1:9/mcp", "--no-browser", "--timeout", timeout])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("toolkernel: error: auth login: argument --timeout:")
    assert err.count("\n") == 1
