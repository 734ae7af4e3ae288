"""Graph build time for 10k chunks, an incremental +1 % update, and Mastra's ``createGraph``, in one run.

Run from the repository root (a script, not a test); Mastra's side needs its own npm install,
kept out of ``tests/node`` so CI does not install it:

    (cd tests/benchmarks/mastra && npm ci)
    OPENBLAS_NUM_THREADS=1 .venv/bin/python tests/benchmarks/graphrag_build.py

With BLAS on one thread, every figure is one core's work, as Mastra's JavaScript runs; on a
shared two-core machine a second BLAS thread shortens nothing here (the full build took the
same wall time) and its waiting spins count as CPU time, which made runs vary by 40 %.

The 10,000 chunks are the HotpotQA passages followed by SciFact abstracts (title and text),
embedded with ``local/wordllama-256`` (fast enough to embed 10k texts in seconds here; the
vectors are cached in ``tests/benchmarks/.cache``). Measured, all on the same chunks and vectors:

* toolkernel-graphrag's full build: entity extraction, normalisation, each chunk's nearest
  neighbours (k=5; found here by an exact numpy search, where ingestion asks the knowledge
  base's dense index), the segment written to disk, and the sparse matrix a server assembles;
* an incremental update: the graph of the first 99 % of documents, then the last 1 % added
  (extraction, neighbours among all chunks, segment, matrix), against the full build's time;
  the updated graph's rankings are checked against the full build's for 200 queries;
* the Mastra-compatible similarity graph (cosine > 0.7, numpy blocks) — with BLAS on every
  core, and again on one thread as Mastra runs — and Mastra's own ``GraphRAG.createGraph``
  (``@mastra/rag``, every pair compared in JavaScript) on the same vectors.

Writes ``tests/benchmarks/results/graphrag_build.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
from graphrag_common import CACHE, RESULTS, load

from toolkernel import Kernel
from toolkernel_graphrag import segments
from toolkernel_graphrag.graph import ChunkGraph, ChunkInput, entry
from toolkernel_graphrag.keys import EntityKeys
from toolkernel_graphrag.mastra import similarity_graph
from toolkernel_graphrag.phrases import PhraseExtractor
from toolkernel_graphrag.settings import GraphSettings, WalkSettings
from toolkernel_graphrag.walk import GraphWalker
from toolkernel_local_embed import plugin as local_plugin

HERE = Path(__file__).resolve().parent
MASTRA = HERE / "mastra"
SIZE = 10_000
THRESHOLD = 0.7
NODE_TIMEOUT = 1800


def chunks_and_vectors(size: int) -> list[ChunkInput]:
    """The first ``size`` passages of HotpotQA then SciFact, with cached wordllama vectors."""
    records = []
    for name in ("hotpotqa", "scifact"):
        data = load(name)
        records += [
            (f"{name}/{i}", t, x) for i, t, x in zip(data.doc_ids, data.titles, data.texts, strict=True)
        ]
    records = records[:size]
    path = CACHE / f"build{size}__wordllama-256.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        kernel = Kernel(load_entry_points=False, plugins=[local_plugin])
        embedder = kernel.embedder("local/wordllama-256")
        vectors = np.asarray(
            anyio.run(embedder.embed, [f"{t}\n{x}" for _, t, x in records]), dtype=np.float32
        )
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return [
        ChunkInput(
            id=i, document_id=i, text=x, title=t or None, metadata={"corpus": i.split("/")[0]}, vector=v
        )
        for (i, t, x), v in zip(records, vectors.tolist(), strict=True)
    ]


def neighbours(chunks: list[ChunkInput], pool: list[ChunkInput], k: int) -> list[list[tuple[str, float]]]:
    """Each chunk's ``2k`` nearest in ``pool`` by rounded cosine, ties to the smaller id: what the
    knowledge base's dense index gives the writer in ingestion, found here exactly with numpy."""
    ids = [c.id for c in pool]
    unit = np.asarray([c.vector for c in pool], dtype=np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    out = []
    for start in range(0, len(chunks), 512):
        part = chunks[start : start + 512]
        query = np.asarray([c.vector for c in part], dtype=np.float32)
        query /= np.linalg.norm(query, axis=1, keepdims=True)
        sims = np.round((query @ unit.T).astype(np.float64), segments.SIMILARITY_DECIMALS)
        top = np.argpartition(-sims, min(2 * k + 1, len(ids) - 1), axis=1)[:, : 2 * k + 2]
        for row, chunk in enumerate(part):
            found = sorted(
                ((float(sims[row, j]), ids[j]) for j in top[row] if ids[j] != chunk.id),
                key=lambda x: (-x[0], x[1]),
            )
            out.append([(i, s) for s, i in found[: 2 * k]])
    return out


def build(
    chunks: list[ChunkInput],
    directory: Path,
    graph: ChunkGraph | None = None,
    pool: list[ChunkInput] | None = None,
) -> tuple[ChunkGraph, float]:
    """Extract, find neighbours, write the segment, add and assemble; returns the graph and its seconds.

    The seconds are CPU seconds of this process (every thread): on a shared machine the wall
    clock measures the neighbours' load more than the build. The wall time is printed beside.
    """
    extractor = PhraseExtractor()
    settings = GraphSettings()
    started, wall = time.process_time(), time.perf_counter()
    surfaces = anyio.run(extractor.extract, [c.text for c in chunks])
    keys = EntityKeys(settings)
    found = neighbours(chunks, pool or chunks, settings.knn)
    entries = [entry(c, s, keys, n) for c, s, n in zip(chunks, surfaces, found, strict=True)]
    directory.mkdir(parents=True, exist_ok=True)
    lines = [segments.DocumentLine(e.document_id, (e,)) for e in entries]  # one chunk per document here
    (directory / f"{len(list(directory.iterdir())) + 1:016d}").write_bytes(segments.encode(settings, lines))
    graph = graph or ChunkGraph(settings)
    graph.apply(entries)
    graph.adjacency()
    print(
        f"  build of {len(chunks)} chunks: {time.process_time() - started:.2f} CPU s, "
        f"{time.perf_counter() - wall:.2f} s wall",
        flush=True,
    )
    return graph, time.process_time() - started


def rankings(graph: ChunkGraph, chunks: list[ChunkInput], queries: int = 200) -> list[list[str]]:
    walker = GraphWalker(graph, WalkSettings())
    rng = np.random.default_rng(0)
    out = []
    for _ in range(queries):
        seeds = [chunks[int(i)].id for i in rng.choice(len(chunks), 20, replace=False)]
        out.append([r.chunk_id for r in walker.rank(seeds, [], top_k=20)])
    return out


def similarity_graph_one_thread(size: int) -> float:
    """CPU seconds of :func:`similarity_graph` on the cached vectors with BLAS limited to one thread.

    Mastra's ``createGraph`` runs on one core; numpy's BLAS uses every core, and on a shared
    machine its waiting threads spin, which counts as CPU time. The thread count is fixed when
    BLAS loads, hence a child process.
    """
    code = (
        "import sys, time, numpy as np\n"
        "from toolkernel_graphrag.mastra import similarity_graph\n"
        "vectors = np.load(sys.argv[1]).astype(np.float32)\n"
        "started = time.process_time()\n"
        f"similarity_graph(vectors, {THRESHOLD})\n"
        "print(time.process_time() - started)\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    vectors = CACHE / f"build{size}__wordllama-256.npy"
    done = subprocess.run(
        [sys.executable, "-c", code, str(vectors)],
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT,
        check=True,
        env=env,
    )
    return float(done.stdout.strip().splitlines()[-1])


def mastra_create_graph(chunks: list[ChunkInput]) -> dict[str, float] | None:
    """Mastra's createGraph on the same texts and vectors, in Node; ``None`` if it is not installed."""
    if not (MASTRA / "node_modules" / "@mastra" / "rag").exists() or shutil.which("node") is None:
        print("  @mastra/rag is not installed: (cd tests/benchmarks/mastra && npm ci)", flush=True)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "chunks.json"
        data.write_text(
            json.dumps({"texts": [c.text for c in chunks], "vectors": [list(c.vector or []) for c in chunks]})
        )
        done = subprocess.run(
            [
                "node",
                "--max-old-space-size=8192",
                str(MASTRA / "create_graph.mjs"),
                str(data),
                str(THRESHOLD),
            ],
            capture_output=True,
            text=True,
            timeout=NODE_TIMEOUT,
            check=True,
            cwd=MASTRA,
        )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--no-mastra", action="store_true", help="skip Node (a quick run)")
    args = parser.parse_args()
    chunks = chunks_and_vectors(args.size)
    print(f"{len(chunks)} chunks", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        full, full_s = build(chunks, Path(tmp) / "full")
        print(
            f"toolkernel-graphrag full build: {full_s:.2f} s, {full.entity_count} linking entities, "
            f"{full.adjacency().nnz} matrix entries",
            flush=True,
        )
        cut = len(chunks) - len(chunks) // 100
        partial, _ = build(chunks[:cut], Path(tmp) / "inc")
        _, inc_s = build(chunks[cut:], Path(tmp) / "inc", partial, pool=chunks)
        same = rankings(partial, chunks) == rankings(full, chunks)
        print(
            f"incremental +1 % ({len(chunks) - cut} chunks): {inc_s:.3f} s = {100 * inc_s / full_s:.1f} % "
            f"of the full build; rankings equal to the full build: {same}",
            flush=True,
        )
    started = time.process_time()
    sim = similarity_graph(np.asarray([c.vector for c in chunks], dtype=np.float32), THRESHOLD)
    ours_mastra_s = time.process_time() - started
    print(
        f"Mastra-compatible similarity graph (numpy): {ours_mastra_s:.2f} s, {sim.nnz // 2} edges", flush=True
    )
    one_thread_s = similarity_graph_one_thread(args.size)
    print(f"  the same, BLAS on one thread (as Mastra runs): {one_thread_s:.2f} s", flush=True)
    mastra = None if args.no_mastra else mastra_create_graph(chunks)
    if mastra is not None:
        print(
            f"Mastra createGraph (@mastra/rag, Node {platform.node() and ''}): {mastra['ms'] / 1000:.1f} s, "
            f"{int(mastra['edges'])} edges; ratio to our full build {mastra['ms'] / 1000 / full_s:.0f}x, "
            f"to our similarity graph {mastra['ms'] / 1000 / ours_mastra_s:.0f}x "
            f"({mastra['ms'] / 1000 / one_thread_s:.0f}x with BLAS on one thread)",
            flush=True,
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "graphrag_build.json").write_text(
        json.dumps(
            {
                "chunks": len(chunks),
                "vectors": "local/wordllama-256",
                "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                "full_build_s": full_s,
                "linking_entities": full.entity_count,
                "incremental_chunks": len(chunks) - cut,
                "incremental_s": inc_s,
                "incremental_share": inc_s / full_s,
                "incremental_rankings_equal_full": same,
                "similarity_graph_s": ours_mastra_s,
                "similarity_graph_edges": sim.nnz // 2,
                "similarity_graph_one_blas_thread_s": one_thread_s,
                "mastra_create_graph_s": None if mastra is None else mastra["ms"] / 1000,
                "mastra_edges": None if mastra is None else mastra["edges"],
                "ratio_mastra_to_full_build": None if mastra is None else mastra["ms"] / 1000 / full_s,
                "ratio_mastra_to_similarity_graph": None
                if mastra is None
                else mastra["ms"] / 1000 / ours_mastra_s,
                "ratio_mastra_to_similarity_graph_one_blas_thread": None
                if mastra is None
                else mastra["ms"] / 1000 / one_thread_s,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
