"""The toolkernel-pgvector plugin: registers the ``pgvector`` vector store (psycopg loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import SettingsRegistry, VectorStoreRegistry


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add the ``pgvector`` store: PostgreSQL with the pgvector extension, reached by ``dsn``."""
    from toolkernel_pgvector.settings import store_from_settings

    registry.add("pgvector", store_from_settings, settings="pgvector")


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Read ``[plugins.pgvector]`` and ``TOOLKERNEL_PGVECTOR_*`` into :class:`PgVectorSettings`."""
    from toolkernel_pgvector.settings import PgVectorSettings

    registry.add("pgvector", PgVectorSettings)
