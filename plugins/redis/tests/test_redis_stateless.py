"""Stateless requests on a replica with the shared store never reach Redis: their cost is unchanged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from toolkernel_redis.testing import RedisServer, Replica

APP = f"{Path(__file__).parent / 'replica_app.py'}:server"
CALLS = 300
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
BACKGROUND = {"cmdstat_xreadgroup", "cmdstat_xautoclaim", "cmdstat_set", "cmdstat_info"}
"""What a replica's task worker sends on its own, about once a second: waiting for jobs, reclaiming
those of dead workers, its heartbeat; and this test's own ``INFO``."""


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(str(tmp_path)) as server:
        yield server


def _call(request_id: int, text: str) -> dict[str, object]:
    params = {"name": "echo", "arguments": {"text": text}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _commands(client: redis.Redis) -> dict[str, int]:
    return {name: int(stat["calls"]) for name, stat in client.info("commandstats").items()}


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
def test_stateless_calls_send_no_command_to_redis(redis_server: RedisServer, json_response: bool) -> None:
    """300 stateless tool calls through a replica on the shared store: Redis sees only the
    worker's own once-a-second commands, as many as while the replica is idle."""
    env = {
        "TOOLKERNEL_HTTP_STATELESS": "true",
        "TOOLKERNEL_HTTP_JSON_RESPONSE": "true" if json_response else "false",
    }
    replica = Replica(APP, shared_state=redis_server.url, name="stateless", env=env).wait()
    try:
        client = redis.Redis.from_url(redis_server.url)
        with httpx.Client(timeout=30) as http:
            assert http.post(replica.url, json=_call(0, "warm"), headers=HEADERS).status_code == 200
            before, started = _commands(client), time.monotonic()
            for i in range(CALLS):
                answer = http.post(replica.url, json=_call(i + 1, f"t{i}"), headers=HEADERS)
                assert answer.status_code == 200, answer.text
                assert f'"t{i}"' in answer.text
            elapsed = time.monotonic() - started
            after = _commands(client)
        client.close()
    finally:
        replica.stop()
    sent = {name: n - before.get(name, 0) for name, n in after.items() if n != before.get(name, 0)}
    assert set(sent) <= BACKGROUND, sent
    # Each background command runs about once a second; a command per call would be 300.
    assert all(count <= 2 * (elapsed + 2) for count in sent.values()), (sent, elapsed)
