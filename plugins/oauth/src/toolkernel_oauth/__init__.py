"""toolkernel-oauth: protected MCP servers and a client that logs in.

Names load on first use, so the plugin loader's import of :mod:`toolkernel_oauth.plugin`
costs nothing until OAuth is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel_oauth.client import AuthorizationRequired as AuthorizationRequired
    from toolkernel_oauth.client import OAuthClientSettings as OAuthClientSettings
    from toolkernel_oauth.client import oauth_auth as oauth_auth
    from toolkernel_oauth.tokens import FileTokenStore as FileTokenStore
    from toolkernel_oauth.tokens import MemoryTokenStore as MemoryTokenStore
    from toolkernel_oauth.tokens import TokenStore as TokenStore

_WHERE = {
    "AuthorizationRequired": "toolkernel_oauth.client",
    "FileTokenStore": "toolkernel_oauth.tokens",
    "MemoryTokenStore": "toolkernel_oauth.tokens",
    "OAuthClientSettings": "toolkernel_oauth.client",
    "TokenStore": "toolkernel_oauth.tokens",
    "oauth_auth": "toolkernel_oauth.client",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Import a public name from its module the first time it is asked for."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'toolkernel_oauth' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
