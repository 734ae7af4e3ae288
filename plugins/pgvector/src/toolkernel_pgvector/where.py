"""The store's metadata-filter translation to SQL, public for code that queries pgvector tables
of its own with the same filter semantics (the PostgreSQL knowledge-base backend does)."""

from __future__ import annotations

from toolkernel_pgvector._where import SUPPORTED_OPERATORS as SUPPORTED_OPERATORS
from toolkernel_pgvector._where import where_clause as where_clause

__all__ = ["SUPPORTED_OPERATORS", "where_clause"]
