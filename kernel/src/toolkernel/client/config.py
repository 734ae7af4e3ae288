"""What an :class:`~toolkernel.client.MCPClient` connects to, and how hard it tries.

Everything here is a frozen pydantic model validated when the client is built, so a
mistake fails at start-up with the path of the bad field (``servers.docs.url: ...``),
never on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from toolkernel.errors import ConfigError

__all__ = [
    "ContentKind",
    "DEFAULT_OUTPUT_HANDLING",
    "Destination",
    "HTTPServerConfig",
    "MCPClientConfig",
    "ReliabilityPolicy",
    "RestartPolicy",
    "ServerConfig",
    "StdioServerConfig",
    "check_server_name",
    "format_errors",
    "validate_config",
    "validate_server",
]

ContentKind = Literal["text", "image", "audio", "resource", "resource_link"]
Destination = Literal["content", "artifact"]

DEFAULT_OUTPUT_HANDLING: dict[ContentKind, Destination] = {
    "text": "content",
    "image": "artifact",
    "audio": "artifact",
    "resource": "artifact",
    "resource_link": "content",
}
"""Where each tool-result block goes by default: text for the model, media and files aside."""


class RestartPolicy(BaseModel):
    """How a lost connection is re-established: attempts and an exponential backoff between them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(5, ge=0, description="Reconnects in a row before the server stays failed.")
    delay: float = Field(0.5, ge=0, description="Seconds before the first reconnect.")
    max_delay: float = Field(30.0, ge=0, description="Longest wait between two reconnects.")
    multiplier: float = Field(2.0, ge=1, description="Each wait is the previous one times this.")
    jitter: float = Field(0.1, ge=0, le=1, description="Random share added to or taken from each wait.")

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before reconnect number ``attempt`` (1-based), jittered, capped."""
        import random

        base = min(self.max_delay, self.delay * self.multiplier ** max(0, attempt - 1))
        return max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))


class ReliabilityPolicy(BaseModel):
    """The one reliability policy every server shares (a server may override ``restart``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stdio_restart: RestartPolicy = Field(
        default_factory=RestartPolicy, description="Respawning a stdio server that exited or broke."
    )
    http_reconnect: RestartPolicy = Field(
        default_factory=lambda: RestartPolicy(max_attempts=10),
        description="Reconnecting to an HTTP server that went away.",
    )
    heartbeat_interval: float | None = Field(
        10.0,
        gt=0,
        description="Seconds between liveness probes of an idle HTTP connection; None: no probes.",
    )
    heartbeat_stdio: bool = Field(False, description="Probe stdio servers too (their exit is seen at once).")
    progress_extends_timeout: bool = Field(
        True, description="A progress notification restarts the request's timeout, up to max_timeout."
    )
    max_timeout: float = Field(600.0, gt=0, description="Hard cap on one request, however much progress.")
    tool_retries: int = Field(
        2,
        ge=0,
        description="Automatic retries after a lost connection, only for tools annotated "
        "idempotentHint or readOnlyHint.",
    )


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float | None = Field(None, gt=0, description="Default request timeout (s) for this server.")
    connect_timeout: float | None = Field(None, gt=0, description="Seconds to connect and discover.")
    restart: RestartPolicy | None = Field(None, description="Overrides the policy's restart for this server.")
    protocol: str = Field(
        "auto",
        description="auto (discover, fall back to initialize), legacy, or a version such as 2026-07-28.",
    )

    @field_validator("protocol")
    @classmethod
    def _check_protocol(cls, value: str) -> str:
        if value not in ("auto", "legacy") and not (len(value) == 10 and value[:4].isdigit()):
            raise ValueError("use auto, legacy or a protocol version such as 2026-07-28")
        return value


class StdioServerConfig(_ServerBase):
    """A server spawned as a subprocess, spoken to over its stdin and stdout."""

    command: str = Field(min_length=1, description="Executable to run.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] | None = Field(None, description="Extra environment variables (added to ours).")
    cwd: str | None = Field(None, description="Working directory.")
    stderr: Literal["inherit", "devnull"] = Field("inherit", description="Where the server's stderr goes.")
    exit_grace: float = Field(
        2.0,
        ge=0,
        description="Seconds the server gets to exit once its stdin is closed, before it is terminated.",
    )

    @property
    def kind(self) -> Literal["stdio", "http"]:
        return "stdio"


class HTTPServerConfig(_ServerBase):
    """A server reached at a URL: Streamable HTTP, legacy SSE, or auto (the one that answers)."""

    url: str = Field(description="http(s) URL of the MCP endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers (auth tokens).")
    transport: Literal["auto", "streamable-http", "sse"] = Field(
        "auto", description="auto: Streamable HTTP, falling back to legacy SSE."
    )
    sse_read_timeout: float = Field(300.0, gt=0, description="Seconds an SSE stream may stay silent.")
    auth: dict[str, Any] | None = Field(
        None,
        description="How to authorize: {type: oauth, ...} (toolkernel-oauth) or another registered "
        "client auth type; the plugin validates the rest.",
    )

    @field_validator("auth")
    @classmethod
    def _check_auth(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not isinstance(value.get("type"), str):
            raise ValueError("needs a `type`, e.g. {type: oauth}")
        return value

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest:
            raise ValueError("must be an http:// or https:// URL")
        return value

    @property
    def kind(self) -> Literal["stdio", "http"]:
        return "http"


def _server_kind(value: Any) -> str | None:
    if isinstance(value, StdioServerConfig):
        return "stdio-server"
    if isinstance(value, HTTPServerConfig):
        return "http-server"
    if isinstance(value, Mapping):
        if "url" in value:
            return "http-server"
        if "command" in value:
            return "stdio-server"
    return None


ServerConfig = Annotated[
    Annotated[StdioServerConfig, Tag("stdio-server")] | Annotated[HTTPServerConfig, Tag("http-server")],
    Discriminator(
        _server_kind,
        custom_error_type="server_kind",
        custom_error_message="a server needs either `command` (stdio) or `url` (HTTP)",
    ),
]


class MCPClientConfig(BaseModel):
    """One client for many MCP servers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, ServerConfig] = Field(
        default_factory=dict, description="Server name → how to reach it."
    )
    id: str | None = Field(
        None,
        min_length=1,
        description="Names this client; two live clients with one config need distinct ids.",
    )
    timeout: float = Field(60.0, gt=0, description="Default request timeout (s) for every server.")
    connect_timeout: float = Field(30.0, gt=0, description="Default seconds to connect and discover.")
    prefix_tool_name_with_server_name: bool = Field(True, description="Tool names become server_tool.")
    additional_tool_name_prefix: str | None = Field(None, description="Put before every tool name.")
    throw_on_load_error: bool = Field(
        False, description="A server that cannot be loaded raises; otherwise it is logged and left out."
    )
    output_handling: dict[ContentKind, Destination] = Field(
        default_factory=lambda: dict(DEFAULT_OUTPUT_HANDLING),
        description="Per content type: into the tool message's content, or aside as an artifact.",
    )
    policy: ReliabilityPolicy = Field(default_factory=ReliabilityPolicy)

    @field_validator("servers")
    @classmethod
    def _check_names(cls, servers: dict[str, Any]) -> dict[str, Any]:
        for name in servers:
            check_server_name(name)
        return servers

    @field_validator("output_handling", mode="before")
    @classmethod
    def _fill_output_handling(cls, value: Any) -> Any:
        if isinstance(value, str):
            return dict.fromkeys(DEFAULT_OUTPUT_HANDLING, value)
        if isinstance(value, Mapping):
            return {**DEFAULT_OUTPUT_HANDLING, **value}
        return value


def check_server_name(name: str) -> str:
    """A server name is a non-empty identifier: letters, digits, ``-`` and ``_``."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", name):
        raise ValueError(f"server name {name!r}: use 1-64 letters, digits, '-' or '_' (not first)")
    return name


def validate_config(data: MCPClientConfig | Mapping[str, Any]) -> MCPClientConfig:
    """``data`` as a config, or :class:`ConfigError` naming each bad field's path."""
    if isinstance(data, MCPClientConfig):
        return data
    try:
        return MCPClientConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"MCPClient config is invalid: {format_errors(exc)}") from None


def validate_server(name: str, data: ServerConfig | Mapping[str, Any]) -> ServerConfig:
    """One server's config, or :class:`ConfigError` naming the bad field's path."""
    try:
        check_server_name(name)
    except ValueError as exc:
        raise ConfigError(f"MCPClient config is invalid: servers: {exc}") from None
    if isinstance(data, StdioServerConfig | HTTPServerConfig):
        return data
    try:
        config = MCPClientConfig.model_validate({"servers": {name: data}})
    except ValidationError as exc:
        raise ConfigError(f"MCPClient config is invalid: {format_errors(exc)}") from None
    return config.servers[name]


def format_errors(exc: ValidationError) -> str:
    """``servers.x.url: must be ...; timeout: ...`` (variant tags left out of the paths)."""
    parts = []
    for error in exc.errors(include_url=False):
        loc = [str(p) for p in error["loc"] if p not in ("stdio-server", "http-server")]
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc) or '(root)'}: {message}")
    return "; ".join(parts)
