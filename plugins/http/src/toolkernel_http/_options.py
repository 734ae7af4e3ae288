"""Validated options of the HTTP transports, server and client side."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class HTTPServerOptions(BaseModel):
    """How the HTTP endpoints behave; ``ServeOptions.extra`` is validated into this."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    stateless: bool = Field(
        False, description="No Mcp-Session-Id: every POST stands alone (natural for 2026-07-28 clients)."
    )
    json_response: bool = Field(
        False, description="Answer each POST with one JSON body instead of an SSE stream."
    )
    resumable: bool = Field(
        True, description="Store stream events so a client can resume with Last-Event-ID (stateful only)."
    )
    event_store: Any = Field(
        None,
        description="An mcp EventStore backing resumability; default: an InMemoryEventStore per app.",
    )
    shared_state: str | None = Field(
        None,
        description="URL of the store replicas share (redis://HOST:PORT/DB with toolkernel-redis): "
        "sessions, resumable streams, notifications and tasks then work whichever replica a request "
        "reaches. None: this process keeps them.",
    )
    event_retention_bytes: int = Field(
        64 * 1024 * 1024,
        gt=0,
        description="Bytes of events the default in-memory event store keeps, all sessions together.",
    )
    session_event_bytes: int = Field(
        8 * 1024 * 1024,
        gt=0,
        description="Bytes of events the default event store keeps per session (its oldest go first).",
    )
    event_retention_s: float = Field(
        300.0, gt=0, description="Seconds the default event store keeps an event a client may resume from."
    )
    retry_ms: int | None = Field(
        1000, ge=0, description="SSE `retry` sent in priming events: how long clients wait to reconnect."
    )
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0, description="Largest accepted POST body (413).")
    session_idle_timeout: float | None = Field(
        1800.0, gt=0, description="Seconds an idle stateful session lives; None keeps it until DELETE."
    )
    max_sessions: int | None = Field(
        10_000, gt=0, description="Concurrent stateful sessions before new ones get 503; None: no limit."
    )
    max_sessions_per_client: int | None = Field(
        1_000,
        gt=0,
        description="Stateful sessions one client (token principal, else address) may hold; one more "
        "gets 429. None: no limit.",
    )
    forwarded_allow_ips: tuple[str, ...] | None = Field(
        None,
        description="Trusted proxies (IP addresses or networks, `*` for any; a list or one comma-separated "
        "string): from a peer among them the client is the X-Forwarded-For address (for the per-client "
        "quota, logs) and the scheme X-Forwarded-Proto. None: uvicorn's default, FORWARDED_ALLOW_IPS "
        "from the environment, else 127.0.0.1 and ::1.",
    )
    unused_session_timeout: float | None = Field(
        60.0,
        gt=0,
        description="Seconds a session that has made no request since initialize lives; None: only the "
        "idle timeout applies.",
    )
    dns_rebinding_protection: bool = Field(True, description="Check Host and Origin headers (421/403).")
    allowed_hosts: tuple[str, ...] | None = Field(
        None,
        description="Host values accepted; `name:*` allows any port. Default: from the bind host.",
    )
    allowed_origins: tuple[str, ...] | None = Field(
        None,
        description="Origin values accepted; `scheme://name:*`: any port. Default: from the hosts.",
    )
    insecure: bool = Field(
        False,
        description="Serve off loopback with no allowed_hosts and no authentication (any web page "
        "could drive the tools); `toolkernel serve --insecure`.",
    )
    cors: bool = Field(
        True,
        description="Answer CORS preflights from the allowed origins and expose Mcp-Session-Id to "
        "browser clients (any origin when Origin is not checked).",
    )
    auth: Any = Field(
        None,
        description="Require a token on the MCP endpoints: the name of a registered auth provider "
        "(toolkernel-oauth), or an object with protect(routes, path=, serving=) (its ResourceServer).",
    )
    legacy_sse: bool = Field(True, description="Also serve the 2024-11-05 SSE transport (GET sse_path).")
    sse_path: str = Field("/sse", pattern=r"^/", description="Path of the legacy SSE stream.")
    messages_path: str = Field("/messages/", pattern=r"^/", description="Path legacy SSE clients POST to.")
    header_timeout_s: float | None = Field(
        10.0,
        gt=0,
        description="Seconds a connection has to send complete request headers (408 after); None: no limit.",
    )
    max_header_bytes: int | None = Field(
        64 * 1024,
        gt=0,
        description="Bytes of request line and headers one request may send (431 after, before any "
        "body or token is read); None: no limit.",
    )
    max_headers: int | None = Field(
        100, gt=0, description="Request headers one request may send (431 past it); None: no limit."
    )
    max_connections: int | None = Field(
        1_000,
        gt=0,
        description="Open connections (each GET stream holds one); one more gets 503. None: no limit.",
    )
    max_streams_per_session: int | None = Field(
        100,
        gt=0,
        description="Requests in flight plus GET streams one stateful session may hold; one more gets 429.",
    )
    log_level: str = Field("warning", description="uvicorn's log level when run by the http/sse transports.")
    shutdown_grace_s: int = Field(5, ge=0, description="Seconds open connections get to finish on stop.")

    @field_validator("forwarded_allow_ips", mode="before")
    @classmethod
    def _split_forwarded_allow_ips(cls, value: Any) -> Any:
        """Accept uvicorn's form too: one string, the entries separated by commas."""
        return [entry.strip() for entry in value.split(",")] if isinstance(value, str) else value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _check_forwarded_allow_ips(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Refuse what uvicorn would silently keep as a name no peer address ever equals."""
        if value is None or value == ("*",):
            return value
        for entry in value:
            if entry == "*":
                raise ValueError("'*' (trust every peer) must be the only entry")
            try:
                ipaddress.ip_network(entry) if "/" in entry else ipaddress.ip_address(entry)
            except ValueError:
                raise ValueError(f"{entry!r} is neither an IP address nor an IP network") from None
        return value

    @model_validator(mode="after")
    def _check_event_store(self) -> HTTPServerOptions:
        if self.event_store is None:
            return self  # nothing to check: keep the SDK unimported while settings are validated
        from mcp.server.streamable_http import EventStore

        if not isinstance(self.event_store, EventStore):
            raise ValueError("event_store must be an mcp.server.streamable_http.EventStore")
        return self


class HTTPClientOptions(BaseModel):
    """Client options beyond ``ClientTransportOptions``, read from its ``extra``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    transport: Literal["auto", "streamable", "sse"] = Field(
        "auto", description="auto: Streamable HTTP, falling back to legacy SSE on a 400/404/405."
    )
    http_client_factory: Callable[..., Any] | None = Field(
        None, description="`factory(headers=, timeout=, auth=)` returning an httpx2.AsyncClient."
    )
    auth: Any = Field(None, description="An httpx2.Auth (OAuth providers, bearer tokens).")
    terminate_on_close: bool = Field(True, description="DELETE the session when the client closes.")
    max_sse_event_size: int | None = Field(
        16 * 1024 * 1024, gt=0, description="Largest SSE event accepted (bytes); None: no limit."
    )
    max_json_body_size: int | None = Field(
        64 * 1024 * 1024,
        gt=0,
        description="Largest JSON response body accepted (bytes); a bigger one fails its request.",
    )
