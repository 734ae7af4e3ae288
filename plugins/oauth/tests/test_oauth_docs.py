"""docs/plugins/oauth.md is complete, its Python blocks are the examples, and its two guides run.

"Protect a server" runs ``toolkernel serve`` on the page's example with the page's
``toolkernel.toml``; "Connect to a protected server" logs in with ``toolkernel auth login``
against oidc-provider (the login page driven over HTTP), then ``call``, the page's Python
example, ``auth status`` and ``auth logout``, each as its own process.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from toolkernel_oauth.client import IdentityProvider, OAuthClientSettings
from toolkernel_oauth.resource import ResourceServer
from toolkernel_oauth.settings import IntrospectionSettings, JWTSettings, OAuthServerSettings
from toolkernel_oauth.validators import JWTValidator

from .conftest import loopback_socket, scoped_server, serving_app
from .test_oauth_e2e import drive_login, oidc_provider

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs/plugins/oauth.md"
EXAMPLES = ROOT / "plugins/oauth/examples"
TEXT = DOC.read_text()
PYTHON = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
TOML = re.findall(r"```toml\n(.*?)```", TEXT, flags=re.S)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def test_python_blocks_are_the_example_files() -> None:
    files = {p.read_text() for p in EXAMPLES.glob("*.py")}
    assert set(PYTHON) == files


@pytest.mark.parametrize(
    "model", [OAuthServerSettings, JWTSettings, IntrospectionSettings, OAuthClientSettings]
)
def test_every_setting_is_documented(model: type[Any]) -> None:
    missing = [name for name in model.model_fields if f"| `{name}` |" not in TEXT]
    assert not missing, f"undocumented {model.__name__} fields: {missing}"
    for name in IdentityProvider.model_fields:
        assert f"`{name}`" in TEXT


def test_toml_blocks_are_valid_settings() -> None:
    for block in TOML:
        OAuthServerSettings.model_validate(tomllib.loads(block)["plugins"]["oauth"])


def test_asgi_example_builds_a_guarded_app() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(PYTHON[1], str(EXAMPLES / "asgi_protected.py"), "exec"), namespace)
    assert isinstance(namespace["guard"], ResourceServer)
    assert isinstance(namespace["guard"].verifier, JWTValidator)


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkernel", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture
def guide_server(tmp_path: Path) -> Iterator[str]:
    """The page's example served as the page says, with the page's development toml."""
    config = tmp_path / "toolkernel.toml"
    config.write_text(TOML[0])
    command = [sys.executable, "-m", "toolkernel", "--config", str(config), "serve"]
    target = f"{EXAMPLES / 'protected_server.py'}:app"
    proc = subprocess.Popen(
        [*command, target, "--transport", "http", "--port", "0", "--auth", "static-tokens"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        for _ in range(50):
            if found := re.search(r"on (http://\S+)", proc.stderr.readline()):
                url = found.group(1)
                break
        assert url is not None, "the server never said where it listens"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_protect_a_server_guide(guide_server: str) -> None:
    url = guide_server
    alice = ("--header", "Authorization: Bearer dev-token-alice")
    bob = ("--header", "Authorization: Bearer dev-token-bob")
    out = _cli("call", url, "whoami", *alice)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "alice via dev, scopes: notes:read notes:write"
    refused = _cli("call", url, "add_note", "--args", '{"text": "hi"}', *bob)
    assert refused.returncode == 2
    assert "notes:write" in refused.stderr
    assert "add_note" not in _cli("inspect", url, *bob).stdout
    assert "add_note" in _cli("inspect", url, *alice).stdout
    with httpx2.Client() as http:
        response = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    base = url.removesuffix("/mcp")
    assert (
        f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
        in response.headers["www-authenticate"]
    )


def test_call_against_a_401_says_a_token_is_needed(guide_server: str, tmp_path: Path) -> None:
    """With or without toolkernel-oauth installed, the error says what to do, not "-32603"."""
    empty = {"TOOLKERNEL_OAUTH_TOKENS": str(tmp_path / "none.json")}
    with_plugin = _cli("call", guide_server, "whoami", env=empty)
    without = _cli(
        "call", guide_server, "whoami", env={**empty, "TOOLKERNEL_DISABLE_PLUGINS": "toolkernel-oauth"}
    )
    for run in (with_plugin, without):
        assert run.returncode == 2
        assert "-32603" not in run.stderr
    assert f"needs a token (HTTP 401): run `toolkernel auth login {guide_server}`" in with_plugin.stderr
    assert "Authorization required: send a bearer token" in without.stderr


@pytest.mark.anyio
@pytest.mark.node
async def test_connect_to_a_protected_server_guide(tmp_path: Path) -> None:
    tokens = tmp_path / "config" / "oauth-tokens.json"
    env = {**os.environ, "TOOLKERNEL_OAUTH_TOKENS": str(tokens)}
    sock = loopback_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    with oidc_provider(url, "jwt", ttl=300) as issuer, anyio.fail_after(180):
        validator = JWTValidator(JWTSettings(issuer=issuer, jwks_uri=f"{issuer}/jwks"))
        guard = ResourceServer(validator, authorization_servers=(issuer,), scopes_supported=("mcp",))
        from toolkernel_http import asgi_app

        async with serving_app(asgi_app(scoped_server(), auth=guard), sock):
            command = [sys.executable, "-m", "toolkernel", "auth", "login", url, "--no-browser"]
            async with await anyio.open_process(command, env=env) as login:
                assert login.stderr is not None
                seen = b""
                while not re.search(rb"http://\S+/auth\?\S+\n", seen):
                    try:
                        seen += await login.stderr.receive()
                    except anyio.EndOfStream:
                        pytest.fail(
                            f"auth login ended ({await login.wait()}): {seen.decode(errors='replace')}"
                        )
                authorize = re.search(rb"(http://\S+/auth\?\S+)", seen).group(1).decode()  # type: ignore[union-attr]
                redirect_uri = re.search(r"redirect_uri=([^&]+)", authorize).group(1)  # type: ignore[union-attr]
                listener = httpx2.URL(httpx2.QueryParams(f"u={redirect_uri}")["u"])
                async with httpx2.AsyncClient() as http:
                    forged = await http.get(str(listener.copy_with(query=b"code=x&state=forged")))
                    assert forged.status_code == 400  # a redirect without our state is ignored
                    back = await drive_login(authorize, str(listener))
                    assert (await http.get(back)).status_code == 200
                assert await login.wait() == 0
            assert stat.S_IMODE(tokens.stat().st_mode) == 0o600

            def run(*args: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, check=False)

            call = await anyio.to_thread.run_sync(
                run, sys.executable, "-m", "toolkernel", "call", url, "whoami"
            )
            assert call.returncode == 0, call.stderr
            assert '"subject": "ada"' in call.stdout
            example = await anyio.to_thread.run_sync(run, sys.executable, str(EXAMPLES / "connect.py"), url)
            assert example.returncode == 0, example.stderr
            assert '"subject": "ada"' in example.stdout
            status = await anyio.to_thread.run_sync(run, sys.executable, "-m", "toolkernel", "auth", "status")
            assert url in status.stdout
            assert "refresh token" in status.stdout
            kept = tokens.read_text()
            access = re.search(r'"access_token": "([^"]+)"', kept).group(1)  # type: ignore[union-attr]
            for output in (status.stdout, status.stderr, call.stdout, call.stderr, example.stderr):
                assert access not in output
            logout = await anyio.to_thread.run_sync(
                run, sys.executable, "-m", "toolkernel", "auth", "logout", url
            )
            assert logout.returncode == 0
            again = await anyio.to_thread.run_sync(
                run, sys.executable, "-m", "toolkernel", "call", url, "whoami"
            )
            assert again.returncode == 2
            assert f"toolkernel auth login {url}" in again.stderr
