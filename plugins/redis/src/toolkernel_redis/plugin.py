"""toolkernel-redis's hook: the ``redis://`` (and ``rediss://``, ``unix://``) shared-state backend.

The factory imports the ``redis`` client only when a server is given such a URL, so
listing plugins stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import SharedStateRegistry
    from toolkernel.shared_state import SharedState


def redis_state(url: str) -> SharedState:
    """Replicas given the same URL share sessions, stream events, notifications and tasks."""
    from toolkernel_redis._state import RedisSharedState

    return RedisSharedState(url)


@hookimpl
def register_shared_state(registry: SharedStateRegistry) -> None:
    """Shared state on Redis: ``redis://HOST:PORT/DB``, ``rediss://`` (TLS), ``unix://PATH?db=N``."""
    for scheme in ("redis", "rediss", "unix"):
        registry.add(scheme, redis_state)
