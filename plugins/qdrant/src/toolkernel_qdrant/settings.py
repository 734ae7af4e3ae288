"""Configuration of the Qdrant vector store and the factory the plugin registers.

This module imports only pydantic; the Qdrant libraries load when a store is created.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from toolkernel.errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from toolkernel.vectors import VectorStore

Mode = Literal["edge", "local", "server"]


class QdrantSettings(BaseModel):
    """Where the vectors live: a Qdrant server or Qdrant Cloud by URL, or Qdrant embedded in-process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode | None = Field(
        None,
        description=(
            "'server': a Qdrant server or Qdrant Cloud at `url`; 'edge': the Qdrant engine embedded "
            "in-process (qdrant-edge-py, the default without a url); 'local': qdrant-client's pure-Python "
            "local mode (slower, for tests). Default: 'server' when `url` is set, else 'edge'."
        ),
    )
    url: str | None = Field(None, description="Server URL, e.g. http://localhost:6333 or a Qdrant Cloud URL.")
    api_key: SecretStr | None = Field(None, description="API key (Qdrant Cloud or a secured server).")
    path: Path | None = Field(
        None, description="Embedded modes: directory that keeps the data; unset keeps everything in memory."
    )
    prefer_grpc: bool = Field(False, description="Server mode: talk gRPC instead of REST.")
    timeout: float = Field(10.0, gt=0, description="Server mode: seconds per request.")
    collection_prefix: str = Field(
        "", pattern=r"^[A-Za-z0-9_-]*$", description="Prepended to index names to form collection names."
    )

    @model_validator(mode="after")
    def _consistent(self) -> QdrantSettings:
        """Reject combinations that would silently ignore a setting."""
        mode = self.resolved_mode
        if mode == "server":
            if not self.url:
                raise ValueError("mode 'server' needs a url")
            if self.path is not None:
                raise ValueError("path applies to the embedded modes only, not to a server url")
        else:
            if self.url or self.api_key is not None:
                raise ValueError(f"url and api_key apply to mode 'server', not to {mode!r}")
            if self.prefer_grpc:
                raise ValueError(f"prefer_grpc applies to mode 'server', not to {mode!r}")
        return self

    @property
    def resolved_mode(self) -> Mode:
        """The mode in force: the explicit one, or 'server' with a url and 'edge' without."""
        if self.mode is not None:
            return self.mode
        return "server" if self.url else "edge"


def create_store(**options: Any) -> VectorStore:
    """Build a Qdrant vector store from options, the fields of :class:`QdrantSettings`."""
    try:
        settings = QdrantSettings(**options)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"vector store 'qdrant': {problems}") from None
    return store_from_settings(settings)


def store_from_settings(settings: QdrantSettings) -> VectorStore:
    """The store the kernel builds from the validated ``[plugins.qdrant]`` settings and call options."""
    if settings.resolved_mode == "edge":
        try:
            from toolkernel_qdrant.edge_store import QdrantEdgeStore
        except ImportError as exc:
            raise MissingDependencyError(
                f"vector store 'qdrant' in mode 'edge' needs qdrant-edge-py ({exc}): "
                "pip install qdrant-edge-py"
            ) from exc
        return QdrantEdgeStore(settings)
    try:
        from toolkernel_qdrant.client_store import QdrantClientStore
    except ImportError as exc:
        raise MissingDependencyError(
            f"vector store 'qdrant' needs qdrant-client ({exc}): pip install qdrant-client"
        ) from exc
    return QdrantClientStore(settings)
