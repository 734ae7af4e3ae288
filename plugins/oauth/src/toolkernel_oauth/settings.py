"""The server side's settings: the ``[plugins.oauth]`` table of ``toolkernel.toml``.

One model holds the protected resource's description (RFC 9728) and one section per token
validator; ``serve --auth NAME`` (or ``[plugins.http] auth = "NAME"``) picks the validator.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StaticToken(BaseModel):
    """Who a fixed token stands for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subject: str = Field(description="The caller this token identifies.")
    client_id: str = Field("static", description="The client it is reported as.")
    scopes: tuple[str, ...] = Field((), description="Scopes it grants.")


class StaticTokenSettings(BaseModel):
    """Fixed bearer tokens, for development and tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: dict[str, StaticToken] = Field(default_factory=dict, description="Token → who it stands for.")


class JWTSettings(BaseModel):
    """JWT access tokens (RFC 9068) signed by keys the authorization server publishes (JWKS)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str = Field(description="The `iss` every token must carry.")
    jwks_uri: str | None = Field(None, description="Where the signing keys are published.")
    jwks: dict[str, object] | None = Field(None, description="The keys themselves (instead of jwks_uri).")
    audience: tuple[str, ...] = Field(
        (), description="Accepted `aud` values; default: this resource's URL (RFC 8707)."
    )
    algorithms: tuple[str, ...] = Field(
        ("RS256", "PS256", "ES256", "EdDSA"),
        description="Signature algorithms accepted; `none` and HMAC never are unless listed.",
    )
    rfc9068: bool = Field(
        True,
        description="Require what RFC 9068 asks of a JWT access token: header `typ` `at+jwt` (or "
        "`application/at+jwt`) and a `sub` claim. Off: accept ID-token-shaped JWTs (`typ: JWT`, no `sub`).",
    )
    leeway_s: int = Field(30, ge=0, description="Clock skew allowed on exp, nbf and iat.")
    jwks_cache_s: float = Field(300.0, gt=0, description="How long fetched keys are trusted.")
    jwks_refresh_min_s: float = Field(
        30.0, ge=0, description="Least time between two fetches caused by an unknown `kid`."
    )
    cache_s: float = Field(
        60.0, ge=0, description="How long a verified token is remembered (never past its exp); 0: off."
    )
    cache_size: int = Field(4096, gt=0, description="Verified tokens remembered at most (LRU).")


class IntrospectionSettings(BaseModel):
    """Opaque tokens checked at the authorization server's RFC 7662 introspection endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str = Field(description="The introspection endpoint.")
    client_id: str | None = Field(None, description="This resource server's client id there.")
    client_secret: str | None = Field(None, description="Its secret (sent with HTTP Basic).")
    cache_s: float = Field(30.0, ge=0, description="How long an active answer is reused; 0: ask every time.")
    cache_size: int = Field(1024, gt=0, description="Answers kept at most (least recently used dropped).")
    timeout_s: float = Field(10.0, gt=0, description="Seconds before an introspection call gives up.")


class OAuthServerSettings(BaseModel):
    """A protected resource: what it tells clients (RFC 9728) and how it checks tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resource: str | None = Field(
        None,
        description="This server's canonical URL (RFC 8707); default: the URL each request came to.",
    )
    authorization_servers: tuple[str, ...] = Field(
        (), description="Issuers of the authorization servers clients should use."
    )
    scopes_supported: tuple[str, ...] | None = Field(None, description="Scopes advertised in the metadata.")
    required_scopes: tuple[str, ...] = Field((), description="Scopes every request needs.")
    resource_name: str | None = Field(None, description="A human-readable name for the metadata.")
    static: StaticTokenSettings | None = Field(None, description="The static-tokens validator.")
    jwt: JWTSettings | None = Field(None, description="The jwt validator.")
    introspection: IntrospectionSettings | None = Field(None, description="The introspection validator.")
    chain: tuple[str, ...] = Field(
        (), description="The chain validator: these validators (static-tokens, jwt, introspection) in order."
    )
