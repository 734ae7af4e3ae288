"""``toolkernel auth login|status|logout``: a user's tokens for OAuth-protected MCP servers.

``login`` runs the authorization-code flow with PKCE: it listens on 127.0.0.1 on an
ephemeral port for the redirect, opens the browser when there is one (else prints the
URL), accepts only the redirect carrying the ``state`` it sent, and stores the tokens
(mode 0600) for ``inspect``, ``call`` and ``MCPClient`` servers with ``auth: {type: oauth}``.
No command prints a token.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from toolkernel.cli import positive_seconds

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="auth_command", metavar="ACTION", required=True)
    login = sub.add_parser("login", help="Log in to a server and keep its tokens.")
    login.add_argument("url", metavar="URL", help="the server's MCP endpoint URL")
    login.add_argument(
        "--scope", default=None, help="scopes to ask for (default: what the server advertises)"
    )
    login.add_argument("--client-id", default=None, help="a pre-registered client id (default: register)")
    login.add_argument("--client-secret", default=None, help="its secret, for a confidential client")
    login.add_argument("--client-metadata-url", default=None, help="an https client ID metadata document")
    login.add_argument("--no-browser", action="store_true", help="print the URL instead of opening a browser")
    login.add_argument(
        "--timeout", type=positive_seconds, default=300.0, help="seconds to wait for the login (default 300)"
    )
    status = sub.add_parser("status", help="Show the servers with stored tokens (never the tokens).")
    status.add_argument("--json", action="store_true", help="print JSON")
    logout = sub.add_parser("logout", help="Forget a server's tokens.")
    logout.add_argument("url", metavar="URL", nargs="?", help="the server (omit with --all)")
    logout.add_argument("--all", action="store_true", help="forget every server's tokens")


def run(args: argparse.Namespace, kernel: Kernel) -> Any:
    if args.auth_command == "login":
        return _login(args, kernel)
    if args.auth_command == "status":
        return _status(args)
    return _logout(args)  # an awaitable: the command line runs it


async def _login(args: argparse.Namespace, kernel: Kernel) -> int:
    from toolkernel._builtin.commands import _deadline, _quiet_unless_asked
    from toolkernel.client import MCPClient
    from toolkernel.errors import ConfigError, MCPClientError
    from toolkernel_oauth.client import CodeFlowProvider, oauth_auth
    from toolkernel_oauth.loopback import LoopbackRedirect
    from toolkernel_oauth.tokens import FileTokenStore

    store = FileTokenStore()
    with _quiet_unless_asked(args, also=("mcp.client.auth",)), _deadline(args.timeout):
        async with LoopbackRedirect(open_browser=not args.no_browser) as redirect:
            settings = {
                "redirect_uri": redirect.uri,
                "scope": args.scope,
                "client_id": args.client_id,
                "client_secret": args.client_secret,
                "client_metadata_url": args.client_metadata_url,
            }
            auth = oauth_auth(args.url, settings, store=store, authorizer=redirect.authorize)
            # The user has until --timeout to log in: connecting waits as long.
            server = {"url": args.url, "timeout": args.timeout, "connect_timeout": args.timeout}
            config = {
                "id": f"auth-login-{id(args)}",
                "servers": {"server": server},
                "throw_on_load_error": True,
                "policy": {"http_reconnect": {"max_attempts": 0}, "heartbeat_interval": None},
            }
            try:
                async with MCPClient(config, kernel=kernel, persist=False, auth={"server": auth}) as client:
                    tools = await client.list_tools()
            except MCPClientError:
                failure = auth.failure if isinstance(auth, CodeFlowProvider) else None
                if failure is not None:
                    raise ConfigError(f"auth login: {failure}") from None
                raise
    print(f"logged in to {args.url} ({len(tools)} tools); tokens kept in {store.path}", file=sys.stderr)
    return 0


def _status(args: argparse.Namespace) -> int:
    import json

    from toolkernel_oauth.tokens import FileTokenStore

    store = FileTokenStore()
    data = store.records()
    rows = []
    for key, record in sorted(data.items()):
        tokens = record.get("tokens") or {} if isinstance(record, dict) else {}
        client = record.get("client") or {} if isinstance(record, dict) else {}
        rows.append(
            {
                "server": key,
                "client_id": client.get("client_id"),
                "scopes": tokens.get("scope"),
                "access_token": bool(tokens.get("access_token")),
                "refresh_token": bool(tokens.get("refresh_token")),
                "expires_in": tokens.get("expires_in"),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no stored tokens ({store.path})")
        return 0
    for row in rows:
        parts = [
            f"client {row['client_id']}" if row["client_id"] else "no client",
            "access token" if row["access_token"] else "no access token",
            "refresh token" if row["refresh_token"] else "no refresh token",
        ]
        if row["scopes"]:
            parts.append(f"scopes: {row['scopes']}")
        print(f"{row['server']}  {', '.join(parts)}")
    return 0


async def _logout(args: argparse.Namespace) -> int:
    from toolkernel.errors import ConfigError
    from toolkernel_oauth.client import storage_key
    from toolkernel_oauth.tokens import FileTokenStore

    store = FileTokenStore()
    if args.all:
        for key in store.keys():  # noqa: SIM118 - a method, not a dict
            await store.delete(key)
        print("forgot every server's tokens", file=sys.stderr)
        return 0
    if not args.url:
        raise ConfigError("auth logout: give the server URL, or --all")
    key = storage_key(args.url)
    if key not in store.keys():  # noqa: SIM118 - a method, not a dict
        print(f"no stored tokens for {key}", file=sys.stderr)
        return 1
    await store.delete(key)
    print(f"forgot the tokens for {key}", file=sys.stderr)
    return 0
