"""The command line against a real HTTP server process: ``serve --transport http`` and ``call --header``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolkernel.cli import main

HEADER_SERVER = '''
from toolkernel import MCPServer, ToolContext

app = MCPServer("headers")


@app.tool
def header(name: str, ctx: ToolContext) -> str:
    """The value of request header ``name``."""
    return (ctx.headers or {}).get(name, "<absent>")
'''


@pytest.fixture
def http_server(tmp_path: Path):
    """``toolkernel serve --transport http --port 0`` in its own process; yields its URL."""
    (tmp_path / "header_server.py").write_text(HEADER_SERVER)
    command = [sys.executable, "-m", "toolkernel", "serve", f"{tmp_path / 'header_server.py'}:app"]
    proc = subprocess.Popen(
        [*command, "--transport", "http", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        url = None
        for _ in range(50):
            line = proc.stderr.readline()
            if found := re.search(r"on (http://\S+)", line):
                url = found.group(1)
                break
        assert url is not None, "the server never said where it listens"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_call_sends_headers_to_a_url_server(
    http_server: str, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["call", http_server, "header", "--args", '{"name": "x-tenant"}', "--header", "X-Tenant:  acme "]
    assert main([*args, "--mode", mode]) == 0
    assert capsys.readouterr().out == "acme\n"
