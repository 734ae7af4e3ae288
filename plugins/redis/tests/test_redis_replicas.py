"""Three replicas sharing a real Redis behind a real Caddy, round-robin, no stickiness.

What must hold: a session opened anywhere works everywhere; a stream resumed on another
replica loses no event; a resource update published on one replica reaches a subscriber
whose stream another replica holds; a replica killed with SIGKILL mid-load costs no
idempotent call; Redis down makes the requests that need it fail fast with a 503 naming
the store, while stateless requests go on, and service returns with Redis.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import redis

from toolkernel.client import MCPClient
from toolkernel_redis.testing import Replica

from . import _wire as wire
from .conftest import APP, Cluster

pytestmark = pytest.mark.timeout(180)


def client_config(url: str) -> dict[str, Any]:
    return {"servers": {"s": {"url": url, "protocol": "legacy", "timeout": 30}}}


@pytest.mark.anyio
async def test_a_session_opened_through_the_balancer_is_served_by_every_replica(cluster: Cluster) -> None:
    async with MCPClient(client_config(cluster.balancer.url), persist=False) as client:
        answers = [(await client.call_server_tool("s", "whoami")).text for _ in range(9)]
    # Round-robin without stickiness: one session, every replica answered part of it.
    assert set(answers) == {"r0", "r1", "r2"}


def test_delete_on_one_replica_ends_the_session_on_all(cluster: Cluster) -> None:
    r0, r1, r2 = (r.url for r in cluster.replicas)
    with httpx.Client(timeout=10) as http:
        headers = wire.open_session(http, r0)
        assert http.post(r1, headers=headers, json=wire.call("whoami", {})).status_code == 200
        assert http.post(r2, headers=headers, json=wire.call("whoami", {})).status_code == 200
        assert http.delete(r1, headers=headers).status_code == 200
        for url in (r0, r1, r2):
            gone = http.post(url, headers=headers, json=wire.call("whoami", {}))
            assert gone.status_code == 404, (url, gone.text)


def test_a_session_is_bound_to_its_owner_on_every_replica(cluster: Cluster) -> None:
    r0, r1, _ = (r.url for r in cluster.replicas)
    with httpx.Client(timeout=10) as http:
        headers = wire.open_session(http, r0)
        forged = {**headers, "mcp-session-id": headers["mcp-session-id"][::-1]}
        assert http.post(r1, headers=forged, json=wire.call("whoami", {})).status_code == 404


def read_until(lines: Iterator[str], predicate: Any, found: list[tuple[str | None, Any]]) -> None:
    for event in wire.events(lines):
        found.append(event)
        if predicate(event[1]):
            return


def test_a_stream_cut_on_one_replica_carries_on_from_another(cluster: Cluster) -> None:
    r0, r1, _ = (r.url for r in cluster.replicas)
    with httpx.Client(timeout=30) as http:
        headers = wire.open_session(http, r0)
        first: list[tuple[str | None, Any]] = []
        body = wire.call("ticks", {"count": 6, "delay_s": 0.3}, request_id=7)
        with http.stream("POST", r0, headers=headers, json=body) as response:
            read_until(
                response.iter_lines(),
                lambda m: m is not None and m.get("method") == "notifications/progress",
                first,
            )
        # The client went away after the first progress event; it resumes through r1.
        last_id = first[-1][0]
        rest: list[tuple[str | None, Any]] = []
        with http.stream("GET", r1, headers={**headers, "last-event-id": str(last_id)}) as response:
            assert response.status_code == 200
            read_until(response.iter_lines(), lambda m: m is not None and m.get("id") == 7, rest)
    messages = [m for _, m in first + rest if m is not None]
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3, 4, 5, 6]  # none lost, none twice
    assert wire.result_text(messages[-1]) == "6 ticks from r0"


def test_a_resource_update_on_one_replica_reaches_a_subscriber_on_another(cluster: Cluster) -> None:
    r0, r1, r2 = (r.url for r in cluster.replicas)
    with httpx.Client(timeout=30) as http:
        headers = wire.open_session(http, r0)
        subscribe = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "resources/subscribe",
            "params": {"uri": "test://doc"},
        }
        assert http.post(r1, headers=headers, json=subscribe).status_code == 200
        heard: list[tuple[str | None, Any]] = []
        opened = threading.Event()

        def listen() -> None:
            with httpx.Client(timeout=30) as own, own.stream("GET", r2, headers=headers) as response:
                opened.set()
                read_until(
                    response.iter_lines(),
                    lambda m: m is not None and m.get("method") == "notifications/resources/updated",
                    heard,
                )

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert opened.wait(20)
        # The GET stream is open on r2 once r2 answered; publish from r0 until it is heard.
        deadline = time.monotonic() + 20
        while listener.is_alive() and time.monotonic() < deadline:
            published = http.post(r0, headers=headers, json=wire.call("touch", {"uri": "test://doc"}, 3))
            assert published.status_code == 200
            listener.join(0.5)
        assert not listener.is_alive(), "the update never reached the GET stream on another replica"
    updates = [m for _, m in heard if m is not None and m.get("method") == "notifications/resources/updated"]
    assert updates[0]["params"]["uri"] == "test://doc"


@pytest.mark.anyio
async def test_kill_9_of_a_replica_mid_load_costs_no_idempotent_call(own_cluster: Cluster) -> None:
    calls, failures = 0, []
    victim = own_cluster.replicas[1]

    async with MCPClient(client_config(own_cluster.balancer.url), persist=False) as client:

        async def worker(n: int) -> None:
            nonlocal calls
            for i in range(60):
                text = f"w{n}-{i}"
                try:
                    out = await client.call_server_tool("s", "echo", {"text": text})
                    assert out.text == text
                except Exception as exc:
                    failures.append(repr(exc))
                calls += 1
                if n == 0 and i == 20:
                    victim.kill()

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(worker, n)
    assert calls == 240
    assert failures == []


def test_a_stream_whose_replica_died_replays_every_written_event_elsewhere(own_cluster: Cluster) -> None:
    r0, r1 = own_cluster.replicas[0], own_cluster.replicas[1]
    store = redis.Redis.from_url(own_cluster.redis.url)
    with httpx.Client(timeout=30) as http:
        headers = wire.open_session(http, r0.url)
        session = headers["mcp-session-id"]
        first: list[tuple[str | None, Any]] = []
        body = wire.call("ticks", {"count": 40, "delay_s": 0.1}, request_id=9)
        with http.stream("POST", r0.url, headers=headers, json=body) as response:
            read_until(
                response.iter_lines(),
                lambda m: m is not None and m.get("method") == "notifications/progress",
                first,
            )
        time.sleep(0.5)  # more events are written while nobody listens
        r0.kill()
        stored = [
            json.loads(fields[b"d"])
            for _, fields in store.xrange(f"toolkernel:events:{session}")
            if fields[b"s"] == b"9" and fields[b"d"]
        ]
        rest: list[tuple[str | None, Any]] = []
        with http.stream("GET", r1.url, headers={**headers, "last-event-id": str(first[-1][0])}) as response:
            read_until(response.iter_lines(), lambda m: m is not None and m.get("id") == 9, rest)
    seen = [m for _, m in first + rest if m is not None]
    written = [m["params"]["progress"] for m in stored if m.get("method") == "notifications/progress"]
    got = [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"]
    assert len(written) > 1
    assert got == written  # every event the dead replica wrote, in order, once
    assert seen[-1]["error"]["code"] == -32000  # the request itself is lost: the client is told to resend
    assert "send the request again" in seen[-1]["error"]["message"]


def test_a_task_outlives_the_replica_running_it(own_cluster: Cluster) -> None:
    store = redis.Redis.from_url(own_cluster.redis.url)
    by_pid = {r.process.pid: r for r in own_cluster.replicas}
    with httpx.Client(timeout=30) as http:
        arguments = {"a": 2, "b": 3, "delay_s": 3}
        call = {"name": "slow_sum", "arguments": arguments}
        created = wire.modern(http, own_cluster.balancer.url, "tools/call", call)["result"]
        assert created["status"] == "working"
        deadline = time.monotonic() + 20
        runner = None
        while runner is None:  # which replica's worker took the job (consumers are host-pid-random)
            pending = store.xpending_range("toolkernel:task-queue", "workers", "-", "+", 10)
            if pending:
                runner = by_pid[int(pending[0]["consumer"].decode().split("-")[-2])]
            else:
                assert time.monotonic() < deadline, "no worker took the task"
                time.sleep(0.1)
        runner.kill()
        survivor = next(r for r in own_cluster.replicas if r is not runner)
        deadline = time.monotonic() + 30
        while True:
            state = wire.modern(http, survivor.url, "tasks/get", {"taskId": created["taskId"]})["result"]
            if state["status"] != "working":
                break
            assert time.monotonic() < deadline, "the task never completed after its replica died"
            time.sleep(0.3)
    assert state["status"] == "completed", state
    assert state["result"]["content"][0]["text"] == "5", state


def test_a_multi_round_call_continues_on_another_replica(cluster: Cluster) -> None:
    r0, r1, _ = (r.url for r in cluster.replicas)
    call = {"name": "confirm", "arguments": {"what": "the plan"}}
    with httpx.Client(timeout=30) as http:
        asked = wire.modern(http, r0, "tools/call", call, tasks=False)["result"]
        assert asked["resultType"] == "input_required"
        (key, _), *_ = asked["inputRequests"].items()
        answers = {key: {"action": "accept", "content": {"confirm": True}}}
        # The requestState r0 signed is accepted by r1: the replicas share its key through Redis.
        again = {**call, "inputResponses": answers, "requestState": asked["requestState"]}
        done = wire.modern(http, r1, "tools/call", again, tasks=False)
    assert "error" not in done, done
    assert done["result"]["content"][0]["text"] == "the plan: confirmed on r1"


def test_a_queued_task_asks_and_is_answered_through_other_replicas(cluster: Cluster) -> None:
    urls = [r.url for r in cluster.replicas]
    call = {"name": "confirm", "arguments": {"what": "the task"}}
    with httpx.Client(timeout=30) as http:
        created = wire.modern(http, urls[0], "tools/call", call)["result"]
        task = {"taskId": created["taskId"]}
        deadline = time.monotonic() + 30
        while (state := wire.modern(http, urls[1], "tasks/get", task)["result"])["status"] == "working":
            assert time.monotonic() < deadline, "the task never asked"
            time.sleep(0.2)
        assert state["status"] == "input_required", state
        (key, asked), *_ = state["inputRequests"].items()
        assert asked["params"]["message"] == "Confirm the task?"
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        wire.modern(http, urls[2], "tasks/update", {**task, "inputResponses": answer})
        while (state := wire.modern(http, urls[0], "tasks/get", task)["result"])["status"] != "completed":
            assert state["status"] in ("working", "input_required"), state
            assert time.monotonic() < deadline, "the answered task never completed"
            time.sleep(0.2)
    assert state["result"]["content"][0]["text"].startswith("the task: confirmed on r")


def test_redis_down_fails_fast_with_503_naming_the_store_then_recovers(own_cluster: Cluster) -> None:
    replica = own_cluster.replicas[0]
    stateless = Replica(
        APP, shared_state=own_cluster.redis.url, name="stateless", env={"TOOLKERNEL_HTTP_STATELESS": "true"}
    ).wait()
    try:
        with httpx.Client(timeout=30) as http:
            headers = wire.open_session(http, replica.url)
            own_cluster.redis.stop()
            for headers_sent, body in (
                (headers, wire.call("whoami", {})),
                (wire.ACCEPT, wire.initialize_body()),
            ):
                started = time.monotonic()
                refused = http.post(replica.url, headers=headers_sent, json=body)
                assert time.monotonic() - started < 2.0
                assert refused.status_code == 503, refused.text
                assert own_cluster.redis.url in refused.json()["error"]["message"]
            # A stateless replica needs no store for a plain call.
            plain = {**wire.ACCEPT, "mcp-protocol-version": wire.VERSION}
            ok = http.post(stateless.url, headers=plain, json=wire.call("echo", {"text": "still here"}))
            assert ok.status_code == 200
            assert "still here" in ok.text
            own_cluster.redis.start()
            deadline = time.monotonic() + 20
            while True:  # the replica reconnects on its own
                try:
                    headers = wire.open_session(http, replica.url)
                    break
                except AssertionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            again = http.post(own_cluster.replicas[1].url, headers=headers, json=wire.call("whoami", {}))
            assert again.status_code == 200
            assert "r1" in again.text
    finally:
        stateless.stop()
