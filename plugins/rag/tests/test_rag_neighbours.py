"""An embedded writer's neighbour search (``KBContext.nearest``): exact scans for a few requests,
then one HNSW index for the rest of the catalog generation, so a catch-up of many batches reads
the stored vectors a bounded number of times instead of once per batch."""

from __future__ import annotations

import gc
import random
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag import neighbours as neighbours_module
from toolkernel_rag.neighbours import NeighbourSearch, scan_nearest

from .conftest import EMBEDDER, make_kernel, write_records

pytestmark = pytest.mark.anyio

WORDS = ["harbour", "tide", "beacon", "mountain", "goat", "compiler", "parser", "bread", "flour", "oven"]


def records(n: int) -> list[dict[str, object]]:
    rng = random.Random(3)
    return [{"id": f"n{i}", "text": " ".join(rng.choice(WORDS) for _ in range(12))} for i in range(n)]


class CountedScans:
    """Counts how often the catalog's vectors are read whole (``vector_pages`` by id for a scan,
    ``vector_rows`` by row for the index, each run to its end)."""

    def __init__(self, catalog: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        for name in ("vector_pages", "vector_rows"):
            monkeypatch.setattr(catalog, name, self._counted(getattr(catalog, name)))

    def _counted(self, pages: Any) -> Any:
        def read(*args: Any, **kwargs: Any) -> Iterator[Any]:
            yield from pages(*args, **kwargs)
            self.reads += 1

        return read


async def test_a_catch_up_of_many_batches_reads_the_vectors_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small thresholds so a test-sized catalog uses the index as a large one would.
    monkeypatch.setattr(neighbours_module, "EXACT_ROWS", 100)
    monkeypatch.setattr(neighbours_module, "EXACT_CALLS", 2)
    source = write_records(tmp_path / "notes.jsonl", records(600))
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER, extensions=False
    ) as kb:
        await ingest(kb, [str(source)])
        catalog = kb.embedded_catalog
        pages = list(catalog.vector_pages())
        ids = [i for page_ids, _ in pages for i in page_ids]
        matrix = np.concatenate([m for _, m in pages])
        counted = CountedScans(catalog, monkeypatch)
        search = NeighbourSearch(catalog, kb.manifest.embedder.dimension)
        batches = [matrix[first : first + 30] for first in range(0, len(matrix), 30)]
        found = [search.nearest(batch.tolist(), 11) for batch in batches]
        # Twenty batches: two exact scans and two reads to build the index (its projection, then its
        # vectors; the old scan read the vectors once per batch: twenty times).
        assert len(batches) == 20
        assert counted.reads == 4
        exact = scan_nearest([(ids, matrix)], matrix.tolist(), 11)
        got = [row for batch in found for row in batch]
        overlap = np.mean(
            [len({i for i, _ in g} & {i for i, _ in e}) / 11 for g, e in zip(got, exact, strict=True)]
        )
        assert overlap >= 0.99
        # The index only proposes candidates: their similarities are the scan's, computed from the
        # catalog's float32 vectors.
        scores = {(q, i): s for q, row in zip(ids, exact, strict=True) for i, s in row}
        assert all(
            s == pytest.approx(scores[q, i], abs=1e-5)
            for q, row in zip(ids, got, strict=True)
            for i, s in row
            if (q, i) in scores
        )
        # The same catalog gives the same index and the same answers (the graph stays deterministic).
        again = NeighbourSearch(catalog, kb.manifest.embedder.dimension)
        assert [again.nearest(batch.tolist(), 11) for batch in batches] == found


async def test_the_index_is_dropped_when_the_catalog_moves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(neighbours_module, "EXACT_ROWS", 10)
    monkeypatch.setattr(neighbours_module, "EXACT_CALLS", 1)
    source = write_records(tmp_path / "notes.jsonl", records(50))
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER, extensions=False
    ) as kb:
        await ingest(kb, [str(source)])
        search = kb.neighbour_search
        [chunk] = kb.catalog.chunks(["notes.jsonl/n7#0"], include_vectors=True)
        assert chunk.vector is not None
        search.nearest([chunk.vector], 3)
        [[first, *_]] = search.nearest([chunk.vector], 3)  # the second request: the index
        assert first[0] == chunk.id
        write_records(source, records(50)[:5])  # n5 to n49 are gone
        await ingest(kb, [str(source)])
        # A new generation: its first request is an exact scan of what is left, not the old index.
        [hits] = search.nearest([chunk.vector], 3)
        assert {i for i, _ in hits} <= {f"notes.jsonl/n{i}#0" for i in range(5)}
        assert len(hits) == 3


async def test_building_the_index_lets_go_of_the_embedding_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A catch-up embeds nothing: the writer frees its model before the index takes its room (the
    # model held 32 MiB through the whole catch-up of a 30,000-note ingest, which peaked 10 % above
    # a 300-note one). A search after it loads the model again and answers as before.
    monkeypatch.setattr(neighbours_module, "EXACT_ROWS", 10)
    monkeypatch.setattr(neighbours_module, "EXACT_CALLS", 1)
    source = write_records(tmp_path / "notes.jsonl", records(50))
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER, extensions=False
    ) as kb:
        await ingest(kb, [str(source)])
        before = [(h.chunk.id, h.score) for h in await kb.search("harbour tide beacon", top_k=5)]
        model = weakref.ref(kb.embedder)
        [chunk] = kb.catalog.chunks(["notes.jsonl/n7#0"], include_vectors=True)
        assert chunk.vector is not None
        kb.neighbour_search.nearest([chunk.vector], 3)  # an exact scan: the model stays
        gc.collect()
        assert model() is not None
        [[first, *_]] = kb.neighbour_search.nearest([chunk.vector], 3)  # the index is built
        assert first[0] == chunk.id
        gc.collect()
        assert model() is None
        after = [(h.chunk.id, h.score) for h in await kb.search("harbour tide beacon", top_k=5)]
        assert [i for i, _ in after] == [i for i, _ in before]
        assert [s for _, s in after] == pytest.approx([s for _, s in before])
