"""A shared-state backend for ``tenant://NAME`` URLs: one in-process state per name.

A real backend keeps the state where every replica reaches it (toolkernel-redis does, for
redis:// URLs); this one shows the contract with the built-in in-memory stores.
"""

from toolkernel import hookimpl
from toolkernel.shared_state import MemorySharedState

_states = {}


def tenant_state(url):
    """The same state object for the same URL, so two servers in this process share it."""
    if url not in _states:
        _states[url] = MemorySharedState(url)
    return _states[url]


@hookimpl
def register_shared_state(registry):
    registry.add("tenant", tenant_state)
