"""How a read-only server reaches an embedded knowledge base's vectors: three ways, side by side.

Qdrant Edge opens a shard in one process at a time (its WAL lock), and that process is the
writer; a server therefore needs the vectors another way. Measured here on SciFact (5,183
abstracts chunked to 250 MiniLM tokens, 30 of overlap: ~13k chunks), embedded with
``local/wordllama-256`` so the knowledge base builds in seconds (the vectors' dimension, 256,
is what the figures depend on; MiniLM's 384 scales the matrix by 1.5)::

    .venv/bin/python tests/benchmarks/kb_reader_vectors.py [--queries 300]

Each way runs in a fresh process (so its RSS is its own), starting from the catalog:

* ``matrix``: what ``kb serve`` does: every vector read from the catalog into one normalised
  float32 matrix; a query is one matrix-vector product (exact).
* ``edge-private``: a private Qdrant Edge shard per reader in a temporary directory, filled
  from the catalog's vectors (exact search on its appendable segment, as the writer's).
* ``edge-copy``: the writer's shard directory copied (as a per-generation snapshot would be)
  and loaded by the reader.

Reported: start-up (catalog → ready), dense top-100 query p50/p99 (query vectors embedded
beforehand, so only the vector search is timed), the process's RSS when ready and after the
queries, and how many of each query's top 10 agree with the writer's own store.
Writes ``tests/benchmarks/results/kb_reader_vectors.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

EMBEDDER = "local/wordllama-256"
CHUNKER = {
    "name": "auto",
    "size": 250,
    "overlap": 30,
    "length": "tokens",
    "tokenizer": "local/minilm-l6-int8",
}
RESULTS = Path(__file__).resolve().parent / "results" / "kb_reader_vectors.json"


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _build(kb_dir: Path, corpus: Path) -> None:
    from toolkernel_rag import KnowledgeBase, ingest

    async with await KnowledgeBase.open(
        str(kb_dir), create=True, embedder=EMBEDDER, chunker=CHUNKER, extensions=False
    ) as kb:
        await ingest(kb, [str(corpus)])


async def _queries(kb_dir: Path, texts: list[str]) -> tuple[list[list[float]], list[list[str]]]:
    """Query vectors, and the writer's own store's top 10 for each (the reference)."""
    from toolkernel_rag import KnowledgeBase

    async with await KnowledgeBase.open(str(kb_dir), writable=True, extensions=False) as kb:
        vectors = await kb.embedder.embed(texts)
        reference = [[r.id for r in await kb.store.query(kb.index, v, top_k=10)] for v in vectors]
    return vectors, reference


async def _run_way(way: str, kb_dir: Path, vectors: list[list[float]]) -> dict[str, Any]:
    from toolkernel import Kernel
    from toolkernel_rag.catalog import Catalog
    from toolkernel_rag.dense import VectorMatrix
    from toolkernel_rag.layout import read_manifest

    manifest = read_manifest(kb_dir)
    assert manifest is not None
    baseline = _rss_mb()
    started = time.perf_counter()
    catalog = Catalog(kb_dir / "catalog.sqlite", writable=False)
    tmp = tempfile.mkdtemp(prefix="kb-reader-")
    store: Any = None
    if way == "matrix":
        with catalog.reading():
            matrix = VectorMatrix.load(catalog, catalog.generation(), manifest.embedder.dimension)

        async def query(v: list[float]) -> list[str]:
            return [h.id for h in matrix.query(v, 100, None)]

    else:
        kernel = Kernel(load_entry_points=True)
        if way == "edge-private":
            store = kernel.vector_store("qdrant", path=tmp)
            await store.create_index(manifest.store.index, manifest.embedder.dimension, "cosine")
            for batch in catalog.all_vectors(batch=2048):
                await store.upsert(
                    manifest.store.index,
                    [c for c, _, _ in batch],
                    [v for _, v, _ in batch],
                    metadata=[{"document_id": m["document_id"]} for _, _, m in batch],
                )
        else:
            shutil.copytree(kb_dir / "store", Path(tmp) / "store")
            store = kernel.vector_store("qdrant", path=str(Path(tmp) / "store"))
        await store.count(manifest.store.index)  # opened and ready

        async def query(v: list[float]) -> list[str]:
            return [r.id for r in await store.query(manifest.store.index, v, top_k=100)]

    startup = time.perf_counter() - started
    ready_rss = _rss_mb()
    timings: list[float] = []
    tops: list[list[str]] = []
    for v in vectors:
        t = time.perf_counter()
        ids = await query(v)
        timings.append(time.perf_counter() - t)
        tops.append(ids[:10])
    if store is not None:
        await store.aclose()
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "way": way,
        "startup_s": round(startup, 3),
        "query_p50_ms": round(beir.percentile(timings, 0.5) * 1000, 3),
        "query_p99_ms": round(beir.percentile(timings, 0.99) * 1000, 3),
        "rss_baseline_mb": round(baseline, 1),
        "rss_ready_mb": round(ready_rss, 1),
        "rss_after_mb": round(_rss_mb(), 1),
        "tops": tops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--way", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.way:  # a child: one way, its own process
        work = Path(args.work)
        vectors = json.loads((work / "vectors.json").read_text())
        result = anyio.run(_run_way, args.way, work / "kb", vectors)
        print(json.dumps(result))
        return

    data = beir.load("scifact")
    with tempfile.TemporaryDirectory(prefix="kb-reader-bench-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus.jsonl"
        shutil.copy(beir.DATASETS / "scifact" / "corpus.jsonl", corpus)
        t = time.perf_counter()
        anyio.run(_build, work / "kb", corpus)
        build_s = time.perf_counter() - t
        texts = data.queries[: args.queries]
        vectors, reference = anyio.run(_queries, work / "kb", texts)
        (work / "vectors.json").write_text(json.dumps(vectors))
        rows = []
        for way in ("matrix", "edge-private", "edge-copy"):
            out = subprocess.run(
                [sys.executable, __file__, "--way", way, "--work", str(work)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            row = json.loads(out.strip().splitlines()[-1])
            tops = row.pop("tops")
            row["top10_agreement"] = round(
                float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(tops, reference, strict=True)])), 4
            )
            rows.append(row)
            print(json.dumps(row))
        with sqlite_counts(work / "kb") as chunks:
            summary = {
                "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
                "chunks": chunks,
                "dimension": 256,
                "build_s": round(build_s, 1),
                "queries": len(vectors),
                "ways": rows,
            }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "ways"}))


class sqlite_counts:
    """The knowledge base's chunk count, read from its catalog."""

    def __init__(self, kb_dir: Path) -> None:
        import sqlite3

        self._db = sqlite3.connect(kb_dir / "catalog.sqlite")

    def __enter__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def __exit__(self, *exc: object) -> None:
        self._db.close()


if __name__ == "__main__":
    main()
