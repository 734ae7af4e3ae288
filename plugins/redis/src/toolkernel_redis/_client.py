"""One Redis connection pool per backend, and the rule that turns an unreachable Redis into
:class:`~toolkernel.shared_state.StoreUnavailable` within ``STORE_TIMEOUT_S``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from toolkernel.shared_state import STORE_TIMEOUT_S, StoreUnavailable

T = TypeVar("T")
PREFIX = "toolkernel:"
"""Every key and channel this plugin uses starts with it."""


def connect(url: str) -> aioredis.Redis:
    """A client for ``url`` that gives up fast: a dead Redis must not hold a request."""
    return aioredis.Redis.from_url(
        url,
        socket_connect_timeout=STORE_TIMEOUT_S / 2,
        socket_timeout=STORE_TIMEOUT_S,
        # Once, at once: a pooled connection Redis closed (it restarted) is replaced by a new one.
        retry=Retry(NoBackoff(), 1),
        retry_on_error=[RedisConnectionError],
        max_connections=256,
        health_check_interval=30,
    )


async def guarded(store: str, call: Awaitable[T]) -> T:
    """``await call``; an unreachable or slow Redis raises :class:`StoreUnavailable` naming ``store``."""
    try:
        async with asyncio.timeout(STORE_TIMEOUT_S):
            return await call
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(store, str(exc) or type(exc).__name__) from None
    except TimeoutError:
        raise StoreUnavailable(store, f"no answer within {STORE_TIMEOUT_S} s") from None


def text(value: Any) -> str:
    """A Redis reply as ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)
