"""toolkernel: a plugin-based microkernel for Model Context Protocol tooling.

This module holds the public API only. Importing it loads neither the ``mcp`` SDK nor
any backend library; those load when a server is served or a plugin's factory runs.
"""

from __future__ import annotations

import pluggy

hookimpl = pluggy.HookimplMarker("toolkernel")
"""Marks a plugin function as the implementation of a hook in :mod:`toolkernel.hookspecs`."""

__all__ = ["hookimpl"]
