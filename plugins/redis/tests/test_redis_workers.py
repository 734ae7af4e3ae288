"""``toolkernel serve --workers N``: several processes on one port, sharing a real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx2 as httpx
import pytest

from toolkernel_redis.testing import RedisServer, free_port, wait_for_port

from . import _wire as wire
from .conftest import APP

pytestmark = pytest.mark.timeout(180)


def serve(port: int, workers: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "toolkernel", "serve", APP, "--transport", "http", "--port", str(port)]
    return subprocess.Popen(
        [*command, "--workers", str(workers)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_workers_refuse_stateful_mode_without_a_shared_store() -> None:
    process = serve(free_port(), 2, {})
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert b"--workers 2: stateful sessions need a store the workers share" in err
    assert b"TOOLKERNEL_HTTP_SHARED_STATE=redis://HOST:PORT/DB" in err


def test_workers_share_one_port_and_the_sessions_on_redis(tmp_path) -> None:
    port = free_port()
    with RedisServer(str(tmp_path)) as redis_server:
        process = serve(port, 2, {"TOOLKERNEL_HTTP_SHARED_STATE": redis_server.url})
        try:
            wait_for_port(port, process, "serve --workers 2")
            url = f"http://127.0.0.1:{port}/mcp"
            answered: set[str] = set()
            deadline = time.monotonic() + 60
            # Each new connection may reach either worker; one session is served by both.
            with httpx.Client(timeout=30) as opener:
                headers = wire.open_session(opener, url)
            while len(answered) < 2:
                assert time.monotonic() < deadline, f"only workers {answered} answered"
                with httpx.Client(timeout=30) as http:
                    reply = wire.answer(http.post(url, headers=headers, json=wire.call("whoami", {})))
                answered.add(wire.result_text(reply))
                time.sleep(0.1)
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert err.count(b"toolkernel-http: serving Streamable HTTP (stateful") == 2
