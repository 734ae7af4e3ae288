"""Token validators: each turns a bearer token into :class:`~toolkernel.AuthInfo`, or ``None``.

They are the ``auth providers`` this plugin registers (``static-tokens``, ``jwt``,
``introspection``, ``chain``). A validator answers only "is this token good, and whose is
it"; the audience (this resource, RFC 8707) is checked by the resource server against the
``aud`` the validator reports, so one validator serves any URL the server is reached at.
Why a token was refused is left in :data:`refusal` (for the resource server's one log line
per refused request). No token is ever logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import anyio
import httpx2

from toolkernel.auth import AuthInfo, AuthProvider
from toolkernel_oauth.settings import (
    IntrospectionSettings,
    JWTSettings,
    OAuthServerSettings,
    StaticTokenSettings,
)

logger = logging.getLogger("toolkernel.oauth")

refusal: ContextVar[str | None] = ContextVar("toolkernel_oauth_refusal", default=None)
"""Why the last token this task verified was refused, in words that hold no token material."""

AT_JWT_TYPES = ("at+jwt", "application/at+jwt")
"""The JWT ``typ`` header values RFC 9068 §2.1 gives access tokens."""


def _refuse(reason: str) -> None:
    """Note why a token is refused; the validator then answers ``None``."""
    refusal.set(reason)


def _scopes(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class StaticTokens:
    """Fixed tokens from settings; compared in constant time by their SHA-256."""

    def __init__(self, settings: StaticTokenSettings) -> None:
        self._by_digest = {_digest(t): who for t, who in settings.tokens.items()}

    async def verify(self, token: str) -> AuthInfo | None:
        digest = _digest(token)
        for known, who in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return AuthInfo(subject=who.subject, client_id=who.client_id, scopes=who.scopes)
        _refuse("unknown token")
        return None


class JWTValidator:
    """Signed JWT access tokens: keys from a JWKS (cached, re-fetched on an unknown ``kid``),
    an algorithm allow-list, ``iss``, ``exp``/``nbf``/``iat`` with leeway, ``aud`` when
    configured (otherwise the resource server checks it is this resource), and by default
    RFC 9068's ``typ: at+jwt`` and ``sub`` (``rfc9068 = false`` turns those two off)."""

    def __init__(self, settings: JWTSettings, *, http: httpx2.AsyncClient | None = None) -> None:
        if settings.jwks is None and settings.jwks_uri is None:
            raise ValueError("jwt validator: set jwks_uri (or jwks)")
        bad = {a for a in settings.algorithms if a.lower() == "none"}
        if bad:
            raise ValueError("jwt validator: `none` is not a signature algorithm")
        from joserfc import jwt
        from joserfc.jwk import KeySet

        self.settings = settings
        self._jwt = jwt
        self._keys: KeySet | None = KeySet.import_key_set(settings.jwks) if settings.jwks else None  # type: ignore[arg-type]
        self._fetched_at = -float("inf")
        self._lock = anyio.Lock()
        self._http = http
        self._verified: OrderedDict[bytes, tuple[float, AuthInfo]] = OrderedDict()
        self._registry = jwt.JWTClaimsRegistry(
            leeway=settings.leeway_s,
            iss={"essential": True, "value": settings.issuer},
            exp={"essential": True},
        )

    async def _key_set(self, *, refresh: bool = False) -> Any:
        """The JWKS, fetched when stale or, at most every ``jwks_refresh_min_s``, when asked to refresh."""
        s = self.settings
        if s.jwks_uri is None:
            return self._keys
        now = time.monotonic()
        stale = now - self._fetched_at > s.jwks_cache_s
        may_refresh = refresh and now - self._fetched_at > s.jwks_refresh_min_s
        if self._keys is not None and not stale and not may_refresh:
            return self._keys
        async with self._lock:
            if self._fetched_at > now:  # another task fetched while this one waited
                return self._keys
            from joserfc.jwk import KeySet

            client = self._http or httpx2.AsyncClient(timeout=10.0)
            try:
                response = await client.get(s.jwks_uri)
                response.raise_for_status()
                self._keys = KeySet.import_key_set(response.json())
                self._fetched_at = time.monotonic()
            except (httpx2.HTTPError, ValueError) as exc:
                logger.warning("jwt validator: cannot fetch keys from %s: %s", s.jwks_uri, type(exc).__name__)
            finally:
                if self._http is None:
                    await client.aclose()
        return self._keys

    async def verify(self, token: str) -> AuthInfo | None:
        """The token's caller; a token verified in the last ``cache_s`` seconds is not verified again."""
        s = self.settings
        if s.cache_s <= 0:
            return await self._verify(token)
        key = _digest(token)
        hit = self._verified.get(key)
        now = time.monotonic()
        if hit is not None:
            until, known = hit
            if now < until and (known.expires_at is None or known.expires_at + s.leeway_s > time.time()):
                self._verified.move_to_end(key)
                return known
            del self._verified[key]
        info = await self._verify(token)
        if info is not None:
            self._verified[key] = (now + s.cache_s, info)
            while len(self._verified) > s.cache_size:
                self._verified.popitem(last=False)
        return info

    async def _verify(self, token: str) -> AuthInfo | None:
        from joserfc.errors import InvalidKeyIdError, JoseError

        keys = await self._key_set()
        if keys is None:
            _refuse("no signing keys (JWKS unreachable)")
            return None
        try:
            try:
                decoded = self._jwt.decode(token, keys, algorithms=list(self.settings.algorithms))
            except InvalidKeyIdError:
                keys = await self._key_set(refresh=True)
                decoded = self._jwt.decode(token, keys, algorithms=list(self.settings.algorithms))
            claims = decoded.claims
            self._registry.validate(claims)
        except (JoseError, ValueError) as exc:
            _refuse(f"jwt: {type(exc).__name__}")
            return None
        if self.settings.rfc9068:
            typ = str(decoded.header.get("typ", "")).lower()
            if typ not in AT_JWT_TYPES:
                _refuse(f"jwt: typ {typ or 'missing'!r} is not at+jwt (RFC 9068)")
                return None
            if not isinstance(claims.get("sub"), str) or not claims["sub"]:
                _refuse("jwt: no sub claim (RFC 9068)")
                return None
        if self.settings.audience and not _audience_matches(claims.get("aud"), self.settings.audience):
            _refuse("jwt: aud is not an accepted audience")
            return None
        if "aud" not in claims:
            _refuse("jwt: no aud claim")
            return None
        return _info(claims)


def _audience_matches(aud: Any, accepted: Sequence[str]) -> bool:
    values = [aud] if isinstance(aud, str) else list(aud) if isinstance(aud, list) else []
    return any(v in accepted for v in values)


def _info(claims: dict[str, Any]) -> AuthInfo:
    """AuthInfo from JWT or introspection claims (RFC 9068 / RFC 7662 names)."""
    scopes = _scopes(claims.get("scope")) or _scopes(claims.get("scp"))
    exp = claims.get("exp")
    return AuthInfo(
        subject=str(claims["sub"]) if claims.get("sub") is not None else None,
        client_id=str(claims.get("client_id") or claims.get("azp") or "") or None,
        scopes=scopes,
        expires_at=int(exp) if isinstance(exp, int | float) else None,
        claims=claims,
    )


class Introspection:
    """Opaque tokens asked about at an RFC 7662 endpoint; active answers cached briefly, LRU-bounded."""

    def __init__(self, settings: IntrospectionSettings, *, http: httpx2.AsyncClient | None = None) -> None:
        self.settings = settings
        self._cache: OrderedDict[bytes, tuple[float, AuthInfo]] = OrderedDict()
        self._http = http

    async def verify(self, token: str) -> AuthInfo | None:
        s = self.settings
        key = _digest(token)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None:
            until, info = hit
            if now < until and (info.expires_at is None or info.expires_at > time.time()):
                self._cache.move_to_end(key)
                return info
            del self._cache[key]
        auth = (
            httpx2.BasicAuth(s.client_id, s.client_secret or "") if s.client_id else httpx2.USE_CLIENT_DEFAULT
        )
        client = self._http or httpx2.AsyncClient(timeout=s.timeout_s)
        try:
            response = await client.post(
                s.endpoint, data={"token": token, "token_type_hint": "access_token"}, auth=auth
            )
            body = response.json() if response.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as exc:
            logger.warning("introspection at %s failed: %s", s.endpoint, type(exc).__name__)
            _refuse(f"introspection failed: {type(exc).__name__}")
            return None
        finally:
            if self._http is None:
                await client.aclose()
        if not isinstance(body, dict) or body.get("active") is not True:
            _refuse("introspection: not active" if isinstance(body, dict) else "introspection: no answer")
            return None
        exp = body.get("exp")
        if isinstance(exp, int | float) and exp <= time.time():
            _refuse("introspection: expired")
            return None
        info = _info(body)
        if s.cache_s > 0:
            self._cache[key] = (now + s.cache_s, info)
            while len(self._cache) > s.cache_size:
                self._cache.popitem(last=False)
        return info


class Chain:
    """Validators tried in order; the first that accepts a token answers."""

    def __init__(self, validators: Sequence[AuthProvider]) -> None:
        self.validators = list(validators)

    async def verify(self, token: str) -> AuthInfo | None:
        for validator in self.validators:
            info = await validator.verify(token)
            if info is not None:
                return info
        return None


# -- factories (what register_auth_providers registers) -----------------------------------------


def _section(settings: Any, name: str, model: type[Any]) -> Any:
    """The validator's settings: the section of OAuthServerSettings, or the section model itself."""
    if isinstance(settings, model):
        return settings
    section = getattr(settings, name, None) if isinstance(settings, OAuthServerSettings) else None
    if section is None:
        raise ValueError(f"auth provider needs settings: add a [plugins.oauth.{name}] table")
    return section


def static_tokens(settings: Any) -> StaticTokens:
    """``static-tokens``: fixed tokens from ``[plugins.oauth.static]``."""
    return StaticTokens(_section(settings, "static", StaticTokenSettings))


def jwt_validator(settings: Any) -> JWTValidator:
    """``jwt``: JWT access tokens checked against ``[plugins.oauth.jwt]``."""
    return JWTValidator(_section(settings, "jwt", JWTSettings))


def introspection(settings: Any) -> Introspection:
    """``introspection``: opaque tokens asked about per ``[plugins.oauth.introspection]``."""
    return Introspection(_section(settings, "introspection", IntrospectionSettings))


FACTORIES: dict[str, Callable[[Any], AuthProvider]] = {
    "static-tokens": static_tokens,
    "jwt": jwt_validator,
    "introspection": introspection,
}


def chain(settings: Any) -> Chain:
    """``chain``: the validators ``[plugins.oauth] chain`` names, in order."""
    if not isinstance(settings, OAuthServerSettings) or not settings.chain:
        raise ValueError("chain needs [plugins.oauth] chain = [validator names]")
    unknown = [n for n in settings.chain if n not in FACTORIES]
    if unknown:
        raise ValueError(f"chain: unknown validators {unknown}; use {sorted(FACTORIES)}")
    return Chain([FACTORIES[name](settings) for name in settings.chain])
