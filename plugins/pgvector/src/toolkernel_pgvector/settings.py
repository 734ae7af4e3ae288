"""Options of the ``pgvector`` store and its factory; imports neither psycopg nor pgvector."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolkernel.errors import ConfigError

if TYPE_CHECKING:
    from toolkernel_pgvector.store import PgVectorStore


class PgVectorSettings(BaseModel):
    """How a pgvector store connects and builds its indexes; validated when the store is made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dsn: str = Field(min_length=1, description="libpq connection string or postgresql:// URI.")
    schema_: str = Field(
        "public",
        alias="schema",
        min_length=1,
        max_length=63,
        description="Schema holding this tenant's indexes.",
    )
    index_type: Literal["hnsw", "ivfflat", "exact"] = "hnsw"
    hnsw_m: int = Field(16, ge=2, le=100)
    hnsw_ef_construction: int = Field(64, ge=4, le=1000)
    ivfflat_lists: int = Field(100, ge=1, le=32768)
    ivfflat_probes: int | None = Field(
        None, ge=1, le=32768, description="Lists probed when a query sets no probes; sqrt(lists) if unset."
    )
    build_memory: str | None = Field(
        None,
        pattern=r"^[1-9][0-9]*\s*(kB|MB|GB|TB)$",
        description=(
            "maintenance_work_mem for the transactions that build an ANN index (bulk loads, reindex), "
            "e.g. '1GB'; the server's setting if unset. An HNSW build outgrowing it is several times slower."
        ),
    )
    create_extension: bool = True
    pool_min_size: int = Field(1, ge=0)
    pool_max_size: int = Field(10, ge=1)
    pool_timeout: float = Field(30.0, gt=0, description="Seconds to wait for a free pooled connection.")
    connect_timeout: float = Field(
        10.0, gt=0, description="Seconds to wait for Postgres to accept a connection."
    )
    statement_timeout: float = Field(60.0, gt=0, description="Seconds any one statement may run.")

    @model_validator(mode="after")
    def _pool_sizes(self) -> PgVectorSettings:
        """The pool's minimum size may not exceed its maximum."""
        if self.pool_min_size > self.pool_max_size:
            raise ValueError("pool_min_size is larger than pool_max_size")
        return self


def create_store(**options: Any) -> PgVectorStore:
    """A :class:`~toolkernel_pgvector.store.PgVectorStore` from keyword options (:class:`PgVectorSettings`).

    :raises ConfigError: an option is missing or invalid; the message names each field.
    """
    try:
        settings = PgVectorSettings.model_validate(options)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"vector store 'pgvector': invalid options: {problems}") from None
    return store_from_settings(settings)


def store_from_settings(settings: PgVectorSettings) -> PgVectorStore:
    """The store the kernel builds from the validated ``[plugins.pgvector]`` settings and call options."""
    from toolkernel_pgvector.store import PgVectorStore

    return PgVectorStore(settings)
