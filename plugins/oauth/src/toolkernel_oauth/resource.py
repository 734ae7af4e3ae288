"""The resource server: a layer around a server's MCP routes that lets only valid tokens through.

:class:`ResourceServer` is what ``toolkernel-http`` asks to ``protect`` its routes (``serve
--auth NAME``, ``[plugins.http] auth = "NAME"``, or ``asgi_app(server,
auth=ResourceServer(...))``). It serves the protected resource metadata (RFC 9728, at the
root and the path-suffixed well-known URL), answers a request without a good token with
``401`` and ``WWW-Authenticate: Bearer resource_metadata=...``, a token issued for another
resource (RFC 8707 ``aud``) likewise, and a request for a tool, resource or prompt whose
scopes the token lacks with ``403 insufficient_scope`` naming them (step-up). A request
that passes carries its :class:`~toolkernel.AuthInfo` in the ASGI scope, where the kernel
finds it for ``ctx.auth`` and for filtering lists by scope.

It sits inside the HTTP plugin's Host/Origin checks and CORS, so those keep working, and
refusals carry CORS headers a browser client can read. Each refused request is logged as
one structured line (``request refused`` with status, reason, method, path and client
address), never with token material.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from toolkernel._logging import get_logger
from toolkernel.auth import AuthInfo, AuthProvider
from toolkernel_oauth import validators
from toolkernel_oauth.settings import OAuthServerSettings

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.transports import ServingApp

logger = logging.getLogger("toolkernel.oauth")

AUTH_SCOPE_KEY = "toolkernel.auth"
"""Where a verified caller is left in the ASGI scope (the kernel reads it for ``ctx.auth``)."""

WELL_KNOWN = "/.well-known/oauth-protected-resource"


class ResourceServer:
    """Guards MCP routes with a token validator and publishes how to get a token.

    :param verifier: any :class:`~toolkernel.auth.AuthProvider` (``verify(token)``).
    :param settings: :class:`OAuthServerSettings` (resource URL, authorization servers,
        advertised and required scopes); keyword arguments override single fields.
    """

    def __init__(
        self, verifier: AuthProvider, settings: OAuthServerSettings | None = None, **overrides: Any
    ) -> None:
        base = settings or OAuthServerSettings()
        self.settings = base.model_copy(update=overrides) if overrides else base
        self.verifier = verifier

    @classmethod
    def from_kernel(cls, kernel: Kernel, name: str) -> ResourceServer:
        """The layer for auth provider ``name``, configured from the kernel's ``oauth`` settings."""
        from pydantic import ValidationError

        from toolkernel.errors import ConfigError

        try:
            verifier = kernel.auth_provider(name)
        except LookupError as exc:
            raise ConfigError(f"auth: {exc}") from None
        except (ValueError, ValidationError) as exc:
            raise ConfigError(f"auth provider {name!r}: {exc}") from None
        settings = kernel.settings("oauth") if "oauth" in kernel.settings_models else None
        if not isinstance(settings, OAuthServerSettings):
            settings = None
        return cls(verifier, settings)

    # -- the layer ------------------------------------------------------------------------------

    def protect(
        self, routes: Sequence[BaseRoute], *, path: str, serving: ServingApp | None = None
    ) -> list[BaseRoute]:
        """``routes`` behind the token check, plus the metadata routes."""
        scopes = _ScopeMap(serving)
        guarded: list[BaseRoute] = []
        for route in routes:
            if isinstance(route, Route):
                methods = sorted(route.methods - {"HEAD"}) if route.methods else None
                guarded.append(
                    Route(route.path, endpoint=_Guard(route.app, self, path, scopes), methods=methods)
                )
            elif isinstance(route, Mount):
                guarded.append(Mount(route.path, app=_Guard(route.app, self, path, scopes)))
            else:
                guarded.append(route)
        metadata = _Metadata(self, path)
        suffix = _resource_path(self.settings.resource) if self.settings.resource else path
        extra = [Route(WELL_KNOWN, endpoint=metadata, methods=["GET"])]
        if suffix not in ("", "/"):
            extra.append(Route(WELL_KNOWN + suffix, endpoint=metadata, methods=["GET"]))
        return [*extra, *guarded]

    # -- helpers the layer uses -----------------------------------------------------------------------

    def resource_url(self, scope: Scope, path: str) -> str:
        """This resource's canonical URL: from settings, else the URL the request came to."""
        if self.settings.resource:
            return self.settings.resource
        headers = Headers(scope=scope)
        host = headers.get("host") or _server_host(scope)
        return f"{scope.get('scheme', 'http')}://{host}{path}"

    def metadata_url(self, scope: Scope, path: str) -> str:
        """The path-suffixed well-known URL of this resource's metadata."""
        resource = self.resource_url(scope, path)
        origin, suffix = _split(resource)
        return f"{origin}{WELL_KNOWN}{suffix if suffix != '/' else ''}"

    def metadata(self, scope: Scope, path: str) -> dict[str, Any]:
        """The RFC 9728 document."""
        s = self.settings
        doc: dict[str, Any] = {
            "resource": self.resource_url(scope, path),
            "authorization_servers": list(s.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if s.scopes_supported is not None:
            doc["scopes_supported"] = list(s.scopes_supported)
        if s.resource_name:
            doc["resource_name"] = s.resource_name
        return doc

    async def verify(self, token: str, resource: str) -> AuthInfo | None:
        """The caller ``token`` stands for, if it is valid, unexpired and meant for ``resource``;
        when not, :data:`validators.refusal` says why."""
        validators.refusal.set(None)
        try:
            info = await self.verifier.verify(token)
        except Exception:
            logger.exception("token validator failed")
            validators.refusal.set("the validator failed")
            return None
        if info is None:
            if validators.refusal.get() is None:
                validators.refusal.set("refused by the validator")
            return None
        aud = info.claims.get("aud") if info.claims else None
        if aud is not None and not _names_resource(aud, resource, self.settings.resource):
            validators.refusal.set("aud names another resource (RFC 8707)")
            return None
        return info

    def refuse(
        self,
        scope: Scope,
        path: str,
        *,
        error: str | None,
        reason: str,
        needed: Sequence[str] = (),
        request_id: Any = None,
    ) -> Response:
        """:meth:`challenge`, and the one log line saying why this request was refused."""
        response = self.challenge(scope, path, error=error, needed=needed, request_id=request_id)
        client = scope.get("client")
        get_logger("toolkernel.oauth").warning(
            "request refused",
            status=response.status_code,
            error=error,
            reason=reason,
            method=scope.get("method"),
            path=scope.get("path"),
            client=client[0] if client else None,
        )
        return response

    def challenge(
        self,
        scope: Scope,
        path: str,
        *,
        error: str | None,
        needed: Sequence[str] = (),
        request_id: Any = None,
    ) -> Response:
        """A ``401`` (no or bad token) or ``403`` (``insufficient_scope``) with ``WWW-Authenticate``."""
        params = [f'resource_metadata="{self.metadata_url(scope, path)}"']
        wanted = list(dict.fromkeys([*self.settings.required_scopes, *needed]))
        if not wanted and error is None and self.settings.scopes_supported:
            wanted = list(self.settings.scopes_supported)
        if error is not None:
            params.insert(0, f'error="{error}"')
        if wanted:
            params.append(f'scope="{" ".join(wanted)}"')
        status = 403 if error == "insufficient_scope" else 401
        message = {
            None: "Authorization required: send a bearer token",
            "invalid_token": "The access token is not valid for this server",
            "insufficient_scope": f"This request needs the scope(s): {' '.join(wanted)}",
        }[error]
        body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32001, "message": message}}
        return JSONResponse(
            body, status_code=status, headers={"WWW-Authenticate": "Bearer " + ", ".join(params)}
        )


class _Metadata:
    """GET the RFC 9728 document (public, cacheable for a minute)."""

    def __init__(self, server: ResourceServer, path: str) -> None:
        self.server = server
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            self.server.metadata(scope, self.path),
            headers={"Cache-Control": "public, max-age=60", "Access-Control-Allow-Origin": "*"},
        )
        await response(scope, receive, send)


class _ScopeMap:
    """Which scopes each tool, resource and prompt needs, read from the served server once."""

    def __init__(self, serving: ServingApp | None) -> None:
        self.serving = serving
        self._built = False
        self.tools: dict[str, tuple[str, ...]] = {}
        self.resources: dict[str, tuple[str, ...]] = {}
        self.templates: list[tuple[Any, tuple[str, ...]]] = []
        self.prompts: dict[str, tuple[str, ...]] = {}

    def any(self) -> bool:
        if not self._built:
            self._build()
        return bool(self.tools or self.resources or self.templates or self.prompts)

    def _build(self) -> None:
        self._built = True
        if self.serving is None:
            return
        server = self.serving.server
        self.tools = {n: t.scopes for n, t in server.all_tools().items() if t.scopes}
        fixed, templates = server.all_resources()
        self.resources = {u: r.scopes for u, r in fixed.items() if r.scopes}
        self.templates = [(t, t.scopes) for t in templates.values() if t.scopes]
        for name, versions in server.all_prompts().items():
            newest = list(versions.values())[-1]
            if newest.scopes:
                self.prompts[name] = newest.scopes

    def needed(self, message: Any) -> tuple[str, ...]:
        """Scopes the JSON-RPC ``message`` needs (a batch: all of them)."""
        if isinstance(message, list):
            return tuple(s for m in message for s in self.needed(m))
        if not isinstance(message, dict):
            return ()
        method, params = message.get("method"), message.get("params") or {}
        if not isinstance(params, dict):
            return ()
        if method == "tools/call":
            return self.tools.get(str(params.get("name")), ())
        if method == "prompts/get":
            return self.prompts.get(str(params.get("name")), ())
        if method == "resources/read":
            uri = str(params.get("uri"))
            if uri in self.resources:
                return self.resources[uri]
            for template, scopes in self.templates:
                if template.match(uri) is not None:
                    return scopes
        return ()


class _Guard:
    """The token check in front of one MCP endpoint."""

    def __init__(self, app: ASGIApp, server: ResourceServer, path: str, scopes: _ScopeMap) -> None:
        self.app = app
        self.server = server
        self.path = path
        self.scopes = scopes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        server = self.server
        header = Headers(scope=scope).get("authorization", "")
        kind, _, token = header.partition(" ")
        if not header:
            refused = server.refuse(scope, self.path, error=None, reason="no Authorization header")
            await refused(scope, receive, send)
            return
        token = token.strip()
        if kind.lower() == "bearer" and token:
            info = await server.verify(token, server.resource_url(scope, self.path))
            reason = validators.refusal.get() or "refused"
        else:
            info, reason = None, f"Authorization scheme {kind[:20]!r} is not Bearer, or no token"
        if info is None:
            await server.refuse(scope, self.path, error="invalid_token", reason=reason)(scope, receive, send)
            return
        granted = set(info.scopes)
        required = set(server.settings.required_scopes)
        wants_body = scope["method"] == "POST" and (self.scopes.any() or not required <= granted)
        message = None
        if wants_body:
            body = await Request(scope, receive).body()
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            receive = _replay(body, receive)
        needed = (*sorted(required - granted), *self.scopes.needed(message))
        if not set(needed) <= granted:
            missing = " ".join(sorted(set(needed) - granted))
            refused = server.refuse(
                scope,
                self.path,
                error="insufficient_scope",
                reason=f"missing scope(s): {missing}",
                needed=needed,
                request_id=_request_id(message),
            )
            await refused(scope, receive, send)
            return
        scope[AUTH_SCOPE_KEY] = info
        scope["user"] = _sdk_user(info)
        await self.app(scope, receive, send)


def _request_id(message: Any) -> Any:
    """The id of a JSON-RPC request, when it is one a response may carry (a string or an integer)."""
    if isinstance(message, dict):
        rid = message.get("id")
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
            return rid
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the already-read body over again, then the client's own messages."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _sdk_user(info: AuthInfo) -> Any:
    """The SDK's user object, so its session-owner checks bind a session to this caller."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    claims = dict(info.claims) if info.claims else {}
    return AuthenticatedUser(
        AccessToken(
            token="",  # never kept: the caller is identified by client, issuer and subject
            client_id=info.client_id or "",
            scopes=list(info.scopes),
            expires_at=info.expires_at,
            subject=info.subject,
            claims={"iss": claims["iss"]} if "iss" in claims else None,
        )
    )


def _names_resource(aud: Any, resource: str, configured: str | None) -> bool:
    values = [aud] if isinstance(aud, str) else [str(a) for a in aud] if isinstance(aud, list) else []
    accepted = {resource.rstrip("/"), *((configured.rstrip("/"),) if configured else ())}
    return any(v.rstrip("/") in accepted for v in values)


def _split(url: str) -> tuple[str, str]:
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host}", f"/{path}" if slash else ""


def _resource_path(url: str) -> str:
    return _split(url)[1].rstrip("/")


def _server_host(scope: Scope) -> str:
    server = scope.get("server") or ("localhost", None)
    host, port = server[0], server[1]
    return f"{host}:{port}" if port else str(host)
