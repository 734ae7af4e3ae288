"""DPoP (RFC 9449): a key held by the client, and a signed proof for each request it makes.

A proof is a JWT with the public key in its header, the request's method and URL, a fresh
``jti``, and (for a resource request) the hash of the access token; servers that demand a
nonce get it back in the next proof.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from urllib.parse import urlsplit, urlunsplit

from joserfc import jwt
from joserfc.jwk import ECKey


class DPoPKey:
    """An ES256 key pair the client proves possession of; a new one per client by default."""

    def __init__(self, key: ECKey | None = None) -> None:
        self.key = key or ECKey.generate_key("P-256")
        self.public_jwk = self.key.as_dict(private=False)
        self.nonces: dict[str, str] = {}
        """Last nonce each server origin asked for."""

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A proof for one request to ``url``; ``access_token`` binds it to that token (``ath``)."""
        htu = _without_query(url)
        claims: dict[str, object] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": htu,
            "iat": int(time.time()),
        }
        nonce = self.nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            digest = hashlib.sha256(access_token.encode("ascii")).digest()
            claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.public_jwk}
        return jwt.encode(header, claims, self.key)

    def remember_nonce(self, url: str, nonce: str | None) -> bool:
        """Keep the nonce a server sent; whether it is new (worth one retry)."""
        if not nonce:
            return False
        origin = _origin(url)
        changed = self.nonces.get(origin) != nonce
        self.nonces[origin] = nonce
        return changed


def _without_query(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
