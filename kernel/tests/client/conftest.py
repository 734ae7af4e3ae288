"""Shared pieces of the MCPClient tests: real peers, started and stopped within bounds."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
EVERYTHING = ROOT / "tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SDK_SERVER = HERE / "sdk_server.py"
SILENT_SERVER = HERE / "silent_server.py"
ECHO_APP = ROOT / "docs/examples/echo_server.py"
START_TIMEOUT_S = 60.0


def require_everything() -> None:
    """Skip without the npm peers (fail under ``CI``, where they must be installed)."""
    if EVERYTHING.exists():
        return
    message = (
        f"server-everything not installed ({EVERYTHING.relative_to(ROOT)}): run `cd tests/node && npm ci`"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


def everything_stdio() -> dict[str, object]:
    require_everything()
    return {"command": "node", "args": [str(EVERYTHING), "stdio"], "stderr": "devnull"}


def sdk_stdio(**env: str) -> dict[str, object]:
    server: dict[str, object] = {"command": sys.executable, "args": [str(SDK_SERVER)], "stderr": "devnull"}
    if env:
        server["env"] = env
    return server


def echo_stdio() -> dict[str, object]:
    return {
        "command": sys.executable,
        "args": ["-m", "toolkernel", "serve", f"{ECHO_APP}:app"],
        "cwd": str(ROOT),
        "stderr": "devnull",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server-everything exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"server-everything did not listen on {port} within {START_TIMEOUT_S}s")


class EverythingHTTP:
    """server-everything's ``streamableHttp`` or ``sse`` mode on a port of its own, restartable."""

    def __init__(self, mode: str) -> None:
        require_everything()
        self.mode = mode
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'mcp' if self.mode == 'streamableHttp' else 'sse'}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["node", str(EVERYTHING), self.mode],
            env={**os.environ, "PORT": str(self.port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_port(self.port, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@contextlib.contextmanager
def everything_http(mode: str) -> Iterator[EverythingHTTP]:
    server = EverythingHTTP(mode)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def client_kernel():  # type: ignore[no-untyped-def]
    """One kernel with the installed plugins (toolkernel-http for URLs), built once: it is slow to load."""
    from toolkernel import Kernel

    return Kernel()
