"""Plugin discovery: entry points in the ``toolkernel`` group, one try per plugin.

A plugin that fails to import, or implements a hook that does not exist, is reported
with its name, distribution and version and left out; the others still load. Strict
mode makes any failure fatal. Which plugins load is set by name: ``only`` / ``disable``
arguments, or ``TOOLKERNEL_LOAD_PLUGINS`` / ``TOOLKERNEL_DISABLE_PLUGINS``
(comma-separated) in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Literal

GROUP = "toolkernel"

Origin = Literal["built-in", "entry point", "registered"]


@dataclass(slots=True)
class PluginInfo:
    """What ``toolkernel plugins`` reports about one plugin."""

    name: str
    origin: Origin
    module: str | None = None
    distribution: str | None = None
    version: str | None = None
    hooks: list[str] = field(default_factory=list)
    status: Literal["loaded", "failed", "disabled"] = "loaded"
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return {
            "name": self.name,
            "origin": self.origin,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": self.hooks,
            "status": self.status,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class LoadPolicy:
    """Which plugins to load, by name, and whether a failure is fatal."""

    only: frozenset[str] | None = None
    disable: frozenset[str] = frozenset()
    strict: bool = False

    @classmethod
    def resolve(
        cls,
        only: Collection[str] | None,
        disable: Collection[str] | None,
        strict: bool | None,
        environ: Mapping[str, str] | None = None,
    ) -> LoadPolicy:
        """Arguments win over ``TOOLKERNEL_LOAD_PLUGINS`` / ``_DISABLE_PLUGINS`` / ``_STRICT_PLUGINS``."""
        env = os.environ if environ is None else environ
        if only is None and env.get("TOOLKERNEL_LOAD_PLUGINS") is not None:
            only = _names(env["TOOLKERNEL_LOAD_PLUGINS"])
        if disable is None:
            disable = _names(env.get("TOOLKERNEL_DISABLE_PLUGINS", ""))
        if strict is None:
            strict = env.get("TOOLKERNEL_STRICT_PLUGINS", "").lower() in ("1", "true", "yes")
        return cls(frozenset(only) if only is not None else None, frozenset(disable), strict)

    def allows(self, name: str) -> bool:
        """Whether the plugin called ``name`` should load."""
        if name in self.disable:
            return False
        return self.only is None or name in self.only


def discover() -> list[EntryPoint]:
    """Every entry point in the ``toolkernel`` group, sorted by name for a stable order."""
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def describe_entry_point(ep: EntryPoint) -> PluginInfo:
    """A :class:`PluginInfo` for ``ep`` with its distribution and version filled in."""
    dist = ep.dist
    return PluginInfo(
        name=ep.name,
        origin="entry point",
        module=ep.value,
        distribution=dist.name if dist is not None else None,
        version=dist.version if dist is not None else None,
    )


def _names(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]
