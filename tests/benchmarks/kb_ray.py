"""Ingestion on Ray beside the local pipeline, in one run, and the driver's write ceiling.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_ray.py [--documents 500] [--embedder local/minilm-l6-int8]

The first ``--documents`` SciFact abstracts (a ``.jsonl`` corpus, as ``kb ingest`` reads
BEIR's) go into a fresh embedded knowledge base four ways, one after another:

* ``local``: ``ingest`` in this process (the embedder's default threads: every core);
* ``ray-1`` / ``ray-2``: ``--engine ray`` with 1 and 2 embedding actors (1 CPU and 1 thread
  each) on one Ray started here once (its start-up is timed apart);
* ``write``: the driver's write path alone: the chunks and vectors the ``ray-2`` run made,
  written again into a fresh knowledge base through ``begin_write`` / ``finish_write`` in
  batches of 32 documents, as the driver writes what the actors send. Nothing is embedded:
  the rate is the ceiling a cluster of any size would hit on the embedded backend.

Reported per run: wall seconds, documents/s and chunks/s, and for the Ray runs the actors'
embedding time summed (``embed_seconds``), from which the rate one actor embeds at
(chunks per actor-second) follows. ``--model`` works out what 10 and 100 actors would reach
from those rates. Writes ``tests/benchmarks/results/kb_ray.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

from toolkernel import Kernel
from toolkernel_rag import KnowledgeBase, ingest
from toolkernel_rag.cluster.connect import connect
from toolkernel_rag.cluster.job import RayOptions, ingest_on_ray
from toolkernel_rag.cluster.workers import Piece
from toolkernel_rag.ingestion import IngestReport, begin_write, finish_write
from toolkernel_rag.sources import Document

WRITE_BATCH = 32
"""Documents per driver write (``--batch-size``'s default)."""


def kernel() -> Kernel:
    from toolkernel_local_embed import plugin as local_embed
    from toolkernel_qdrant import plugin as qdrant
    from toolkernel_rag import plugin as rag

    return Kernel(load_entry_points=False, plugins=[rag, qdrant, local_embed])


def corpus(path: Path, documents: int) -> Path:
    data = beir.load("scifact")
    with path.open("w", encoding="utf-8") as out:
        for doc_id, title, text in list(zip(data.doc_ids, data.titles, data.texts, strict=True))[:documents]:
            out.write(json.dumps({"id": doc_id, "title": title, "text": text}) + "\n")
    return path


def row(name: str, report: IngestReport, wall: float, actors: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run": name,
        "documents": report.added + report.updated,
        "chunks": report.chunks,
        "wall_s": round(wall, 2),
        "docs_per_s": round((report.added + report.updated) / wall, 1),
        "chunks_per_s": round(report.chunks / wall, 1),
        "embed_s": round(report.embed_seconds, 2),
    }
    if actors:
        out["actors"] = actors
        out["chunks_per_actor_s"] = (
            round(report.chunks / report.embed_seconds, 1) if report.embed_seconds else None
        )
    return out


async def run_local(home: Path, source: Path, embedder: str) -> dict[str, Any]:
    started = time.perf_counter()
    async with await KnowledgeBase.open(
        home / "local", kernel=kernel(), create=True, embedder=embedder
    ) as kb:
        report = await ingest(kb, [str(source)])
    return row("local", report, time.perf_counter() - started)


async def run_ray(home: Path, source: Path, embedder: str, actors: int) -> dict[str, Any]:
    session = connect(None, actors)
    started = time.perf_counter()
    async with await KnowledgeBase.open(
        home / f"ray-{actors}", kernel=kernel(), create=True, embedder=embedder
    ) as kb:
        report = await ingest_on_ray(kb, [str(source)], session, RayOptions(actors=actors))
    return row(f"ray-{actors}", report, time.perf_counter() - started, actors)


async def run_write(home: Path, built: Path, embedder: str) -> dict[str, Any]:
    """Write what an ingest made (documents, chunks, vectors) into a fresh knowledge base, timed alone."""
    async with await KnowledgeBase.open(built, kernel=kernel(), writable=False) as made:
        rows = made.documents()
        batches = []
        payload = 0
        for first in range(0, len(rows), WRITE_BATCH):
            part = rows[first : first + WRITE_BATCH]
            documents = []
            for r in part:
                found = made.document(r.id)
                assert found is not None
                documents.append(Document(r.id, found[1], "text", r.metadata, r.source, hash=r.hash))
            ids = [c.id for c in made.catalog.document_chunks([r.id for r in part])]
            chunks = made.catalog.chunks(ids, include_vectors=True)
            terms = [made.sparse.terms(d.text) for d in documents]
            vectors = [list(c.vector or []) for c in chunks]
            batches.append((documents, chunks, vectors, terms))
            for d, t in zip(documents, terms, strict=True):  # what the actors send the driver
                own = [c for c in chunks if c.document_id == d.id]
                piece = Piece(0, d, t, own, [list(c.vector or []) for c in own])
                payload += len(pickle.dumps(piece))
    async with await KnowledgeBase.open(
        home / "write", kernel=kernel(), create=True, embedder=embedder
    ) as kb:
        report = IngestReport()
        started = time.perf_counter()
        for documents, chunks, vectors, terms in batches:
            await begin_write(kb, documents, {}, report, terms)
            await finish_write(kb, documents, chunks, vectors, {}, report)
        wall = time.perf_counter() - started
    out = row("write", report, wall)
    out["bytes_per_chunk"] = round(payload / max(1, report.chunks))
    return out


def model(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """What N actors would reach on paper: N x one actor's rate, until the driver's write ceiling."""
    per_actor = results["ray-1"]["chunks_per_actor_s"] or 0.0
    ceiling = results["write"]["chunks_per_s"]
    chunk_bytes = results["write"]["bytes_per_chunk"]
    out = []
    for actors in (1, 2, 10, 100):
        embedding = actors * per_actor
        out.append(
            {
                "actors": actors,
                "embedding_chunks_per_s": round(embedding, 1),
                "reached_chunks_per_s": round(min(embedding, ceiling), 1),
                "bound_by": "embedding" if embedding < ceiling else "driver write",
                "into_driver_mb_per_s": round(min(embedding, ceiling) * chunk_bytes / 1e6, 2),
            }
        )
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--embedder", default="local/minilm-l6-int8")
    parser.add_argument("--out", type=Path, default=beir.RESULTS / "kb_ray.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kb-ray-bench-"))
    load_before = os.getloadavg()
    try:
        source = corpus(work / "scifact.jsonl", args.documents)
        results: dict[str, dict[str, Any]] = {}
        results["local"] = await run_local(work, source, args.embedder)
        print(json.dumps(results["local"]), flush=True)
        started = time.perf_counter()
        session = connect(None, 2)
        ray_start = time.perf_counter() - started
        print(json.dumps({"ray_start_s": round(ray_start, 1)}), flush=True)
        try:
            for actors in (1, 2):
                results[f"ray-{actors}"] = await run_ray(work, source, args.embedder, actors)
                print(json.dumps(results[f"ray-{actors}"]), flush=True)
        finally:
            session.close()
        results["write"] = await run_write(work, work / "ray-2", args.embedder)
        print(json.dumps(results["write"]), flush=True)
        paper = model(results)
        for line in paper:
            print(json.dumps(line), flush=True)
        local = results["local"]["wall_s"]
        ratios = {
            name: round(local / r["wall_s"], 2) for name, r in results.items() if name.startswith("ray")
        }
        report = {
            "documents": args.documents,
            "embedder": args.embedder,
            "ray_start_s": round(ray_start, 1),
            "runs": results,
            "speedup_vs_local": ratios,
            "model": paper,
            "machine": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "load_before": load_before,
                "load_after": os.getloadavg(),
            },
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps({"speedup_vs_local": ratios, "load": os.getloadavg()}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
