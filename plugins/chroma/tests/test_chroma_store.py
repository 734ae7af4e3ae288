"""The Chroma store against a real ``chroma run`` server and an embedded database: the kit plus specifics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolkernel.testing.services import ChromaService
from toolkernel.testing.stores import VectorStoreContract
from toolkernel_chroma.store import ChromaStore


class TestChromaServerConformance(VectorStoreContract):
    """The HTTP client against the server started by the ``chroma`` fixture."""

    @pytest.fixture
    async def vector_store(self, chroma: ChromaService) -> AsyncIterator[ChromaStore]:
        store = ChromaStore(host=chroma.host, port=chroma.port)
        yield store
        await store.aclose()


class TestChromaPersistentConformance(VectorStoreContract):
    """The embedded persistent client, one database directory for the whole class."""

    @pytest.fixture(scope="class")
    def database_dir(self, tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp("chroma-embedded")

    @pytest.fixture
    async def vector_store(self, database_dir: Path) -> AsyncIterator[ChromaStore]:
        store = ChromaStore(path=str(database_dir))
        yield store
        await store.aclose()
