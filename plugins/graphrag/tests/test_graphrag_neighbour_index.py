"""The graph of a knowledge base large enough for the writer's neighbour index (HNSW) against the
graph of exact scans: the same similarity edges but for the index's rare misses, and the same
``graph``-mode rankings, end to end through ingestion and ``KnowledgeBase.search``.

The thresholds of ``toolkernel_rag.neighbours`` are lowered so that a test-sized corpus takes
the index's path as a large one does (past 4,096 vectors and four scans). At this size the
index finds every exact neighbour; the bounds below leave room only for a rare miss.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import toolkernel
from toolkernel_graphrag import plugin as graphrag
from toolkernel_graphrag import segments
from toolkernel_graphrag.graph import ChunkGraph
from toolkernel_graphrag.settings import GraphSettings
from toolkernel_local_embed import plugin as local_embed
from toolkernel_qdrant import plugin as qdrant
from toolkernel_rag import KnowledgeBase
from toolkernel_rag import neighbours as neighbours_module
from toolkernel_rag import plugin as rag
from toolkernel_rag.ingestion import ingest

PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson"]
PLACES = ["London", "Manchester", "New York", "Rotterdam", "Boston", "Berkeley", "Zurich", "Princeton"]
TOPICS = ["compilers", "sorting", "type systems", "operating systems", "cryptography", "databases"]
QUERIES = [
    "Which city did Grace Hopper visit after meeting Alan Turing?",
    "Who worked on compilers in Zurich?",
    "Barbara Liskov type systems Boston",
    "Ken Thompson operating systems",
    "cryptography in Manchester",
    "Edsger Dijkstra sorting machine",
]


def kernel() -> toolkernel.Kernel:
    return toolkernel.Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed, graphrag])


def write_corpus(path: Path, records: int) -> Path:
    rng = random.Random(17)
    with path.open("w") as out:
        for i in range(records):
            person, other = rng.sample(PEOPLE, 2)
            text = (
                f"Project {i} on {rng.choice(TOPICS)} was started by {person} in {rng.choice(PLACES)}. "
                f"{person} later met {other} in {rng.choice(PLACES)} to discuss {rng.choice(TOPICS)}."
            )
            out.write(json.dumps({"id": f"d{i:04d}", "title": f"Project {i}", "text": text}) + "\n")
    return path


async def build(corpus: Path, where: Path) -> list[list[str]]:
    """Ingest ``corpus`` with its graph; each query's ``graph``-mode ranking of chunk ids."""
    async with await KnowledgeBase.open(
        str(where), kernel=kernel(), create=True, embedder="local/wordllama-256"
    ) as kb:
        await ingest(kb, [str(corpus)])
        return [[h.chunk.id for h in await kb.search(q, top_k=10, mode="graph")] for q in QUERIES]


def edges(where: Path) -> set[tuple[str, str]]:
    """The similarity edges of the graph a server assembles from the segments."""
    settings = GraphSettings()
    graph = ChunkGraph(settings)
    folder = where / "extensions" / "graph" / "graph.segments"
    for path in sorted(p for p in folder.iterdir() if p.name.isdigit()):
        for line in segments.decode(path.read_bytes(), settings, str(path)).lines:
            graph.apply(line.chunks or (), delete_documents=(line.document_id,))
    src, dst, _ = graph._neighbour_lists()
    return {(str(graph.chunk_at(int(a))), str(graph.chunk_at(int(b)))) for a, b in zip(src, dst, strict=True)}


@pytest.mark.anyio
async def test_a_graph_built_with_the_neighbour_index_keeps_the_exact_graphs_edges_and_rankings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", records=320)  # five batches of the catch-up
    exact = await build(corpus, tmp_path / "exact")

    built: list[Any] = []
    original = neighbours_module.NeighbourIndex.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type, *args: Any) -> Any:
        built.append(args)
        return original(cls, *args)

    monkeypatch.setattr(neighbours_module.NeighbourIndex, "build", classmethod(counted))
    monkeypatch.setattr(neighbours_module, "EXACT_ROWS", 100)
    monkeypatch.setattr(neighbours_module, "EXACT_CALLS", 1)
    indexed = await build(corpus, tmp_path / "indexed")
    assert len(built) == 1  # one index for the four batches after the first

    exact_edges, indexed_edges = edges(tmp_path / "exact"), edges(tmp_path / "indexed")
    assert len(exact_edges) == 320 * GraphSettings().knn
    assert len(exact_edges & indexed_edges) / len(exact_edges) >= 0.98
    overlap = [len(set(a) & set(b)) / len(a) for a, b in zip(exact, indexed, strict=True)]
    assert all(len(ranking) == 10 for ranking in exact)
    assert sum(overlap) / len(overlap) >= 0.9
