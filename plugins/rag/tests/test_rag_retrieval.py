"""Retrieval ranks documents: fusion by document, distinct documents in every built-in mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkernel import Kernel
from toolkernel.knowledge import ScoredChunk
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.kb import reciprocal_rank_fusion

from .conftest import EMBEDDER, write_records

pytestmark = pytest.mark.anyio


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
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import plugin as rag

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
    settings = {
        "rag": {
            "embedder": EMBEDDER,
            "chunker": "recursive",
            "chunk_size": 80,
            "chunk_overlap": 0,
            "chunk_length": "characters",
        }
    }
    kernel = Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed], settings=settings)
    async with await KnowledgeBase.open(str(tmp_path / "kb"), kernel=kernel, create=True) as kb:
        await ingest(kb, [str(corpus)])
        assert kb.catalog.counts()[2] > 3 * 6  # many chunks per long document
        for mode in ("dense", "sparse", "hybrid"):
            hits = await kb.search("lighthouse ships rocky coast lamp", top_k=5, mode=mode)
            documents = [h.chunk.document_id for h in hits]
            assert len(documents) == len(set(documents)), (mode, documents)
            assert set(documents[:3]) == {"long-0", "long-1", "long-2"}, (mode, documents)
