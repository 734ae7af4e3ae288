"""A damaged or incomplete graph inside a knowledge base: refused with one line naming it and
``kb repair``, which rebuilds it from the catalog to the same graph; a graph saved whole by an
older version (``graph.npz``) keeps working and its writer migrates it to segments."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from toolkernel_graphrag import segments
from toolkernel_graphrag.graph import GraphStateError
from toolkernel_graphrag.settings import GraphSettings
from toolkernel_rag import KnowledgeBase
from toolkernel_rag.ingestion import ingest
from toolkernel_rag.repair import repair

from .test_graphrag_kb import QUESTION, ingested, kernel, search

pytestmark = pytest.mark.anyio


def segment_files(where: str) -> list[Path]:
    return sorted((Path(where) / "extensions" / "graph" / "graph.segments").iterdir())


async def refused(where: str) -> str:
    async with await KnowledgeBase.open(where, kernel=kernel()) as kb:
        with pytest.raises(GraphStateError) as caught:
            await kb.search(QUESTION, mode="graph")
    assert caught.value.exit_code == 2
    message = str(caught.value)
    assert "\n" not in message
    assert message.endswith(f"run 'toolkernel kb repair --kb {where}'")
    return message


async def test_a_damaged_graph_is_refused_naming_it_and_kb_repair_rebuilds_it(tmp_path: Path) -> None:
    where = await ingested(tmp_path)
    before = await search(where, {"query": QUESTION, "mode": "graph"})
    [segment] = segment_files(where)
    segment.write_bytes(segment.read_bytes()[:100])

    assert str(segment) in await refused(where)

    async with await KnowledgeBase.open(where, kernel=kernel(), writable=True, repair=True) as kb:
        report = await repair(kb)
    assert report.extensions == ("graph",)
    assert await search(where, {"query": QUESTION, "mode": "graph"}) == before


async def test_a_missing_segment_is_refused_not_read_as_a_smaller_graph(tmp_path: Path) -> None:
    where = await ingested(tmp_path)
    (tmp_path / "docs" / "more.md").write_text("# More\n\nShirley Temple visited Ghana again.\n")
    async with await KnowledgeBase.open(where, kernel=kernel(), writable=True) as kb:
        await ingest(kb, [str(tmp_path / "docs")])
    first, _ = segment_files(where)
    first.unlink()
    assert "segments 1 to 1 are missing" in await refused(where)


def legacy_blob(data: bytes, settings: GraphSettings) -> bytes:
    """The graph of a segment as format 1 wrote it: one ``.npz`` of the whole graph."""
    chunks = [c for line in segments.decode(data, settings, "s").lines for c in line.chunks or ()]
    keys = sorted({k for c in chunks for k in c.entities})
    index = {k: i for i, k in enumerate(keys)}
    slot = {c.id: i for i, c in enumerate(chunks)}
    header = {
        "format": 1,
        "settings": settings.graph_identity(),
        "entities": keys,
        "ids": [c.id for c in chunks],
        "documents": [c.document_id for c in chunks],
        "metadata": [c.metadata for c in chunks],
    }
    knn = np.full((len(chunks), settings.knn), -1, dtype=np.int64)
    knn_sim = np.zeros((len(chunks), settings.knn), dtype=np.float32)
    for i, c in enumerate(chunks):
        found = [(slot[n], s) for n, s in zip(c.neighbours, c.similarities, strict=True) if n in slot]
        for j, (n, s) in enumerate(found[: settings.knn]):
            knn[i, j], knn_sim[i, j] = n, s
    out = io.BytesIO()
    np.savez(
        out,
        header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
        pair_slots=np.array([i for i, c in enumerate(chunks) for _ in c.entities], dtype=np.int64),
        pair_entities=np.array([index[k] for c in chunks for k in c.entities], dtype=np.int64),
        title_counts=np.array([len(c.titles) for c in chunks], dtype=np.int64),
        titles=np.array([index[k] for c in chunks for k in c.titles], dtype=np.int64),
        vectors=np.zeros((len(chunks), 4), dtype=np.float32),
        knn=knn,
        knn_sim=knn_sim,
    )
    return out.getvalue()


async def test_a_graph_saved_whole_by_an_older_version_is_read_and_migrated(tmp_path: Path) -> None:
    where = await ingested(tmp_path)
    before = await search(where, {"query": QUESTION, "mode": "graph"})
    [segment] = segment_files(where)
    legacy = Path(where) / "extensions" / "graph" / "graph.npz"
    legacy.write_bytes(legacy_blob(segment.read_bytes(), GraphSettings()))
    segment.unlink()

    assert await search(where, {"query": QUESTION, "mode": "graph"}) == before
    # The next ingest's writer turns it into the first segment and empties the old file.
    (tmp_path / "docs" / "more.md").write_text("# More\n\nBananas again.\n")
    async with await KnowledgeBase.open(where, kernel=kernel(), writable=True) as kb:
        await ingest(kb, [str(tmp_path / "docs")])
    assert legacy.read_bytes() == b""
    assert len(segment_files(where)) == 2
    assert await search(where, {"query": QUESTION, "mode": "graph"}) == before
