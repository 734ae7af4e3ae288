"""The store budget: a refusal says whether the store (a real Redis, stopped) or this process was slow."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolkernel.shared_state import STORE_TIMEOUT_S, StoreUnavailable
from toolkernel_redis._client import MAX_CONNECTIONS, connect, guarded
from toolkernel_redis._state import RedisSharedState
from toolkernel_redis.testing import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.mark.anyio
async def test_a_deadline_missed_by_a_busy_event_loop_blames_the_loop() -> None:
    # A store call whose answer is due in 10 ms, then the loop is stuck past the budget
    # (as under a burst of requests on two cores): the answer is there but read too late.
    call = asyncio.ensure_future(guarded("redis://127.0.0.1:6379/0", asyncio.sleep(0.01, "answer")))
    await asyncio.sleep(0)
    time.sleep(STORE_TIMEOUT_S + 1.0)  # noqa: ASYNC251 - the event loop is busy elsewhere
    with pytest.raises(StoreUnavailable) as refused:
        await call
    assert "event loop ran" in str(refused.value)
    assert "behind (overloaded)" in str(refused.value)


@pytest.mark.anyio
async def test_a_store_that_is_gone_is_not_blamed_on_the_loop(tmp_path) -> None:
    redis_server = RedisServer(str(tmp_path)).start()
    client = connect(redis_server.url)
    try:
        await guarded(redis_server.url, client.ping())
        redis_server.stop()
        with pytest.raises(StoreUnavailable) as refused:
            await guarded(redis_server.url, client.ping())
    finally:
        await client.aclose()
        redis_server.stop()
    assert "overloaded" not in str(refused.value)
    assert redis_server.url in str(refused.value)


@pytest.mark.anyio
async def test_a_burst_of_store_calls_beyond_the_pool_waits_for_connections(tmp_path) -> None:
    with RedisServer(str(tmp_path)) as redis_server:
        state = RedisSharedState(redis_server.url)
        try:
            # Four times as many calls at once as the pool has connections (as when every
            # session's registry entry is touched together): they queue, none fails.
            burst = [state.sessions.touch(f"s{i}", 60.0) for i in range(4 * MAX_CONNECTIONS)]
            outcomes = await asyncio.gather(*burst, return_exceptions=True)
            clients = await state.client.client_list()
        finally:
            await state.client.aclose()
    assert [o for o in outcomes if isinstance(o, BaseException)] == []
    assert len(clients) <= MAX_CONNECTIONS
