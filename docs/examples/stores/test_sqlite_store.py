"""The SQLite store's tests: toolkernel's conformance kit on a fresh in-memory database."""

import pytest
from sqlite_store import SQLiteSettings, SQLiteStore

from toolkernel.testing.stores import VectorStoreContract


class TestSQLiteStore(VectorStoreContract):
    batch_size = 2_000  # vectors are scored in Python

    @pytest.fixture
    async def vector_store(self):
        store = SQLiteStore(SQLiteSettings())  # built directly: the factory needs no kernel
        yield store
        await store.aclose()
