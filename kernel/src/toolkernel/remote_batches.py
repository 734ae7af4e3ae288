"""Calling a remote API in batches: batches run concurrently, transient failures are retried.

Plugins that send work to a hosted API (the OpenAI embedder, the ``http`` reranker) share
the same loop: cut the input into batches, run up to ``max_concurrency`` at once, keep the
results in input order, let the first failure cancel the rest, and retry a transient
failure with jittered exponential backoff, waiting at least what the server's
``Retry-After`` asked and giving up when it asks for more than ``max_retry_after``.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

import anyio

__all__ = ["RetryOptions", "Retryable", "map_batches", "retry_after", "with_retries"]

T = TypeVar("T")
R = TypeVar("R")


class Retryable(Exception):
    """A failure worth another attempt, with the server's requested wait if it gave one."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class RetryOptions(Protocol):
    """The retry settings :func:`with_retries` reads (plugins' option models carry these fields)."""

    @property
    def max_retries(self) -> int: ...
    @property
    def backoff_initial(self) -> float: ...
    @property
    def backoff_max(self) -> float: ...
    @property
    def max_retry_after(self) -> float: ...


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    options: RetryOptions,
    label: str,
    error: Callable[[str], Exception],
    on_retry: Callable[[Retryable, int, float], None] | None = None,
) -> T:
    """``await attempt()`` until it stops raising :class:`Retryable`; then ``error(message)`` is raised.

    ``on_retry(failure, attempt_number, delay_s)`` is told before each wait (to log it).
    """
    tries = 0
    while True:
        try:
            return await attempt()
        except Retryable as failure:
            if tries >= options.max_retries:
                raise error(f"{label} failed after {tries + 1} attempts: {failure.reason}") from failure
            if failure.retry_after is not None and failure.retry_after > options.max_retry_after:
                raise error(
                    f"{label}: {failure.reason}; the server asked to wait {failure.retry_after:.0f} s, "
                    f"more than max_retry_after={options.max_retry_after:.0f} s"
                ) from failure
            delay = random.uniform(0, min(options.backoff_max, options.backoff_initial * 2**tries))
            if failure.retry_after is not None:
                delay = max(delay, failure.retry_after)
            tries += 1
            if on_retry is not None:
                on_retry(failure, tries, delay)
            await anyio.sleep(delay)


async def map_batches(
    items: Sequence[T],
    size: int,
    max_concurrency: int,
    run: Callable[[int, int, list[T]], Awaitable[list[R]]],
    error: type[Exception],
) -> list[R]:
    """``run(number, count, batch)`` over ``items`` cut into batches of ``size``, results in order.

    Up to ``max_concurrency`` batches run at once; the first ``error`` raised cancels the
    others and is raised itself (not wrapped in an exception group).
    """
    batches = [list(items[i : i + size]) for i in range(0, len(items), size)]
    results: list[list[R]] = [[] for _ in batches]
    limiter = anyio.CapacityLimiter(max_concurrency)
    failures: list[Exception] = []

    async def one(number: int, scope: anyio.CancelScope) -> None:
        async with limiter:
            try:
                results[number] = await run(number, len(batches), batches[number])
            except error as exc:
                failures.append(exc)
                scope.cancel()

    async with anyio.create_task_group() as tg:
        for number in range(len(batches)):
            tg.start_soon(one, number, tg.cancel_scope)
    if failures:
        raise failures[0]
    return [result for batch in results for result in batch]


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or a date."""
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
