"""The pgvector store against a real Postgres: the kernel's conformance kit plus pgvector specifics."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from toolkernel.testing.services import PostgresService
from toolkernel.testing.stores import VectorStoreContract
from toolkernel_pgvector.store import PgVectorStore


class TestPgVectorConformance(VectorStoreContract):
    """HNSW (the default index type) must meet the kit exactly: ef_search is sized to top_k."""

    @pytest.fixture
    async def vector_store(self, postgres: PostgresService) -> AsyncIterator[PgVectorStore]:
        store = PgVectorStore(dsn=postgres.uri, schema="kit")
        yield store
        await store.aclose()
