"""Retrieval quality and latency of every ``search`` mode through MCP over stdio, graph modes included.

Run from the repository root (a script, not a test), after ingesting the corpus with the
graph plugin installed (embedding 5k passages takes minutes on two cores):

    .venv/bin/toolkernel kb ingest ../shared/datasets/hotpotqa/corpus.jsonl --kb /tmp/kb-hotpotqa
    .venv/bin/python tests/benchmarks/graphrag_quality.py hotpotqa --kb /tmp/kb-hotpotqa

It starts ``toolkernel kb serve --kb DIR`` as a subprocess, connects with the MCP SDK's stdio
client and calls ``search`` once per query and mode (``hybrid``, ``dense``, ``sparse``,
``graph``, and ``mastra`` — Mastra's GraphRAG algorithm), and the ``graph_rag`` tool (Mastra's
``createGraphRAGTool`` arguments, its default graph options) as one more line. A corpus
record is one document; each ranking is the order in which
documents first appear, cut at 10: the modes that rank documents (one passage per document)
are asked for ``top_k=10``, the search tool's default; ``mastra`` and ``graph_rag``, which rank
chunks (often several of one document), for 30. Metrics: nDCG@10, Recall@10 and
All@10 (every relevant document in the top 10). Latency: client-side milliseconds per call,
p50 and p95, and the server process's CPU milliseconds per call (the mean: the kernel counts CPU
time in 10 ms ticks; on a shared machine the wall clock also measures the neighbours).
Writes ``tests/benchmarks/results/graphrag_quality_<data>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psutil
from graphrag_common import RESULTS, Dataset, load, metrics
from graphrag_design import is_dev
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

MODES = ("hybrid", "dense", "sparse", "graph", "mastra", "graph_rag")
"""``search`` modes, and ``graph_rag``: the tool of that name, called with Mastra's arguments."""
TOP_K = 10
"""What the modes that rank documents are asked for: the search tool's default."""
CHUNKS = 30
"""What Mastra's chunk-ranking modes are asked for, so that ten distinct documents come back."""
CALL_TIMEOUT = 60


def split(data: Dataset, ranking: list[list[str]]) -> dict[str, dict[str, float]]:
    out = {"all": metrics(data, ranking)}
    if data.name == "hotpotqa":
        for name, keep in (("dev", True), ("test", False)):
            idx = [i for i, q in enumerate(data.query_ids) if is_dev(q) == keep]
            sub = Dataset(
                data.name,
                data.doc_ids,
                data.titles,
                data.texts,
                [data.query_ids[i] for i in idx],
                [data.queries[i] for i in idx],
                data.qrels,
            )
            out[name] = metrics(sub, [ranking[i] for i in idx])
    return out


def server_cpu_ms(server: psutil.Process) -> float:
    """CPU time the server process has used so far (every thread), in milliseconds."""
    times = server.cpu_times()
    return 1000 * (times.user + times.system)


async def call(
    session: ClientSession, server: psutil.Process, mode: str, query: str
) -> tuple[list[str], float, float]:
    """One query in one mode: the documents in order of first appearance (cut at 10), the call's
    milliseconds at the client, and the server's CPU milliseconds for it."""
    cpu = server_cpu_ms(server)
    started = time.perf_counter()
    with anyio.fail_after(CALL_TIMEOUT):
        if mode == "graph_rag":
            result = await session.call_tool("graph_rag", {"queryText": query, "topK": CHUNKS})
        else:
            top_k = CHUNKS if mode == "mastra" else TOP_K
            result = await session.call_tool("search", {"query": query, "top_k": top_k, "mode": mode})
    elapsed = 1000 * (time.perf_counter() - started)
    cpu = server_cpu_ms(server) - cpu
    if result.is_error:
        raise RuntimeError(f"search mode={mode}: {result.content}")
    answer = result.structured_content or {}
    hits = answer["sources"] if mode == "graph_rag" else answer["results"]
    # A document id is the record's id after the source key ``corpus.jsonl/``.
    ids = (h["document_id"].removeprefix("corpus.jsonl/") for h in hits)
    return list(dict.fromkeys(ids))[:10], elapsed, cpu


async def run(
    data: Dataset,
    kb: Path,
    modes: list[str],
    limit: int | None,
    save: Callable[[dict[str, Any]], None] | None,
    interleave: bool = False,
) -> dict[str, Any]:
    """Every mode's metrics and latencies; ``save`` is called after each mode with what is done so far.

    ``interleave`` calls every mode for one query before the next query, so on a shared machine
    each mode's latencies are taken under the same load (the rankings are the same either way).
    """
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolkernel", "kb", "serve", "--kb", str(kb)],
        env={"TOOLKERNEL_LOG_LEVEL": "warning"},
    )
    queries = data.queries[:limit] if limit else data.queries
    shown = Dataset(
        data.name, data.doc_ids, data.titles, data.texts, data.query_ids[: len(queries)], queries, data.qrels
    )
    results: dict[str, Any] = {}
    rankings: dict[str, list[list[str]]] = {mode: [] for mode in modes}
    latencies: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}

    def report(mode: str) -> None:
        figures = split(shown, rankings[mode])
        ordered = sorted(latencies[mode])
        results[mode] = {
            **figures,
            "p50_ms": statistics.median(ordered),
            "p95_ms": ordered[int(0.95 * (len(ordered) - 1))],
            "server_cpu_ms_per_call": statistics.fmean(cpu[mode]),
        }
        line = " | ".join(f"{k} nDCG {v['ndcg@10']:.3f} All {v['all@10']:.3f}" for k, v in figures.items())
        print(
            f"{mode:9s} {line} | p50 {results[mode]['p50_ms']:.1f} ms, "
            f"server CPU {results[mode]['server_cpu_ms_per_call']:.1f} ms/call",
            flush=True,
        )
        if save is not None:
            save(results)

    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(120):
            await session.initialize()
        [process] = [p for p in psutil.Process().children(recursive=True) if "serve" in p.cmdline()]
        for mode in modes:  # warm every mode (the graph loads on its first query)
            await call(session, process, mode, queries[0])
        if interleave:
            modes = list(dict.fromkeys(modes))
            for query in queries:
                for mode in modes:
                    ranking, elapsed, used = await call(session, process, mode, query)
                    rankings[mode].append(ranking)
                    latencies[mode].append(elapsed)
                    cpu[mode].append(used)
            for mode in modes:
                report(mode)
            return results
        for mode in modes:  # a mode named twice is measured twice, the second run reported
            rankings[mode], latencies[mode], cpu[mode] = [], [], []
            for query in queries:
                ranking, elapsed, used = await call(session, process, mode, query)
                rankings[mode].append(ranking)
                latencies[mode].append(elapsed)
                cpu[mode].append(used)
            report(mode)
    return results


async def rebuild_graph(kb: Path) -> None:
    """Feed every stored chunk to a fresh graph extension in one batch, as ingestion would.

    For a knowledge base ingested before the graph plugin was installed, or by an older graph
    format: equivalent to re-ingesting with the plugin (one batch or many give the same graph,
    ``test_incremental_updates_rank_like_a_full_rebuild``) without embedding everything again.
    """
    import toolkernel
    from toolkernel.knowledge import DocumentChunks, IngestBatch
    from toolkernel_rag import KnowledgeBase

    async with await KnowledgeBase.open(str(kb), kernel=toolkernel.Kernel(), extensions=["graph"]) as base:
        extension = base.extensions["graph"]
        for stale in (kb / "extensions" / "graph").glob("*"):
            stale.unlink()
        documents = [d.id for d in base.catalog.documents()]
        by_document: dict[str, list[Any]] = {}
        for chunk in base.catalog.document_chunks(documents):
            by_document.setdefault(chunk.document_id, []).append(chunk.record(True))
        batch = IngestBatch(upserted=tuple(DocumentChunks(d, tuple(c)) for d, c in by_document.items()))
        started = time.process_time()
        await extension.on_ingest(batch)
        chunks = sum(len(c) for c in by_document.values())
        print(f"graph rebuilt from {chunks} chunks: {time.process_time() - started:.1f} CPU s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="hotpotqa or scifact (under shared/datasets)")
    parser.add_argument(
        "--kb", type=Path, required=True, help="the knowledge base the corpus was ingested into"
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--rebuild-graph", action="store_true", help="rebuild the graph from the stored chunks first"
    )
    parser.add_argument("--limit", type=int, help="only the first N queries (a smoke run; writes nothing)")
    parser.add_argument(
        "--interleave", action="store_true", help="each query in every mode in turn (one load for all)"
    )
    args = parser.parse_args()
    data = load(args.data)
    if args.rebuild_graph:
        anyio.run(rebuild_graph, args.kb)

    def save(results: dict[str, Any]) -> None:
        """Write the modes measured so far over those of an earlier run (a run may measure a few modes)."""
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"graphrag_quality_{args.data}.json"
        modes = json.loads(path.read_text())["modes"] if path.exists() else {}
        modes.update(results)
        path.write_text(
            json.dumps({"data": args.data, "chunks_per_call": CHUNKS, "modes": modes}, indent=2) + "\n"
        )

    anyio.run(
        run, data, args.kb, args.modes.split(","), args.limit, None if args.limit else save, args.interleave
    )


if __name__ == "__main__":
    main()
