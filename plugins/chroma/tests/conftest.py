"""Session fixtures: one real ``chroma run`` server for every Chroma test."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolkernel.testing.services import ChromaService, chroma_server


@pytest.fixture(scope="session")
def chroma() -> Iterator[ChromaService]:
    """A Chroma server from the chromadb wheel on a free port, terminated after the session."""
    with (
        tempfile.TemporaryDirectory(prefix="toolkernel-chroma-") as directory,
        chroma_server(Path(directory)) as service,
    ):
        yield service


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio, the backend toolkernel hosts use."""
    return "asyncio"
