"""``toolkernel call`` against servers that break the protocol: a typed one-line error, its exit
code, and no waiting out the timeout. Real processes; the subprocess bound is a hang guard only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FAULTY = Path(__file__).with_name("faulty_server.py")
CUT_STREAM = Path(__file__).with_name("cut_stream_server.py")
GUARD_S = 120  # far below the --timeout given: reaching it means the client waited the timeout out


def _call(mode: str, timeout: float) -> subprocess.CompletedProcess[str]:
    server = f"{sys.executable} {FAULTY} {mode}"
    command = [
        sys.executable,
        "-m",
        "toolkernel",
        "call",
        server,
        "t",
        "--mode",
        "legacy",
        "--timeout",
        str(timeout),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=GUARD_S)


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("garbage", "not JSON-RPC"),
        ("wrong-id", "never sent"),
        ("null-id", "Invalid Request: broken"),
        ("long", "longer than"),
        ("exit", "connection closed"),
    ],
)
def test_protocol_faults_fail_at_once_with_exit_3(mode: str, says: str) -> None:
    run = _call(mode, timeout=600)
    assert run.returncode == 3, run.stderr
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("toolkernel: error: server: ")
    assert says in lines[0]


def test_timeout_is_one_line_with_exit_4() -> None:
    run = _call("hang", timeout=3)
    assert run.returncode == 4, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "timed out after 3" in lines[0]
    assert "Event loop is closed" not in run.stderr


def test_http_stream_cut_mid_event_fails_at_once() -> None:
    server = subprocess.Popen([sys.executable, str(CUT_STREAM)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        command = [sys.executable, "-m", "toolkernel", "call", f"http://127.0.0.1:{port}/mcp", "t"]
        run = subprocess.run(
            [*command, "--mode", "legacy", "--timeout", "600"],
            capture_output=True,
            text=True,
            timeout=GUARD_S,
        )
    finally:
        server.kill()
        server.wait(GUARD_S)
    assert run.returncode == 3, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
