"""The toolkernel-pgvector plugin: registers the ``pgvector`` vector store (psycopg loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import VectorStoreRegistry


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add the ``pgvector`` store: PostgreSQL with the pgvector extension, reached by ``dsn``."""
    from toolkernel_pgvector.settings import create_store

    registry.add("pgvector", create_store)
