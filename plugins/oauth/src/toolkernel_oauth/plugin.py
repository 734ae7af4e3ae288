"""toolkernel-oauth's hooks: token validators, the ``oauth`` client auth, its settings and ``auth`` commands.

Imports stay cheap: the factories import the JOSE library, httpx2 and the ``mcp`` SDK's
OAuth modules only when a validator or a client is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.cli import CommandRegistry
    from toolkernel.registries import AuthProviderRegistry, ClientAuthRegistry, SettingsRegistry


def _validator(name: str) -> Any:
    def factory(settings: Any) -> Any:
        from toolkernel_oauth import validators

        return {**validators.FACTORIES, "chain": validators.chain}[name](settings)

    factory.__name__ = factory.__qualname__ = f"{name.replace('-', '_')}_validator"
    return factory


def oauth_client_auth(url: str, settings: Mapping[str, Any]) -> Any:
    """``auth: {type: oauth, ...}`` in an MCPClient server config → an ``httpx2.Auth``."""
    from toolkernel_oauth.client import oauth_auth

    return oauth_auth(url, dict(settings))


@hookimpl
def register_auth_providers(registry: AuthProviderRegistry) -> None:
    """Token validators: fixed tokens, JWT against a JWKS, RFC 7662 introspection, and a chain."""
    for name in ("static-tokens", "jwt", "introspection", "chain"):
        registry.add(name, _validator(name), settings="oauth")


@hookimpl
def register_client_auth(registry: ClientAuthRegistry) -> None:
    """``auth: {type: oauth}`` for MCPClient servers."""
    registry.add("oauth", oauth_client_auth)


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """The protected resource and its validators, from ``[plugins.oauth]`` or ``TOOLKERNEL_OAUTH_<FIELD>``."""
    from toolkernel_oauth.settings import OAuthServerSettings

    registry.add("oauth", OAuthServerSettings)


@hookimpl
def register_commands(registry: CommandRegistry) -> None:
    """``toolkernel auth login|status|logout``."""
    from toolkernel_oauth import _cli

    registry.add(
        "auth", _cli.configure, _cli.run, help="Log in to OAuth-protected MCP servers; show or forget tokens."
    )
