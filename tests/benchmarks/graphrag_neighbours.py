"""The graph's neighbour search during a catch-up: exact scans against the HNSW index, side by side.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/graphrag_neighbours.py --notes 3000
    .venv/bin/python tests/benchmarks/graphrag_neighbours.py --dataset hotpotqa --queries 300

A knowledge base is ingested once without extensions (``local/wordllama-256``, a fast
embedder), then copied twice, and GraphRAG's graph is built on each copy by the writer's
catch-up (``catch_up_extensions``, what ``kb ingest`` runs after writing documents), timed:

* **exact**: every request answered by an exact scan of the catalog's vectors (the
  behaviour before the index: each batch of 64 documents reads every stored vector);
* **index**: the default (``toolkernel_rag.neighbours``): exact scans for the first few
  requests, then one HNSW index for the rest of the catch-up, its candidates scored exactly.

Then the two graphs are compared: the share of the exact graph's similarity edges (each
chunk's ``knn`` nearest, what the walk uses) that the index's graph has, and each chunk's
candidate list's recall. With ``--dataset``, both graphs answer the data set's questions in
``graph`` mode in process (``KnowledgeBase.search``) and nDCG@10 is reported for each.
Prints a JSON summary; writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

from toolkernel import Kernel
from toolkernel_graphrag import plugin as graphrag_plugin
from toolkernel_graphrag import segments
from toolkernel_graphrag.graph import ChunkGraph
from toolkernel_graphrag.settings import GraphSettings
from toolkernel_local_embed import plugin as local_plugin
from toolkernel_qdrant import plugin as qdrant_plugin
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag import neighbours as neighbours_module
from toolkernel_rag import plugin as rag_plugin
from toolkernel_rag.ingestion import catch_up_extensions

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
EMBEDDER = "local/wordllama-256"


def kernel() -> Kernel:
    return Kernel(load_entry_points=False, plugins=[rag_plugin, qdrant_plugin, local_plugin, graphrag_plugin])


def notes(root: Path, count: int) -> Path:
    """The memory test's corpus: ``count`` markdown notes of 60 words."""
    sys.path.insert(0, str(HERE.parents[1] / "plugins" / "rag"))
    from tests.test_rag_memory import notes as make_notes

    return make_notes(root, count)


async def ingest_without_graph(source: Path, kb: Path) -> None:
    async with await KnowledgeBase.open(
        str(kb), kernel=kernel(), create=True, embedder=EMBEDDER, extensions=False
    ) as opened:
        await ingest(opened, [str(source)])


async def build_graph(kb: Path, exact: bool) -> float:
    """Seconds the catch-up of the graph took on ``kb`` (exact scans only, or the default)."""
    rows, calls = neighbours_module.EXACT_ROWS, neighbours_module.EXACT_CALLS
    if exact:
        neighbours_module.EXACT_ROWS = sys.maxsize
    try:
        async with await KnowledgeBase.open(str(kb), kernel=kernel(), writable=True) as opened:
            started = time.perf_counter()
            await catch_up_extensions(opened)
            opened.catalog.bump_generation()
            return time.perf_counter() - started
    finally:
        neighbours_module.EXACT_ROWS, neighbours_module.EXACT_CALLS = rows, calls


def graph_of(kb: Path) -> tuple[set[tuple[str, str]], dict[str, set[str]]]:
    """The graph's similarity edges (chunk id pairs) and each chunk's candidate neighbours."""
    settings = GraphSettings()
    graph = ChunkGraph(settings)
    candidates: dict[str, set[str]] = {}
    folder = kb / "extensions" / "graph" / "graph.segments"
    for path in sorted(p for p in folder.iterdir() if p.name.isdigit()):
        for line in segments.decode(path.read_bytes(), settings, str(path)).lines:
            graph.apply(line.chunks or (), delete_documents=(line.document_id,))
            for chunk in line.chunks or ():
                candidates[chunk.id] = set(chunk.neighbours)
    src, dst, _ = graph._neighbour_lists()
    edges = {
        (str(graph.chunk_at(int(a))), str(graph.chunk_at(int(b)))) for a, b in zip(src, dst, strict=True)
    }
    return edges, candidates


async def ndcg(kb: Path, dataset: str, queries: int) -> float:
    from graphrag_common import load, metrics

    data = load(dataset)
    data.query_ids, data.queries = data.query_ids[:queries], data.queries[:queries]
    rankings = []
    async with await KnowledgeBase.open(str(kb), kernel=kernel()) as opened:
        for query in data.queries:
            hits = await opened.search(query, top_k=10, mode="graph")
            rankings.append([h.chunk.document_id.removeprefix("corpus.jsonl/") for h in hits])
    return metrics(data, rankings)["ndcg@10"]


def corpus_of(dataset: str, root: Path) -> Path:
    from graphrag_common import shared_datasets

    root.mkdir(parents=True)
    shutil.copy(shared_datasets() / dataset / "corpus.jsonl", root / "corpus.jsonl")
    return root / "corpus.jsonl"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, help="a corpus of this many short notes")
    parser.add_argument("--dataset", help="a BEIR data set of shared/datasets (hotpotqa)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--only", choices=["exact", "index"], help="build one graph only (no comparison)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = notes(work / "notes", args.notes) if args.notes else corpus_of(args.dataset, work / "data")
        base = work / "base"
        started = time.perf_counter()
        await ingest_without_graph(source, base)
        report: dict[str, object] = {
            "corpus": args.dataset or f"{args.notes} notes",
            "ingest_without_graph_s": round(time.perf_counter() - started, 1),
            "load_average": os.getloadavg(),
        }
        built = {}
        for mode in ("exact", "index"):
            if args.only and mode != args.only:
                continue
            copy = work / mode
            shutil.copytree(base, copy)
            report[f"{mode}_catch_up_s"] = round(await build_graph(copy, exact=mode == "exact"), 1)
            built[mode] = copy
            if args.dataset:
                report[f"{mode}_ndcg@10"] = round(await ndcg(copy, args.dataset, args.queries), 4)
            print(json.dumps(report), flush=True)
        if len(built) == 2:
            exact_edges, exact_lists = graph_of(built["exact"])
            index_edges, index_lists = graph_of(built["index"])
            report["edges"] = len(exact_edges)
            report["edge_overlap"] = round(len(exact_edges & index_edges) / max(len(exact_edges), 1), 5)
            report["candidate_recall"] = round(
                float(
                    np.mean(
                        [
                            len(exact_lists[c] & index_lists.get(c, set())) / max(len(exact_lists[c]), 1)
                            for c in exact_lists
                        ]
                    )
                ),
                5,
            )
        report["load_average_end"] = os.getloadavg()
        print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
