"""Who is calling: the auth contract a transport consults and a tool can read."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AuthInfo",
    "AuthProvider",
    "AuthProviderFactory",
    "ClientAuthFactory",
]


class AuthInfo(BaseModel):
    """A verified caller, as a tool sees it in ``ctx.auth``."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    subject: str | None = Field(None, description="Who the token was issued to.")
    client_id: str | None = Field(None, description="The OAuth client that presented the token.")
    scopes: tuple[str, ...] = Field((), description="Granted scopes.")
    expires_at: int | None = Field(None, description="Expiry, seconds since the epoch.")
    claims: Mapping[str, Any] = Field(default_factory=dict, description="Any further verified claims.")


class AuthProvider(Protocol):
    """Turns a bearer token into :class:`AuthInfo`, or ``None`` when it is not valid."""

    async def verify(self, token: str) -> AuthInfo | None: ...


AuthProviderFactory = Callable[[Any], AuthProvider]
"""``factory(settings)``: the plugin's validated settings model, or ``None`` when registered without."""

ClientAuthFactory = Callable[[str, Mapping[str, Any]], Any]
"""``factory(url, settings)`` → an ``httpx2.Auth`` authorizing a client's requests to ``url``."""
