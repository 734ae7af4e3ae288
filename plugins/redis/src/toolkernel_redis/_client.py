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


MAX_CONNECTIONS = 64
"""Connections one process keeps to Redis at most; store calls beyond them wait for one."""


def connect(url: str) -> aioredis.Redis:
    """A client for ``url`` that gives up fast: a dead Redis must not hold a request.

    Its pool is a blocking one: a burst of more store calls than :data:`MAX_CONNECTIONS`
    queues for a free connection (within the calls' budget) instead of failing with "Too many
    connections", and the pool, which never shrinks, stays small.
    """
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=MAX_CONNECTIONS,
        timeout=STORE_TIMEOUT_S,
        socket_connect_timeout=STORE_TIMEOUT_S / 2,
        socket_timeout=STORE_TIMEOUT_S,
        # Once, at once: a pooled connection Redis closed (it restarted) is replaced by a new one.
        retry=Retry(NoBackoff(), 1),
        retry_on_error=[RedisConnectionError],
        health_check_interval=30,
    )
    return aioredis.Redis.from_pool(pool)


LATE_S = 0.25
"""How late this process's event loop may run a store call's deadline before the refusal blames the
process (overloaded) rather than the store."""


async def guarded(store: str, call: Awaitable[T]) -> T:
    """``await call``; an unreachable or slow Redis raises :class:`StoreUnavailable` naming ``store``.

    The deadline is wall-clock: an event loop too busy to read Redis's answer in time also
    misses it. The refusal then says so (how late the loop ran), so an operator sees an
    overloaded replica shedding load, not a store that is down.
    """
    timeout = asyncio.timeout(STORE_TIMEOUT_S)
    try:
        async with timeout:
            return await call
    except TimeoutError:  # before OSError, of which it is a subclass
        reason = f"no answer within {STORE_TIMEOUT_S} s"
        deadline = timeout.when()
        late = asyncio.get_running_loop().time() - deadline if deadline is not None else 0.0
        if late > LATE_S:
            reason += f"; this process's event loop ran {late:.1f} s behind (overloaded)"
        raise StoreUnavailable(store, reason) from None
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(store, str(exc) or type(exc).__name__) from None


def text(value: Any) -> str:
    """A Redis reply as ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)
