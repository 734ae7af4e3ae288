"""Resources a server offers: fixed URIs and URI templates, each with a reader."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkernel.errors import ConfigError

__all__ = [
    "Completer",
    "ReadResult",
    "Resource",
    "ResourceLister",
    "ResourcePage",
    "ResourceTemplate",
    "call_maybe_async",
]

ReadResult = str | bytes
Completer = Callable[[str], Sequence[str] | Awaitable[Sequence[str]]]
"""``complete(prefix) -> candidate values`` for one argument."""
ResourcePage = tuple[list["Resource"], str | None]
"""One page of a template's resources and the cursor of the next page (``None``: the last)."""
ResourceLister = Callable[[str | None, int], ResourcePage | Awaitable[ResourcePage]]
"""``listing(cursor, limit)``: at most ``limit`` of the resources a template addresses, from
``cursor`` (``None``: the first page), and the next cursor. Sync or async."""

_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(eq=False)
class Resource:
    """A resource at a fixed URI; ``read()`` returns text or bytes (sync or async)."""

    uri: str
    name: str
    read: Callable[[], ReadResult | Awaitable[ReadResult]]
    description: str | None = None
    mime_type: str | None = None
    title: str | None = None
    meta: dict[str, Any] | None = None
    scopes: tuple[str, ...] = ()
    """OAuth scopes a caller needs to see and read it (enforced when the server has auth on)."""

    def __post_init__(self) -> None:
        if "://" not in self.uri and not self.uri.startswith(("urn:", "data:")):
            raise ConfigError(f"resource {self.name!r}: uri {self.uri!r} must be absolute (scheme://...)")
        if not callable(self.read):
            raise ConfigError(f"resource {self.uri!r}: read must be callable")


@dataclass(eq=False)
class ResourceTemplate:
    """Resources addressed by an RFC 6570 level-1 template such as ``file:///{path}``.

    ``read(**variables)`` receives the values matched from the URI. ``listing``, when given,
    enumerates the resources the template addresses a page at a time: ``resources/list``
    shows them after the fixed resources, paged by cursor, so a collection too large (or too
    changeable) to register resource by resource is listed from where it lives.
    """

    uri_template: str
    name: str
    read: Callable[..., ReadResult | Awaitable[ReadResult]]
    description: str | None = None
    mime_type: str | None = None
    title: str | None = None
    complete: Mapping[str, Completer] = field(default_factory=dict)
    meta: dict[str, Any] | None = None
    scopes: tuple[str, ...] = ()
    """OAuth scopes a caller needs to see and read it (enforced when the server has auth on)."""
    listing: ResourceLister | None = None
    _pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        variables = _VAR.findall(self.uri_template)
        if not variables:
            raise ConfigError(f"resource template {self.uri_template!r} has no {{variable}}")
        unknown = set(self.complete) - set(variables)
        if unknown:
            raise ConfigError(
                f"resource template {self.uri_template!r}: completion for unknown {sorted(unknown)}"
            )
        parts = _VAR.split(self.uri_template)
        regex = "".join(f"(?P<{part}>[^/?#]+)" if i % 2 else re.escape(part) for i, part in enumerate(parts))
        self._pattern = re.compile(f"^{regex}$")

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables in ``uri``, or ``None`` when the URI does not fit."""
        m = self._pattern.match(uri)
        return m.groupdict() if m else None


async def call_maybe_async(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; await the result when it is awaitable."""
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
