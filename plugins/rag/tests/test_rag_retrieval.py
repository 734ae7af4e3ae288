"""Retrieval ranks documents: fusion by document, distinct documents in every built-in mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkernel import Kernel
from toolkernel.knowledge import ScoredChunk
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.kb import reciprocal_rank_fusion

from .conftest import EMBEDDER, write_records

pytestmark = pytest.mark.anyio


def _character_chunks(size: int) -> Kernel:
    """A kernel whose knowledge bases cut ``size``-character chunks, so a short text makes several."""
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import plugin as rag

    settings = {
        "rag": {
            "embedder": EMBEDDER,
            "chunker": "recursive",
            "chunk_size": size,
            "chunk_overlap": 0,
            "chunk_length": "characters",
        }
    }
    return Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed], settings=settings)


def test_fusion_adds_a_documents_votes_across_its_chunks() -> None:
    # Dense and sparse agree on document "a" but pick different chunks of it; each alone
    # ranks another document first. Fused by chunk, "a" would split its votes and come last.
    dense = [("b", ScoredChunk("b#0", 0.9)), ("a", ScoredChunk("a#0", 0.8))]
    sparse = [("c", ScoredChunk("c#0", 12.0)), ("a", ScoredChunk("a#3", 11.0))]
    fused = reciprocal_rank_fusion([dense, sparse], k=60)
    assert [d for d, _ in fused] == ["a", "b", "c"]
    assert fused[0][1] == ScoredChunk("a#0", pytest.approx(2 / 62))  # the first ranking's chunk on a tie


def test_a_document_is_shown_by_the_chunk_of_its_better_ranking() -> None:
    dense = [("x", ScoredChunk("x#0", 0.9)), ("y", ScoredChunk("y#0", 0.8)), ("a", ScoredChunk("a#0", 0.7))]
    sparse = [("a", ScoredChunk("a#5", 9.0))]
    fused = dict(reciprocal_rank_fusion([dense, sparse]))
    assert fused["a"].id == "a#5"


async def test_every_builtin_mode_returns_distinct_documents(tmp_path: Path) -> None:
    # Long documents cut into many 80-character chunks, all about the same topic, so that
    # a chunk-level ranking would fill the top with one document's chunks.
    sentence = "Lighthouses guide ships along rocky coasts at night with a rotating lamp. "
    records: list[dict[str, object]] = [
        {"id": f"long-{i}", "title": f"Lighthouse {i}", "text": sentence * 6} for i in range(3)
    ]
    records += [
        {"id": f"other-{i}", "title": "Bees", "text": "Bees make honey from nectar."} for i in range(4)
    ]
    corpus = write_records(tmp_path / "corpus.jsonl", records)
    kernel = _character_chunks(80)
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=kernel, create=True) as kb:
        await ingest(kb, [str(corpus)])
        assert kb.catalog.counts()[2] > 3 * 6  # many chunks per long document
        for mode in ("dense", "sparse", "hybrid"):
            hits = await kb.search("lighthouse ships rocky coast lamp", top_k=5, mode=mode)
            documents = [h.chunk.document_id for h in hits]
            assert len(documents) == len(set(documents)), (mode, documents)
            assert set(documents[:3]) == {f"corpus.jsonl/long-{i}" for i in range(3)}, (mode, documents)


class _Recording:
    """A reranker plugin for the test that records the texts it is asked to score."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    from toolkernel import hookimpl

    @hookimpl
    def register_rerankers(self, registry: Any) -> None:
        seen = self.seen

        class Reranker:
            async def score(self, query: str, passages: list[str]) -> list[float]:
                seen.extend(passages)
                return [0.0] * len(passages)

        registry.add("recording", Reranker)


async def test_a_reranker_reads_short_documents_whole_and_long_ones_by_passage(tmp_path: Path) -> None:
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import plugin as rag
    from toolkernel_rag.kb import RERANK_DOCUMENT_CHARS

    short = "Lighthouses guide ships. " * 8
    long = "Lighthouses guide ships along rocky coasts at night. " * (RERANK_DOCUMENT_CHARS // 50)
    corpus = write_records(
        tmp_path / "corpus.jsonl",
        [{"id": "short", "title": "", "text": short}, {"id": "long", "title": "", "text": long}],
    )
    recording = _Recording()
    settings = {
        "rag": {"embedder": EMBEDDER, "chunk_size": 60, "chunk_length": "characters", "chunk_overlap": 0}
    }
    kernel = Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed, recording], settings=settings)
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=kernel, create=True) as kb:
        await ingest(kb, [str(corpus)])
        hits = await kb.search("lighthouse ships", top_k=2, rerank="recording")
    assert sorted(h.chunk.document_id for h in hits) == ["corpus.jsonl/long", "corpus.jsonl/short"]
    assert short.strip() in [p.strip() for p in recording.seen]  # the whole short document
    [passage] = [p for p in recording.seen if p.strip() != short.strip()]
    assert len(passage) <= 60 < len(long)  # a passage of the long one


async def test_a_catalog_from_before_document_terms_still_searches(tmp_path: Path) -> None:
    import sqlite3

    ids = ["corpus.jsonl/bees", "corpus.jsonl/ships"]
    from .conftest import make_kernel

    corpus = write_records(
        tmp_path / "corpus.jsonl",
        [
            {"id": "bees", "title": "Bees", "text": "Bees make honey from nectar."},
            {"id": "ships", "title": "Ships", "text": "A lighthouse guides ships at night."},
        ],
    )
    async with await KnowledgeBase.open(
        str(tmp_path / "kb"), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        await ingest(kb, [str(corpus)])
    # Rewrite the catalog as an older version wrote it: documents without their terms.
    db = sqlite3.connect(tmp_path / "kb" / "catalog.sqlite")
    db.execute("ALTER TABLE documents DROP COLUMN terms")
    db.execute("UPDATE settings SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    db.commit()
    db.close()
    # A reader analyses the texts in memory and leaves the catalog as it found it.
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel()) as kb:
        [hit] = await kb.search("honey", top_k=1, mode="sparse")
        assert hit.chunk.document_id == "corpus.jsonl/bees"
        assert kb.embedded_catalog.terms_of(ids) == {"corpus.jsonl/bees": None, "corpus.jsonl/ships": None}
    # The writer migrates the catalog and keeps the terms.
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=make_kernel(), writable=True) as kb:
        [hit] = await kb.search("honey", top_k=1, mode="sparse")
        assert hit.chunk.document_id == "corpus.jsonl/bees"
        assert kb.embedded_catalog.terms_of(ids) == {
            "corpus.jsonl/bees": "bee bee make honey from nectar",
            "corpus.jsonl/ships": "ship lighthous guid ship night",
        }


async def test_dense_mode_fills_top_k_even_when_one_document_fills_the_first_fetch(tmp_path: Path) -> None:
    # One document of 20 near-identical chunks about the query, and 20 one-chunk documents
    # about other things: the mean is under two chunks per document, so the first fetch for
    # five documents (ten chunks) holds only the long one.
    long = "Lighthouses guide ships along rocky coasts at night. " * 40
    records: list[dict[str, object]] = [{"id": "long", "title": "", "text": long}]
    records += [
        {"id": f"short-{i}", "title": "", "text": f"Recipe {i}: bake bread with flour."} for i in range(20)
    ]
    corpus = write_records(tmp_path / "corpus.jsonl", records)
    kernel = _character_chunks(110)
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=kernel, create=True) as kb:
        await ingest(kb, [str(corpus)])
        assert kb.catalog.counts()[2] >= 40
        hits = await kb.search("lighthouses guide ships on rocky coasts", top_k=5, mode="dense")
    documents = [h.chunk.document_id for h in hits]
    assert len(documents) == 5 == len(set(documents))
    assert documents[0] == "corpus.jsonl/long"
