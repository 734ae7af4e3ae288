"""The Redis task queue on a real Redis: a job released by its worker is handed out again."""

from __future__ import annotations

import asyncio

import pytest

from toolkernel_redis._state import RedisSharedState
from toolkernel_redis.testing import RedisServer

pytestmark = pytest.mark.timeout(120)


@pytest.mark.anyio
async def test_a_released_job_is_taken_again(tmp_path) -> None:
    with RedisServer(str(tmp_path)) as redis_server:
        state = RedisSharedState(redis_server.url)
        assert state.queue is not None
        async with state.run():
            jobs = state.queue.take()
            await state.queue.put({"task": "t1"})
            first = await asyncio.wait_for(anext(jobs), 30)
            await first.release()
            # Not renewed any more: after the orphan delay the queue hands it out again.
            again = await asyncio.wait_for(anext(jobs), 30)
            await again.done()
            await jobs.aclose()
        assert first.data == again.data == {"task": "t1"}
