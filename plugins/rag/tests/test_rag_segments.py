"""An extension's segmented state (``KBContext.append_segment`` / ``load_segments`` /
``replace_segments``) and dense neighbours (``KBContext.nearest``), on both backends: the
embedded directory and PostgreSQL (a real server), through an extension registered the way a
third party registers one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from toolkernel.knowledge import KBContext, StateSegment
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.layout import KBError

from .conftest import EMBEDDER, RecordingPlugin, make_kernel, write_records

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def opened(home: str, name: str, **options: Any) -> AsyncIterator[tuple[KnowledgeBase, KBContext]]:
    kb = await KnowledgeBase.open(name, kernel=make_kernel(RecordingPlugin()), home=home, **options)
    async with kb:
        yield kb, kb.extensions["recording"].context  # type: ignore[attr-defined]


def contents(found: list[StateSegment]) -> list[tuple[int, bytes]]:
    return [(s.sequence, s.data) for s in found]


async def test_segments_append_in_order_read_from_a_point_and_merge(home: str, tmp_path: Path) -> None:
    name = f"seg-{tmp_path.name[-12:].lower().replace('_', '-')}"
    async with opened(home, name, create=True, embedder=EMBEDDER) as (_, writer):
        assert await writer.load_segments("log") == []
        numbers = [await writer.append_segment("log", f"batch {i}".encode()) for i in range(4)]
        assert numbers == [1, 2, 3, 4]
        async with opened(home, name) as (_, reader):
            assert contents(await reader.load_segments("log")) == [
                (n, f"batch {n - 1}".encode()) for n in numbers
            ]
            assert [s.sequence for s in await reader.load_segments("log", after=2)] == [3, 4]
            assert await reader.load_segments("other") == []
            with pytest.raises(KBError, match="saving the state of extension 'recording'"):
                await reader.append_segment("log", b"no")
            # A merge of 1..3 is numbered 3: a reader that read up to 2 reads it again (replay),
            # one that read 3 does not, one that read everything sees nothing new.
            await writer.replace_segments("log", 1, 3, b"merged 1-3")
            assert contents(await reader.load_segments("log")) == [(3, b"merged 1-3"), (4, b"batch 3")]
            assert contents(await reader.load_segments("log", after=2)) == [
                (3, b"merged 1-3"),
                (4, b"batch 3"),
            ]
            assert contents(await reader.load_segments("log", after=3)) == [(4, b"batch 3")]
            assert await reader.load_segments("log", after=4) == []
        assert await writer.append_segment("log", b"batch 4") == 5
        with pytest.raises(ValueError, match="state key"):
            await writer.append_segment("../escape", b"x")
        with pytest.raises(ValueError, match="first <= last"):
            await writer.replace_segments("log", 4, 3, b"x")


async def test_a_killed_writers_unfinished_segment_is_never_read(tmp_path: Path) -> None:
    home = str(tmp_path / "kbs")
    async with opened(home, "kb", create=True, embedder=EMBEDDER) as (kb, writer):
        await writer.append_segment("log", b"whole")
        folder = kb.directory / "extensions" / "recording" / "log.segments"
        (folder / ".0000000000000002.tmp").write_bytes(b"half")
        assert contents(await writer.load_segments("log")) == [(1, b"whole")]
        assert await writer.append_segment("log", b"next") == 2
        assert sorted(p.name for p in folder.iterdir()) == ["0000000000000001", "0000000000000002"]


async def test_nearest_finds_a_chunk_by_its_own_vector_and_honours_the_filter(
    home: str, tmp_path: Path
) -> None:
    name = f"near-{tmp_path.name[-12:].lower().replace('_', '-')}"
    records = [
        {"id": f"d{i}", "text": f"note {i} about {w}"}
        for i, w in enumerate(
            ["harbours and tides", "mountain goats", "compilers and parsers", "sourdough bread"]
        )
    ]
    source = write_records(tmp_path / "notes.jsonl", records)
    async with opened(home, name, create=True, embedder=EMBEDDER, writable=True) as (kb, context):
        await ingest(kb, [str(source)])
        [chunk] = [c for c in await context.load_chunks(["notes.jsonl/d2#0"], include_vectors=True)]
        assert chunk.vector is not None
        [found] = await context.nearest([chunk.vector], 3)
        assert found[0].id == chunk.id
        assert found[0].score == pytest.approx(1.0, abs=1e-4)
        assert len(found) == 3
        assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
        [others] = await context.nearest(
            [chunk.vector], 3, filter={"document_id": {"$ne": chunk.document_id}}
        )
        assert chunk.id not in [h.id for h in others]
        assert len(others) == 3


def test_the_writers_scan_finds_the_exact_nearest_page_by_page() -> None:
    import numpy as np

    from toolkernel_rag.neighbours import scan_nearest

    rng = np.random.default_rng(5)
    vectors = (
        rng.normal(size=(30, 12))[rng.integers(0, 30, 2500)] + 0.2 * rng.normal(size=(2500, 12))
    ).astype(np.float32)
    ids = [f"c{i}" for i in range(len(vectors))]
    pages = [(ids[a : a + 333], vectors[a : a + 333]) for a in range(0, len(ids), 333)]
    queries = vectors[::97]
    found = scan_nearest(pages, queries.tolist(), 7)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for query, got in zip(queries, found, strict=True):
        scores = unit @ (query / np.linalg.norm(query))
        expected = np.sort(scores)[::-1][:7]
        assert [s for _, s in got] == pytest.approx(expected.tolist(), abs=1e-5)
        assert all(scores[ids.index(i)] == pytest.approx(s, abs=1e-5) for i, s in got)
