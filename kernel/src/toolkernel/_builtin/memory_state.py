"""The ``memory://`` shared-state backend, as a built-in plugin: one process, nothing shared.

It is what a server uses when no shared store is configured; registering it through the
public hook keeps it replaceable like any third-party backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import SharedStateRegistry
    from toolkernel.shared_state import SharedState


def memory_state(url: str) -> SharedState:
    """In-process stores: sessions, events and tasks live and die with this process."""
    from toolkernel.shared_state import MemorySharedState

    return MemorySharedState(url)


@hookimpl
def register_shared_state(registry: SharedStateRegistry) -> None:
    """``memory://``: the default, in-process state of a single server."""
    registry.add("memory", memory_state)
