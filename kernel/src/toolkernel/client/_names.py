"""Tool names across servers: ``server_tool``, at most 64 characters, always reversible.

Model APIs accept function names of ``[A-Za-z0-9_-]{1,64}``. A name that is too long
keeps its head and gets a short hash of the whole name; characters outside the set
become ``_``. Whatever the result, the table maps it back to the exact server and
tool, and two tools never share a name: a collision gets the hash too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_TOOL_NAME = 64
_HASH_LEN = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class ToolRef:
    """Where a namespaced tool name leads."""

    server: str
    tool: str


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_LEN]


def fit(name: str, *, key: str | None = None, force_hash: bool = False) -> str:
    """``name`` made safe and at most 64 characters; ``key`` (default: name) seeds the hash."""
    safe = _UNSAFE.sub("_", name) or "_"
    if len(safe) <= MAX_TOOL_NAME and not force_hash and safe == name:
        return safe
    if len(safe) <= MAX_TOOL_NAME - _HASH_LEN - 1 and not force_hash and safe != name:
        # Only characters changed: a hash keeps "a.b" and "a_b" apart.
        force_hash = True
    if len(safe) <= MAX_TOOL_NAME and not force_hash:
        return safe
    head = safe[: MAX_TOOL_NAME - _HASH_LEN - 1]
    return f"{head}_{_short_hash(key or name)}"


def build_table(
    tools: Iterable[tuple[str, str]],
    *,
    prefix_with_server: bool = True,
    extra_prefix: str | None = None,
) -> dict[str, ToolRef]:
    """Namespaced name → :class:`ToolRef` for ``(server, tool)`` pairs, in a stable order.

    Without the server prefix, a tool whose bare name is taken by another server's tool
    falls back to ``server_tool``, so every tool stays reachable.
    """
    table: dict[str, ToolRef] = {}
    pairs = sorted(set(tools))
    bare_count: dict[str, int] = {}
    for _, tool in pairs:
        bare_count[tool] = bare_count.get(tool, 0) + 1
    for server, tool in pairs:
        with_server = prefix_with_server or bare_count[tool] > 1
        parts = [p for p in (extra_prefix, server if with_server else None, tool) if p]
        wanted = "_".join(parts)
        name = fit(wanted)
        if name in table:
            name = fit(wanted, key=f"{server}\x00{tool}", force_hash=True)
        table[name] = ToolRef(server, tool)
    return table
