"""The validators on their own: static tokens, introspection (bounded cache), a chain, the JWT cache,
settings from toolkernel.toml, and the token store's file mode."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolkernel import Kernel
from toolkernel.errors import ConfigError
from toolkernel_oauth import FileTokenStore, MemoryTokenStore
from toolkernel_oauth import plugin as oauth_plugin
from toolkernel_oauth.resource import ResourceServer
from toolkernel_oauth.settings import (
    IntrospectionSettings,
    JWTSettings,
    StaticToken,
    StaticTokenSettings,
)
from toolkernel_oauth.validators import Chain, Introspection, JWTValidator, StaticTokens

from .conftest import ISSUER, Issuer, serving_app

pytestmark = pytest.mark.anyio


async def test_static_tokens() -> None:
    validator = StaticTokens(StaticTokenSettings(tokens={"t1": StaticToken(subject="ada", scopes=("a",))}))
    info = await validator.verify("t1")
    assert info is not None
    assert (info.subject, info.client_id, info.scopes) == ("ada", "static", ("a",))
    assert await validator.verify("t2") is None
    assert await validator.verify("") is None


def introspection_app(active: dict[str, dict[str, Any]], calls: list[str]) -> Starlette:
    async def introspect(request: Request) -> JSONResponse:
        form = await request.form()
        token = str(form["token"])
        calls.append(token)
        assert request.headers["authorization"].startswith("Basic ")
        return JSONResponse({"active": True, **active[token]} if token in active else {"active": False})

    return Starlette(routes=[Route("/introspect", introspect, methods=["POST"])])


async def test_introspection_caches_active_answers_within_bounds() -> None:
    later = int(time.time()) + 300
    active = {t: {"sub": t, "client_id": "c", "scope": "mcp", "exp": later} for t in ("a", "b", "c")}
    calls: list[str] = []
    async with serving_app(introspection_app(active, calls)) as base:
        settings = IntrospectionSettings(
            endpoint=f"{base}/introspect", client_id="rs", client_secret="s", cache_s=60, cache_size=2
        )
        validator = Introspection(settings)
        for token in ("a", "a", "b", "c", "a"):
            info = await validator.verify(token)
            assert info is not None
            assert info.subject == token
            assert info.scopes == ("mcp",)
        # "a" was cached, then pushed out by "b" and "c" (two entries at most), so asked again.
        assert calls == ["a", "b", "c", "a"]
        assert len(validator._cache) == 2
        assert await validator.verify("revoked") is None
        del active["b"]
        assert await validator.verify("b") is None  # "b" fell out of the cache: the server says no


async def test_chain_tries_each_validator_in_order(issuer: Issuer) -> None:
    static = StaticTokens(StaticTokenSettings(tokens={"dev": StaticToken(subject="dev")}))
    jwt = JWTValidator(JWTSettings(issuer=ISSUER, jwks=issuer.jwks()))
    chain = Chain([static, jwt])
    info = await chain.verify("dev")
    assert info is not None
    assert info.subject == "dev"
    token = issuer.token("http://x/mcp")
    info = await chain.verify(token)
    assert info is not None
    assert info.subject == "ada"
    assert await chain.verify("neither") is None


async def test_jwt_cache_never_outlives_the_token(issuer: Issuer) -> None:
    validator = JWTValidator(JWTSettings(issuer=ISSUER, jwks=issuer.jwks(), leeway_s=0, cache_s=600))
    token = issuer.token("http://x/mcp", exp=int(time.time()) + 1)
    assert await validator.verify(token) is not None
    assert await validator.verify(token) is not None  # remembered
    await anyio.sleep(1.1)
    assert await validator.verify(token) is None


async def test_validators_take_their_settings_from_toolkernel_toml(tmp_path: Path, issuer: Issuer) -> None:
    config = tmp_path / "toolkernel.toml"
    config.write_text(
        '[plugins.oauth]\nauthorization_servers = ["https://as.test"]\nchain = ["static-tokens", "jwt"]\n'
        '[plugins.oauth.static.tokens.dev]\nsubject = "dev"\n'
        f'[plugins.oauth.jwt]\nissuer = "{ISSUER}"\njwks_uri = "http://127.0.0.1:9/jwks"\n'
    )
    kernel = Kernel.from_config(config, plugins=[oauth_plugin], load_entry_points=False)
    guard = ResourceServer.from_kernel(kernel, "chain")
    assert guard.settings.authorization_servers == ("https://as.test",)
    info = await guard.verify("dev", "http://127.0.0.1/mcp")
    assert info is not None
    assert info.subject == "dev"
    with pytest.raises(ConfigError, match="introspection"):
        ResourceServer.from_kernel(kernel, "introspection")


async def test_token_file_is_0600_and_replaced_atomically(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "conf" / "tokens.json")
    await store.set("http://a/mcp", {"tokens": {"access_token": "x"}})
    await store.set("http://b/mcp", {"tokens": {"access_token": "y"}})
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert await store.get("http://a/mcp") == {"tokens": {"access_token": "x"}}
    await store.delete("http://a/mcp")
    assert store.keys() == ["http://b/mcp"]
    assert [p.name for p in store.path.parent.iterdir()] == ["tokens.json"]  # no temporary left behind
    memory = MemoryTokenStore()
    await memory.set("k", {"v": 1})
    assert await memory.get("k") == {"v": 1}
    await memory.delete("k")
    assert await memory.get("k") is None


async def test_rfc9068_checks_are_on_by_default_and_can_be_turned_off() -> None:
    """``typ`` must be ``at+jwt`` and ``sub`` present (RFC 9068), unless ``rfc9068 = false``."""
    issuer = Issuer()
    jwks = issuer.jwks()
    strict = JWTValidator(JWTSettings(issuer=ISSUER, jwks=jwks))
    lax = JWTValidator(JWTSettings(issuer=ISSUER, jwks=jwks, rfc9068=False))
    id_token_shaped = issuer.token("https://r.test/mcp", typ="JWT", sub=None)
    assert await strict.verify(issuer.token("https://r.test/mcp")) is not None
    assert await strict.verify(issuer.token("https://r.test/mcp", typ="application/at+jwt")) is not None
    assert await strict.verify(issuer.token("https://r.test/mcp", typ="JWT")) is None
    assert await strict.verify(issuer.token("https://r.test/mcp", sub=None)) is None
    assert await strict.verify(id_token_shaped) is None
    info = await lax.verify(id_token_shaped)
    assert info is not None
    assert info.subject is None
