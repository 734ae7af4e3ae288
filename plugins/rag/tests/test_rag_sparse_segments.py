"""The embedded BM25 index kept incrementally, and readers following the catalog by its changes.

At 300,000 chunks a one-document ingest rewrote the whole BM25 index (about 5 minutes) and a
running server rebuilt its whole view (BM25 and dense matrix) for every generation, so it
found the new document 80 s after the ingest. These tests pin the incremental contract:
rowids only grow and removals leave tombstones, a small ingest adds a segment and leaves the
saved ones alone, a reader moves to the next generation by reading only the new chunks, and
after any sequence of adds, replacements and deletions the index ranks exactly as one built
from scratch (and scores as bm25s does, up to float32 rounding).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.catalog import Catalog, StoredChunk
from toolkernel_rag.postings import SparseState
from toolkernel_rag.sparse import SparseIndex
from toolkernel_rag.view import Follower

from .conftest import EMBEDDER, make_kernel, write_records

pytestmark = pytest.mark.anyio

WORDS = [
    "harbour",
    "tide",
    "anchor",
    "beacon",
    "keel",
    "storm",
    "gull",
    "rope",
    "sail",
    "mast",
    "deck",
    "compass",
    "chart",
    "reef",
    "lantern",
    "current",
    "pier",
    "dock",
    "ferry",
    "cargo",
    "whale",
    "island",
    "fog",
    "bell",
    "buoy",
    "gale",
    "hull",
    "oar",
]
QUERIES = ("harbour tide", "storm storm keel", "whale island fog", "long3x5", "ferry", "gull rope sail")


def _text(rng: np.random.Generator, i: int, version: int) -> str:
    words = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), int(rng.integers(0, 40))))
    if i % 37 == 0:
        words = "the of and"  # stop words only: a document without terms
    text = f"Entry {i} version {version} {words}"
    if i % 41 == 3:
        text += " " + " ".join(f"long{i}x{k}" for k in range(700))  # several chunks
    return text


def _records(texts: dict[int, str]) -> list[dict[str, object]]:
    return [{"id": f"doc-{i}", "text": t, "metadata": {"n": i, "odd": bool(i % 2)}} for i, t in texts.items()]


def _fresh(kb: KnowledgeBase, directory: Path) -> tuple[SparseIndex, SparseState]:
    """The index built from scratch from the catalog, as a reader without a saved index does."""
    index = SparseIndex(directory, kb.embedded_sparse.spec, writable=False)
    with kb.embedded_catalog.reading():
        return index, index.build(kb.embedded_catalog)


def _segments(kb_dir: Path) -> list[dict[str, Any]]:
    segments: list[dict[str, Any]] = json.loads((kb_dir / "sparse" / "index.json").read_text())["segments"]
    return segments


def test_chunk_rowids_only_grow_and_removals_are_logged(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog.sqlite")

    def commit(document_id: str, chunks: int) -> None:
        catalog.mark_pending([(document_id, "src", "h", {}, "text", "text")])
        catalog.commit_documents(
            [document_id],
            [
                StoredChunk(f"{document_id}#{n}", document_id, n, 0, 4, "text", {}, [1.0], "text")
                for n in range(chunks)
            ],
        )

    commit("a", 2)
    commit("b", 1)
    generation, highest = catalog.generation(), catalog.max_rowid()
    assert highest == 3
    catalog.delete_documents(["b"])  # the highest rowid goes: SQLite alone would hand it out again
    commit("c", 1)
    commit("a", 2)  # replaced: new rowids, the old ones logged
    with catalog.reading():
        changes = catalog.changes(generation, highest)
    assert changes is not None
    assert changes.generation == catalog.generation()
    assert changes.removed == [1, 2, 3]
    assert changes.max_rowid == 6
    assert [r.rowid for r in catalog.chunk_rows(highest)] == [4, 5, 6]
    # A generation from before the log began cannot be followed by changes.
    assert catalog.changes(-1, 0) is None
    catalog.close()


async def test_rounds_of_add_replace_delete_rank_exactly_as_a_fresh_build(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    texts = {i: _text(rng, i, 0) for i in range(160)}
    source = write_records(tmp_path / "corpus.jsonl", _records(texts))
    kb_dir = tmp_path / "kb"
    import bm25s  # type: ignore[import-untyped]

    async with await KnowledgeBase.open(
        str(kb_dir), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        await ingest(kb, [str(source)])
        async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel()) as reader:
            follower = Follower(reader)  # driven by hand: no thread, no timing
            follower.load_first()
            counts: list[int] = []
            next_id = len(texts)
            for version in range(1, 9):
                for i in rng.choice(sorted(texts), 7, replace=False):
                    texts[int(i)] = _text(rng, int(i), version)
                for i in rng.choice(sorted(texts), 4, replace=False):
                    del texts[int(i)]
                for _ in range(5):
                    texts[next_id] = _text(rng, next_id, version)
                    next_id += 1
                write_records(source, _records(texts))
                await ingest(kb, [str(source)])
                counts.append(len(_segments(kb_dir)))
                follower.view = await anyio.to_thread.run_sync(follower._build)
                index, fresh = _fresh(kb, tmp_path / "fresh")
                assert fresh.documents.count == len(texts)
                odd = lambda meta: bool(meta.get("odd"))  # noqa: E731
                for query in QUERIES:
                    want = index.search(query, 50, loaded=fresh)
                    assert want or query == "long3x5", query
                    assert kb.sparse.search(query, 50) == want  # the writer's saved segments
                    assert index.search(query, 50, loaded=follower.view.sparse) == want  # a reader's
                    assert index.search(query, 50, odd, follower.view.sparse) == index.search(
                        query, 50, odd, fresh
                    )
                # And the scores are bm25s's own (computed in float64 here, float32 there).
                model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
                order = fresh.document_ids
                terms = kb.embedded_catalog.terms_of(order)
                model.index([(terms[d] or "").split() or [""] for d in order], show_progress=False)
                for query in QUERIES:
                    tokens = [t for t in index.analyzer.terms(query) if t in model.vocab_dict]
                    if tokens:
                        scores = model.get_scores(tokens)
                        for document_id, hit in index.search(query, 50, loaded=fresh):
                            assert hit.score == pytest.approx(
                                float(scores[order.index(document_id)]), rel=1e-5
                            )
    # Rounds added segments beside the first and merged them back when they grew.
    assert max(counts) > 1
    assert any(later < earlier for earlier, later in itertools.pairwise(counts))


def test_a_one_document_ingest_leaves_the_saved_segments_untouched(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    texts = {i: _text(rng, i, 0) for i in range(400)}
    source = write_records(tmp_path / "corpus.jsonl", _records(texts))
    extra = write_records(
        tmp_path / "one.jsonl", [{"id": "new", "text": "A page about the quokkaplanetarium."}]
    )
    kb_dir = tmp_path / "kb"

    async def run(sources: list[Path]) -> None:
        async with await KnowledgeBase.open(
            str(kb_dir), kernel=make_kernel(), create=True, embedder=EMBEDDER
        ) as kb:
            await ingest(kb, [str(s) for s in sources])

    anyio.run(run, [source])
    sparse = kb_dir / "sparse"
    before = {
        p: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in sparse.rglob("*") if p.is_file()
    }
    [base] = _segments(kb_dir)
    anyio.run(run, [extra])
    after = {
        p: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in sparse.rglob("*") if p.is_file()
    }
    unchanged = {p: s for p, s in before.items() if p.name != "index.json"}
    assert unchanged
    assert all(after.get(p) == s for p, s in unchanged.items())
    segments = _segments(kb_dir)
    assert segments[0] == base
    assert [s["rows"] for s in segments] == [base["rows"], 1]

    async def found() -> list[str]:
        async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel()) as kb:
            return [h.chunk.document_id for h in await kb.search("quokkaplanetarium", mode="sparse", top_k=3)]

    assert anyio.run(found) == ["one.jsonl/new"]


async def test_a_reader_moves_to_the_next_generation_by_reading_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(3)
    texts = {i: _text(rng, i, 0) for i in range(120)}
    source = write_records(tmp_path / "corpus.jsonl", _records(texts))
    kb_dir = tmp_path / "kb"
    async with await KnowledgeBase.open(
        str(kb_dir), kernel=make_kernel(), create=True, embedder=EMBEDDER
    ) as kb:
        await ingest(kb, [str(source)])
        async with await KnowledgeBase.open(str(kb_dir), kernel=make_kernel()) as reader:
            follower = Follower(reader)
            follower.load_first()
            old = follower.view
            read_above: list[int] = []
            catalog = follower._catalog
            chunk_rows, vectors_above = catalog.chunk_rows, catalog.vectors_above

            def rows(after: int = 0, page: int = 2000) -> Any:
                read_above.append(after)
                return chunk_rows(after, page)

            def vectors(after: int) -> Any:
                read_above.append(after)
                return vectors_above(after)

            monkeypatch.setattr(catalog, "chunk_rows", rows)
            monkeypatch.setattr(catalog, "vectors_above", vectors)
            texts[5] = "A page about the quokkaplanetarium."
            del texts[7]
            write_records(source, _records(texts))
            await ingest(kb, [str(source)])
            new = await anyio.to_thread.run_sync(follower._build)

            assert new.generation > old.generation
            # Only the chunks above what the reader held were read, once for BM25, once for vectors.
            assert read_above == [old.sparse.max_rowid, old.sparse.max_rowid]
            # The old segments and the dense matrix's buffer are shared, not rebuilt.
            assert all(a is b for a, b in zip(old.sparse.segments, new.sparse.segments[:-1], strict=False))
            assert len(new.sparse.segments) == len(old.sparse.segments) + 1
            assert len(new.sparse.segments[-1].rowids) == 1
            assert old.dense is not None
            assert new.dense is not None
            assert np.shares_memory(old.dense.buffer, new.dense.buffer)

            index = kb.embedded_sparse
            assert [d for d, _ in index.search("quokkaplanetarium", 3, loaded=new.sparse)] == [
                "corpus.jsonl/doc-5"
            ]
            assert not index.search("quokkaplanetarium", 3, loaded=old.sparse)  # the old view is unchanged
            vector = await reader.embed_query(texts[5])
            dense = [h.metadata["document_id"] for h in new.dense.query(vector, 1000, None)]
            assert dense[0] == "corpus.jsonl/doc-5"
            assert len(set(dense)) == 119
            assert "corpus.jsonl/doc-7" not in dense
            assert "corpus.jsonl/doc-7" in [
                h.metadata["document_id"] for h in old.dense.query(vector, 1000, None)
            ]
