"""Batches to a remote API: order, concurrency, the first failure, retries and Retry-After."""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass

import anyio
import pytest

from toolkernel.remote_batches import Retryable, map_batches, retry_after, with_retries

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Options:
    max_retries: int = 2
    backoff_initial: float = 0.001
    backoff_max: float = 0.002
    max_retry_after: float = 1.0


class Failed(Exception):
    pass


async def test_batches_run_concurrently_up_to_the_limit_and_keep_input_order() -> None:
    running = peak = 0

    async def run(number: int, count: int, batch: list[int]) -> list[int]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01 * (count - number))  # later batches finish first
        running -= 1
        return [x * 10 for x in batch]

    assert await map_batches(list(range(7)), 2, 3, run, Failed) == [x * 10 for x in range(7)]
    assert peak == 3


async def test_the_first_failure_cancels_the_other_batches_and_is_raised_as_is() -> None:
    finished: list[int] = []

    async def run(number: int, count: int, batch: list[int]) -> list[int]:
        if number == 1:
            raise Failed("batch 2 broke")
        await anyio.sleep(5)
        finished.append(number)
        return batch

    with anyio.fail_after(3), pytest.raises(Failed, match="batch 2 broke"):
        await map_batches(list(range(6)), 2, 3, run, Failed)
    assert finished == []


async def test_transient_failures_are_retried_then_reported_with_the_attempts() -> None:
    calls = 0
    retries: list[int] = []

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise Retryable("HTTP 503")
        return "ok"

    assert await with_retries(flaky, Options(), "job", Failed, lambda f, n, d: retries.append(n)) == "ok"
    assert retries == [1, 2]

    async def down() -> str:
        raise Retryable("HTTP 503")

    with pytest.raises(Failed, match=r"job failed after 3 attempts: HTTP 503"):
        await with_retries(down, Options(), "job", Failed)


async def test_a_retry_after_longer_than_allowed_fails_at_once() -> None:
    calls = 0

    async def throttled() -> str:
        nonlocal calls
        calls += 1
        raise Retryable("HTTP 429", retry_after=30.0)

    with pytest.raises(Failed, match="asked to wait 30 s, more than max_retry_after=1 s"):
        await with_retries(throttled, Options(), "job", Failed)
    assert calls == 1


def test_retry_after_reads_milliseconds_seconds_and_dates() -> None:
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    later = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 < (retry_after({"retry-after": later}) or 0) <= 60
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None
