"""Session fixtures: one real ``chroma run`` server for every Chroma test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolkernel.testing.services import ChromaService, chroma_server


@pytest.fixture(scope="session")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaService]:
    """A Chroma server from the chromadb wheel on a free port, terminated after the session."""
    with chroma_server(tmp_path_factory.mktemp("chroma")) as service:
        yield service


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio, the backend toolkernel hosts use."""
    return "asyncio"
