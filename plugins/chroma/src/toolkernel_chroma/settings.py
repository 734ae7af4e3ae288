"""Options of the ``chroma`` store and its factory; imports no part of chromadb."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolkernel.errors import ConfigError

if TYPE_CHECKING:
    from toolkernel_chroma.store import ChromaStore


class ChromaSettings(BaseModel):
    """Where a chroma store finds Chroma and how it builds collections; validated when the store is made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str | None = Field(None, description="Chroma server host (HTTP mode).")
    port: int = Field(8000, ge=1, le=65535)
    ssl: bool = False
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers, e.g. auth tokens.")
    path: str | None = Field(None, description="Directory of an embedded persistent database (local mode).")
    tenant: str = "default_tenant"
    database: str = "default_database"
    hnsw_m: int | None = Field(
        None, ge=2, description="HNSW max neighbours per node (Chroma's default if unset)."
    )
    hnsw_construction_ef: int | None = Field(None, ge=1)
    hnsw_search_ef: int | None = Field(None, ge=1)
    batch_size: int | None = Field(
        None, ge=1, description="Records per write call; the server's maximum if unset."
    )
    max_threads: int = Field(4, ge=1, description="Worker threads running chromadb calls concurrently.")

    @model_validator(mode="after")
    def _one_mode(self) -> ChromaSettings:
        """Exactly one of ``host`` (HTTP server) and ``path`` (embedded database) is given."""
        if (self.host is None) == (self.path is None):
            raise ValueError(
                "give either host (a Chroma server) or path (an embedded database), not both or neither"
            )
        return self


def create_store(**options: Any) -> ChromaStore:
    """A :class:`~toolkernel_chroma.store.ChromaStore` from keyword options (:class:`ChromaSettings`).

    :raises ConfigError: an option is missing or invalid; the message names each field.
    """
    try:
        settings = ChromaSettings.model_validate(options)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"vector store 'chroma': invalid options: {problems}") from None
    return store_from_settings(settings)


def store_from_settings(settings: ChromaSettings) -> ChromaStore:
    """The store the kernel builds from the validated ``[plugins.chroma]`` settings and call options."""
    from toolkernel_chroma.store import ChromaStore

    return ChromaStore(settings)
