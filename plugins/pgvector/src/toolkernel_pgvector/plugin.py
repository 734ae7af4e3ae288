"""Registers the ``pgvector`` vector store; the store module (and psycopg) load only when one is made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import VectorStoreRegistry
    from toolkernel.vectors import VectorStore


def create_store(**options: Any) -> VectorStore:
    """Make a :class:`~toolkernel_pgvector.store.PgVectorStore` from its options (``dsn``, ``schema``, …)."""
    from toolkernel_pgvector.store import PgVectorStore

    return PgVectorStore(**options)


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Offer PostgreSQL + pgvector as the ``pgvector`` vector store."""
    registry.add("pgvector", create_store)
