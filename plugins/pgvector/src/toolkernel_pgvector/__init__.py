"""PostgreSQL + pgvector vector store for toolkernel: HNSW or IVFFlat indexes, a schema per tenant."""

from __future__ import annotations

from toolkernel_pgvector.settings import PgVectorSettings as PgVectorSettings
from toolkernel_pgvector.settings import create_store as create_store

__all__ = ["PgVectorSettings", "create_store"]
