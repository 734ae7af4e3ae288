"""`toolkernel list` (a server definition's offer, unserved) and `toolkernel dev` (serve over
HTTP, restart on code changes, start the Inspector), the latter as a real subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from toolkernel.cli import main

ROOT = Path(__file__).resolve().parents[2]

SERVER = '''
from toolkernel import MCPServer, Prompt

app = MCPServer("devtest", "2.0.0")


@app.tool
def first() -> str:
    """The first tool."""
    return "first"
'''

ADDED = '''

@app.tool(task="optional")
async def second() -> str:
    """Added while the dev server runs."""
    return "second"


app.add_prompt(Prompt(name="p", render=lambda: "v1", version="1"))
app.add_prompt(Prompt(name="p", render=lambda: "v2", version="2"))
'''


def test_list_shows_tools_resources_and_prompts(tmp_path, capsys):
    (tmp_path / "server.py").write_text(SERVER + ADDED)
    assert main(["list", f"{tmp_path / 'server.py'}:app"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "devtest 2.0.0"
    assert "tools: 2" in out
    assert "  first  The first tool." in out
    assert "  second [task: optional]  Added while the dev server runs." in out
    assert "  p [versions: 1, 2]" in out


def test_list_json(tmp_path, capsys):
    (tmp_path / "server.py").write_text(SERVER)
    assert main(["list", f"{tmp_path / 'server.py'}:app", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["server"] == {"name": "devtest", "version": "2.0.0"}
    assert [t["name"] for t in report["tools"]] == ["first"]
    assert report["resources"] == report["resource_templates"] == report["prompts"] == []


def test_list_bad_target_exits_2(capsys):
    assert main(["list", "nothing-here.py:app"]) == 2
    assert "no such file" in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tools(url: str) -> list[str]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/list",
    }
    response = httpx.post(url, json=body, headers=headers, timeout=5)
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    reply = json.loads(data[-1]) if data else response.json()
    return [t["name"] for t in reply["result"]["tools"]]


def _wait_for_tools(url: str, wanted: list[str], proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    seen: list[str] | None = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, "toolkernel dev exited"
        try:
            seen = _tools(url)
            if seen == wanted:
                return
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(0.2)
    pytest.fail(f"tools never became {wanted}; last seen {seen}")


@pytest.mark.timeout(180)
def test_dev_serves_reloads_and_starts_the_inspector(tmp_path):
    """The Inspector command here records its arguments (a browser UI cannot be driven in a
    test); the server, the restart on change and the HTTP calls are real."""
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    recorded = tmp_path / "inspector-args.json"
    recorder = (
        f"{sys.executable} -c \"import json,sys; json.dump(sys.argv[1:], open({str(recorded)!r}, 'w'))\""
    )
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolkernel",
            "dev",
            f"{server}:app",
            "--port",
            str(port),
            "--inspector-command",
            recorder,
        ],
        cwd=ROOT,
        env={**os.environ, "TOOLKERNEL_LOG_LEVEL": "WARNING"},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_tools(url, ["first"], proc)
        server.write_text(SERVER + ADDED)
        _wait_for_tools(url, ["first", "second"], proc)
        assert json.loads(recorded.read_text()) == ["--web", "--transport", "http", "--server-url", url]
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=20)
    assert "server.py changed; restarting" in err


def test_dev_without_http_transport_names_the_package(capsys, monkeypatch):
    monkeypatch.setenv("TOOLKERNEL_DISABLE_PLUGINS", "toolkernel-http")
    assert main(["dev", "docs/examples/echo_server.py:app", "--no-inspector"]) == 2
    assert "pip install toolkernel-http" in capsys.readouterr().err


def test_ctrl_c_during_a_server_replacement_is_acted_on_after_it():
    from toolkernel._builtin.devserver import _signals_deferred

    finished = []
    before = signal.getsignal(signal.SIGINT)

    def replace() -> None:
        with _signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, between bytecodes
            finished.append("replacement in hand")

    with pytest.raises(KeyboardInterrupt):
        replace()
    assert finished == ["replacement in hand"]
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_landing_while_a_server_is_replaced_stops_the_replacement(tmp_path, monkeypatch):
    """The signal is sent from inside the start of the second server (where watchfiles'
    run_process would lose that server); the servers are real processes."""
    from toolkernel._builtin import devserver

    serve = [sys.executable, "-c", "import time; time.sleep(60)"]
    real_popen = subprocess.Popen
    servers = []

    def popen(argv):
        if servers:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        servers.append(real_popen(argv))
        return servers[-1]

    def watch(*paths):
        yield {("modified", "server.py")}
        yield {("modified", "server.py")}

    monkeypatch.setattr(devserver.subprocess, "Popen", popen)
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        devserver._serve_and_reload(serve, [tmp_path], watch)
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        for server in servers:
            if server.poll() is None:
                server.kill()
                server.wait(timeout=10)
                pytest.fail(f"server {server.pid} was left running")
    assert len(servers) == 2  # the loop ended at the interrupt, after the replacement


def test_dev_ends_when_its_server_cannot_start():
    """The port is taken: the server says so in one line and `dev` exits with its status (2)
    instead of watching files for a server that is not running."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        dev = ["dev", "docs/examples/echo_server.py:app", "--port", str(port), "--no-inspector"]
        done = subprocess.run(
            [sys.executable, "-m", "toolkernel", *dev],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
    finally:
        taken.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"toolkernel: error: toolkernel-http: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
