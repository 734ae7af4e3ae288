"""The client side: an ``httpx2.Auth`` that gets, keeps, refreshes and presents OAuth tokens.

:func:`oauth_auth` builds one for a server URL from :class:`OAuthClientSettings` (the
``auth: {type: oauth, ...}`` table of a server in an ``MCPClient`` config). The discovery,
registration and authorization-code machinery is the ``mcp`` SDK's (RFC 9728 → RFC 8414 /
OpenID discovery with the 2025-03-26 fallbacks, dynamic registration, client ID metadata
documents, PKCE S256, refresh, step-up, RFC 9207 ``iss`` checks, resource indicators); this
module adds what the SDK lacks — DPoP-bound tokens with server nonces, the JWT-bearer grant
for workload identity and for enterprise-managed authorization (an ID-JAG obtained by token
exchange at the enterprise IdP) — and keeps everything in a :class:`~toolkernel_oauth.TokenStore`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, model_validator

from toolkernel_oauth.dpop import DPoPKey
from toolkernel_oauth.tokens import FileTokenStore, MemoryTokenStore, TokenStore

logger = logging.getLogger("toolkernel.oauth")

Authorizer = Callable[[str], Awaitable[str]]
"""Shows the user an authorization URL and returns the redirect URL the server sent them back to."""

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"


class AuthorizationRequired(OAuthFlowError):
    """The server needs a user to log in, and this client may not ask one."""


class LoginFailed(OAuthFlowError):
    """A login cannot succeed as configured: say what to change (``auth login`` exits 2 with it)."""


class IdentityProvider(BaseModel):
    """The enterprise IdP that trades a user's ID token for an ID-JAG (enterprise-managed authorization)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token_endpoint: str = Field(description="The IdP's token endpoint (RFC 8693 token exchange).")
    client_id: str = Field(description="This client's id at the IdP.")
    client_secret: str | None = Field(None, description="Its secret at the IdP, if it has one.")
    id_token: str | None = Field(None, description="The user's OpenID Connect ID token.")
    id_token_file: Path | None = Field(None, description="A file holding the ID token (read on each use).")


class OAuthClientSettings(BaseModel):
    """How a client authorizes to one server: ``auth: {type: oauth, ...}`` in its config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["oauth"] = "oauth"
    grant: Literal["authorization_code", "client_credentials", "jwt_bearer", "enterprise"] = Field(
        "authorization_code",
        description="authorization_code (a user logs in), client_credentials (a service), "
        "jwt_bearer (a workload identity JWT, RFC 7523) or enterprise (ID token → ID-JAG → token).",
    )
    client_id: str | None = Field(None, description="A pre-registered client id; none: register or use CIMD.")
    client_secret: str | None = Field(None, description="Its secret (confidential clients).")
    token_endpoint_auth_method: (
        Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"] | None
    ) = Field(
        None, description="How the client authenticates at the token endpoint; default from the secret."
    )
    private_key: str | None = Field(None, description="PEM key signing private_key_jwt assertions.")
    private_key_file: Path | None = Field(None, description="A file holding that PEM key.")
    signing_algorithm: str = Field("ES256", description="JWS algorithm of private_key_jwt assertions.")
    issuer: str | None = Field(
        None,
        description="The authorization server these client credentials belong to; discovered metadata "
        "must name it (client_credentials).",
    )
    client_metadata_url: str | None = Field(
        None, description="An https URL of this client's metadata document, used as its client id (CIMD)."
    )
    client_name: str = Field("toolkernel", description="Name shown on consent screens.")
    scope: str | None = Field(None, description="Scopes to ask for; default: what the server advertises.")
    redirect_uri: str = Field(
        DEFAULT_REDIRECT_URI, description="Where the authorization server sends the user back."
    )
    assertion: str | None = Field(None, description="jwt_bearer: the workload identity JWT.")
    assertion_file: Path | None = Field(None, description="jwt_bearer: a file holding it (read on each use).")
    identity_provider: IdentityProvider | None = Field(None, description="enterprise: the IdP to ask.")
    dpop: bool | None = Field(
        None, description="Bind tokens to a key (RFC 9449); None: when the server's challenge says DPoP."
    )
    store: Literal["file", "memory"] = Field("file", description="Where tokens are kept.")
    store_path: Path | None = Field(None, description="The token file (default under the user's config dir).")

    @model_validator(mode="after")
    def _check(self) -> OAuthClientSettings:
        if self.grant == "client_credentials" and not self.client_id:
            raise ValueError("grant client_credentials needs client_id")
        if self.grant == "jwt_bearer" and not (self.assertion or self.assertion_file):
            raise ValueError("grant jwt_bearer needs assertion or assertion_file")
        if self.grant == "enterprise" and (self.identity_provider is None or not self.client_id):
            raise ValueError("grant enterprise needs identity_provider and client_id")
        return self


def token_store(settings: OAuthClientSettings) -> TokenStore:
    """The store ``settings`` names."""
    return MemoryTokenStore() if settings.store == "memory" else FileTokenStore(settings.store_path)


def oauth_auth(
    server_url: str,
    settings: OAuthClientSettings | dict[str, Any] | None = None,
    *,
    store: TokenStore | None = None,
    authorizer: Authorizer | None = None,
) -> httpx2.Auth:
    """An ``httpx2.Auth`` authorizing requests to the MCP server at ``server_url``.

    :param settings: :class:`OAuthClientSettings` or a mapping validated into one.
    :param store: where tokens and the client registration are kept (default from settings).
    :param authorizer: ``async (authorization_url) -> redirect_url`` for the authorization-code
        grant; default: refuse with :class:`AuthorizationRequired` (``toolkernel auth login``
        passes one that opens a browser and listens on loopback).
    """
    opts = (
        settings
        if isinstance(settings, OAuthClientSettings)
        else OAuthClientSettings.model_validate(settings or {})
    )
    storage = StoreAdapter(store or token_store(opts), storage_key(server_url))
    if opts.grant == "client_credentials":
        return _client_credentials(server_url, opts, storage)
    if opts.grant == "jwt_bearer":
        return AssertionGrantProvider(server_url, opts, storage, _workload_assertion(opts))
    if opts.grant == "enterprise":
        provider = AssertionGrantProvider(server_url, opts, storage, None)
        provider.assertion_source = _id_jag_source(opts, provider)
        return provider
    return CodeFlowProvider(server_url, opts, storage, authorizer or _refuse)


def storage_key(server_url: str) -> str:
    """The key a server's tokens are stored under: its canonical resource URL."""
    return resource_url_from_server_url(server_url)


class StoreAdapter:
    """The SDK's ``TokenStorage`` over a :class:`TokenStore`: ``<key>`` holds tokens and client."""

    def __init__(self, store: TokenStore, key: str) -> None:
        self.store = store
        self.key = key

    async def _record(self) -> dict[str, Any]:
        value = await self.store.get(self.key)
        return value if isinstance(value, dict) else {}

    async def _put(self, field: str, value: dict[str, Any]) -> None:
        record = await self._record()
        record[field] = value
        await self.store.set(self.key, record)

    async def get_tokens(self) -> OAuthToken | None:
        raw = (await self._record()).get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._put("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = (await self._record()).get("client")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._put("client", client_info.model_dump(mode="json", exclude_none=True))


async def _refuse(url: str) -> str:
    raise AuthorizationRequired("this server needs a user to log in: run `toolkernel auth login URL`")


# -- DPoP on top of the SDK's flow -------------------------------------------------------------


class _DPoPFlow(OAuthClientProvider):
    """The SDK's provider, presenting DPoP-bound tokens with fresh proofs when the server wants them."""

    def _dpop_setup(self, dpop: bool | None) -> None:
        self.dpop_mode = dpop
        self.dpop_key: DPoPKey | None = DPoPKey() if dpop else None
        self.token_is_dpop = False

    def _add_auth_header(self, request: httpx2.Request) -> None:
        tokens = self.context.current_tokens
        if tokens is None or not tokens.access_token:
            return
        if self.token_is_dpop and self.dpop_key is not None:
            request.headers["Authorization"] = f"DPoP {tokens.access_token}"
        else:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"

    def _sign(self, outgoing: httpx2.Request, original: httpx2.Request) -> None:
        key = self.dpop_key
        if key is None:
            return
        if outgoing is original:
            tokens = self.context.current_tokens
            if self.token_is_dpop and tokens is not None:
                self._add_auth_header(outgoing)
                outgoing.headers["DPoP"] = key.proof(outgoing.method, str(outgoing.url), tokens.access_token)
        elif _is_token_request(outgoing):
            outgoing.headers["DPoP"] = key.proof(outgoing.method, str(outgoing.url))

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        inner = super()._auth_flow(request)
        try:
            outgoing = await inner.__anext__()
            while True:
                self._check(outgoing)
                self._sign(outgoing, request)
                response = yield outgoing
                key = self.dpop_key
                # RFC 9449 §8/§9: once more, with the nonce the server handed out.
                if (
                    key is not None
                    and await _asks_nonce(response)
                    and key.remember_nonce(str(outgoing.url), response.headers.get("dpop-nonce"))
                ):
                    self._sign(outgoing, request)
                    response = yield outgoing
                if outgoing is request:
                    if response.status_code in (401, 403):
                        self._refused(response)
                    else:
                        self._accepted()
                if _is_token_request(outgoing) and response.status_code == 200:
                    response = await self._bearer_shaped(response)
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await inner.aclose()

    def _check(self, outgoing: httpx2.Request) -> None:
        """A request the flow is about to send may be refused here, before it leaves."""

    def _accepted(self) -> None:
        """The server accepted the request as authorized."""

    def _refused(self, response: httpx2.Response) -> None:
        """The server refused the token (or its absence): start DPoP if it asks for it."""
        if self.dpop_key is None and self.dpop_mode is None and _challenge_scheme(response) == "dpop":
            self.dpop_key = DPoPKey()

    async def _bearer_shaped(self, response: httpx2.Response) -> httpx2.Response:
        """A DPoP token response as the SDK's ``OAuthToken`` accepts it, remembering it is DPoP-bound."""
        body = await response.aread()
        try:
            data = json.loads(body)
        except ValueError:
            return response
        if not isinstance(data, dict):
            return response
        self.token_is_dpop = str(data.get("token_type", "")).lower() == "dpop" and self.dpop_key is not None
        if not self.token_is_dpop:
            return response
        data["token_type"] = "Bearer"
        return httpx2.Response(200, json=data, request=response.request)


def _is_token_request(request: httpx2.Request) -> bool:
    if request.method != "POST":
        return False
    content_type = request.headers.get("content-type", "")
    return content_type.startswith("application/x-www-form-urlencoded") and b"grant_type=" in request.content


async def _asks_nonce(response: httpx2.Response) -> bool:
    """Whether a server refused a proof for want of a nonce (RFC 9449 §8 and §9)."""
    if response.status_code not in (400, 401) or "dpop-nonce" not in response.headers:
        return False
    if "use_dpop_nonce" in response.headers.get("www-authenticate", ""):
        return True
    try:
        body = json.loads(await response.aread())
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == "use_dpop_nonce"


def _challenge_scheme(response: httpx2.Response) -> str:
    return response.headers.get("www-authenticate", "").strip().split(" ", 1)[0].lower()


# -- authorization code -------------------------------------------------------------------------


class CodeFlowProvider(_DPoPFlow):
    """Authorization code with PKCE: a user logs in through ``authorizer``; tokens refresh on expiry."""

    def __init__(
        self, server_url: str, settings: OAuthClientSettings, storage: StoreAdapter, authorizer: Authorizer
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.authorizer = authorizer
        self._result: AuthorizationCodeResult | None = None
        self._logged_in = False  # a user just logged in; no request has been accepted since
        self._login_server: str | None = None
        self._fresh_token_refused: str | None = None
        self.failure: LoginFailed | None = None
        """Why the last login could not succeed, kept for ``auth login`` to report."""
        metadata = OAuthClientMetadata(
            client_name=settings.client_name,
            redirect_uris=[AnyUrl(settings.redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=settings.scope,
            token_endpoint_auth_method=settings.token_endpoint_auth_method
            or ("client_secret_basic" if settings.client_secret else "none"),
        )
        super().__init__(
            server_url,
            metadata,
            storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=settings.client_metadata_url,
        )
        self._dpop_setup(settings.dpop)

    async def _initialize(self) -> None:
        await super()._initialize()
        settings = self.settings
        if settings.client_id and (
            self.context.client_info is None or self.context.client_info.client_id != settings.client_id
        ):
            self.context.client_info = OAuthClientInformationFull(
                client_id=settings.client_id,
                client_secret=settings.client_secret,
                redirect_uris=[AnyUrl(settings.redirect_uri)],
                token_endpoint_auth_method=settings.token_endpoint_auth_method
                or ("client_secret_basic" if settings.client_secret else "none"),
            )

    def _check(self, outgoing: httpx2.Request) -> None:
        """No registration at the MCP server when an authorization server without it was found.

        The SDK falls back to ``POST /register`` on the MCP server's origin (the 2025-03-26
        rule for servers that are their own authorization server); when discovery named
        another authorization server that offers no registration endpoint, that request can
        only fail, so the login stops here saying what to do instead.
        """
        metadata = self.context.oauth_metadata
        separate_server = self.context.auth_server_url is not None or metadata is not None
        if (
            separate_server
            and (metadata is None or metadata.registration_endpoint is None)
            and outgoing.method == "POST"
            and outgoing.url.path.endswith("/register")
        ):
            issuer = str(metadata.issuer) if metadata is not None else self.context.auth_server_url
            raise self._failed(
                f"the authorization server {issuer} offers no dynamic client registration: "
                "register a client there (redirect URI http://127.0.0.1/callback, any port) "
                "and pass its --client-id (and --client-secret if it has one)"
            )

    def _authorization_server(self) -> str | None:
        metadata = self.context.oauth_metadata
        return str(metadata.issuer) if metadata is not None else self.context.auth_server_url

    def _accepted(self) -> None:
        # The fresh token works: a later refusal (expiry, a new authorization server) may log in again.
        self._logged_in = False
        self._fresh_token_refused = None

    def _refused(self, response: httpx2.Response) -> None:
        super()._refused(response)
        if self._logged_in and response.status_code == 401:
            # The token the user just obtained is not accepted: another login would end the same way.
            self._fresh_token_refused = response.headers.get("www-authenticate", "") or "no reason given"
        if self.authorizer is _refuse and not self.context.can_refresh_token():
            # Nobody may log in here: say so now, before registering a client for nothing.
            raise AuthorizationRequired(
                f"{self.context.server_url} needs a token (HTTP {response.status_code}): "
                f"run `toolkernel auth login {self.context.server_url}`"
            )

    def _failed(self, message: str) -> LoginFailed:
        self.failure = LoginFailed(message)
        return self.failure

    async def _redirect(self, authorization_url: str) -> None:
        if self._fresh_token_refused is not None and self._authorization_server() == self._login_server:
            # Another login at the same authorization server would end the same way; one at a
            # new server (the resource moved its authorization server) may not.
            raise self._failed(
                f"{self.context.server_url} refused the token the authorization server just issued "
                f"({self._fresh_token_refused}); check the server's [plugins.oauth] settings "
                "(issuer, audience) against the authorization server"
            )
        self._fresh_token_refused = None
        redirect = await self.authorizer(authorization_url)
        self._result = parse_redirect(redirect)
        self._logged_in = True
        self._login_server = self._authorization_server()

    async def _callback(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise OAuthFlowError("the authorization server sent no redirect")
        return result


def parse_redirect(url: str) -> AuthorizationCodeResult:
    """The code, state and issuer of the redirect URL an authorization server sent a user to."""
    query = parse_qs(urlsplit(url).query)
    if "error" in query:
        description = query.get("error_description", [""])[0]
        raise OAuthFlowError(f"authorization refused: {query['error'][0]} {description}".strip())
    if "code" not in query:
        raise OAuthFlowError("the redirect carries no authorization code")
    return AuthorizationCodeResult(
        code=query["code"][0],
        state=query.get("state", [None])[0],
        iss=query.get("iss", [None])[0],
    )


# -- client credentials ----------------------------------------------------------------------------


def _client_credentials(server_url: str, opts: OAuthClientSettings, storage: StoreAdapter) -> httpx2.Auth:
    assert opts.client_id is not None
    method = opts.token_endpoint_auth_method
    key = opts.private_key or (opts.private_key_file.read_text() if opts.private_key_file else None)
    if method == "private_key_jwt" or (method is None and key):
        if key is None:
            raise ValueError("private_key_jwt needs private_key or private_key_file")
        params = SignedJWTParameters(
            issuer=opts.client_id,
            subject=opts.client_id,
            signing_algorithm=opts.signing_algorithm,
            signing_key=key,
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=server_url,
            storage=storage,
            client_id=opts.client_id,
            assertion_provider=params.create_assertion_provider(),
            scope=opts.scope,
            issuer=opts.issuer,
        )
    if opts.client_secret is None:
        raise ValueError("client_credentials needs client_secret or a private key")
    return ClientCredentialsOAuthProvider(
        server_url=server_url,
        storage=storage,
        client_id=opts.client_id,
        client_secret=opts.client_secret,
        token_endpoint_auth_method="client_secret_post"
        if method == "client_secret_post"
        else "client_secret_basic",
        scope=opts.scope,
        issuer=opts.issuer,
    )


# -- JWT-bearer grants (workload identity, enterprise-managed) ----------------------------------

AssertionSource = Callable[[str, str], Awaitable[str]]
"""``async (issuer, resource) -> JWT`` presented with the JWT-bearer grant."""


class AssertionGrantProvider(_DPoPFlow):
    """RFC 7523 JWT-bearer grant after the usual discovery: no user, no redirect.

    A failed grant is reported, never retried with another grant type.
    """

    def __init__(
        self,
        server_url: str,
        settings: OAuthClientSettings,
        storage: StoreAdapter,
        assertion_source: AssertionSource | None,
    ) -> None:
        self.settings = settings
        metadata = OAuthClientMetadata(
            client_name=settings.client_name,
            redirect_uris=None,
            grant_types=[JWT_BEARER_GRANT_TYPE],
            response_types=[],
            scope=settings.scope,
            token_endpoint_auth_method=settings.token_endpoint_auth_method
            or ("client_secret_basic" if settings.client_secret else "none"),
        )
        super().__init__(server_url, metadata, storage)
        self.assertion_source = assertion_source
        self._dpop_setup(settings.dpop)

    async def _initialize(self) -> None:
        await super()._initialize()
        s = self.settings
        if s.client_id:
            self.context.client_info = OAuthClientInformationFull(
                client_id=s.client_id,
                client_secret=s.client_secret,
                redirect_uris=None,
                grant_types=[JWT_BEARER_GRANT_TYPE],
                token_endpoint_auth_method=self.context.client_metadata.token_endpoint_auth_method,
            )

    async def _perform_authorization(self) -> httpx2.Request:
        if self.assertion_source is None:
            raise OAuthFlowError("no assertion source configured")
        issuer = str(self.context.oauth_metadata.issuer) if self.context.oauth_metadata else None
        if issuer is None:
            raise OAuthFlowError(
                "the authorization server publishes no metadata: cannot use the JWT-bearer grant"
            )
        resource = self.context.get_resource_url()
        assertion = await self.assertion_source(issuer, resource)
        data: dict[str, str] = {
            "grant_type": JWT_BEARER_GRANT_TYPE,
            "assertion": assertion,
            "resource": resource,
        }
        if self.context.client_metadata.scope:
            data["scope"] = self.context.client_metadata.scope
        if self.context.client_info is not None:
            data["client_id"] = self.context.client_info.client_id
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        data, headers = self.context.prepare_token_auth(data, headers)
        return httpx2.Request("POST", self._get_token_endpoint(), data=data, headers=headers)

    async def _refresh_token(self) -> httpx2.Request:
        # A JWT-bearer grant is renewed by presenting a fresh assertion, not a refresh token.
        return await self._perform_authorization()


def _workload_assertion(opts: OAuthClientSettings) -> AssertionSource:
    async def source(issuer: str, resource: str) -> str:
        if opts.assertion_file is not None:
            return opts.assertion_file.read_text().strip()
        assert opts.assertion is not None
        return opts.assertion

    return source


def _id_jag_source(opts: OAuthClientSettings, provider: AssertionGrantProvider) -> AssertionSource:
    """Exchange the user's ID token at the IdP for an ID-JAG naming the MCP server's AS and resource."""
    idp = opts.identity_provider
    assert idp is not None

    async def source(issuer: str, resource: str) -> str:
        id_token = idp.id_token_file.read_text().strip() if idp.id_token_file else idp.id_token
        if not id_token:
            raise OAuthFlowError("identity_provider needs id_token or id_token_file")
        data = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "requested_token_type": ID_JAG_TYPE,
            "subject_token": id_token,
            "subject_token_type": ID_TOKEN_TYPE,
            "audience": issuer,
            "resource": resource,
            "client_id": idp.client_id,
        }
        if opts.scope:
            data["scope"] = opts.scope
        if idp.client_secret:
            data["client_secret"] = idp.client_secret
        async with httpx2.AsyncClient(timeout=30.0) as http:
            response = await http.post(idp.token_endpoint, data=data)
        if response.status_code != 200:
            raise OAuthTokenError(
                f"the identity provider refused the token exchange ({response.status_code})"
            )
        token = response.json().get("access_token")
        if not isinstance(token, str):
            raise OAuthTokenError("the identity provider's token exchange returned no ID-JAG")
        return token

    return source
