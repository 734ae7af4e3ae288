"""Retrieval quality and latency of every ``search`` mode through MCP over stdio, graph modes included.

Run from the repository root (a script, not a test), after ingesting the corpus with the
graph plugin installed (embedding 5k passages takes minutes on two cores):

    .venv/bin/toolkernel kb ingest ../shared/datasets/hotpotqa/corpus.jsonl --kb /tmp/kb-hotpotqa
    .venv/bin/python tests/benchmarks/graphrag_quality.py hotpotqa --kb /tmp/kb-hotpotqa

It starts ``toolkernel kb serve --kb DIR`` as a subprocess, connects with the MCP SDK's stdio
client and calls ``search`` once per query and mode (``hybrid``, ``dense``, ``sparse``,
``graph``, and ``mastra`` — Mastra's GraphRAG algorithm). A corpus record is one document;
passages come back as chunks, so each ranking is the order in which documents first appear
among ``top_k=30`` chunks, cut at 10. Metrics: nDCG@10, Recall@10 and All@10 (every relevant
document in the top 10). Latency: client-side milliseconds per call, p50 and p95. Writes
``tests/benchmarks/results/graphrag_quality_<data>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from graphrag_common import RESULTS, Dataset, load, metrics
from graphrag_design import is_dev
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

MODES = ("hybrid", "dense", "sparse", "graph", "mastra")
CHUNKS = 30
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


async def run(data: Dataset, kb: Path, modes: list[str], limit: int | None) -> dict[str, Any]:
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
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(120):
            await session.initialize()
        for mode in modes:
            ranking, latencies = [], []
            for query in queries:
                started = time.perf_counter()
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await session.call_tool(
                        "search", {"query": query, "top_k": CHUNKS, "mode": mode}
                    )
                latencies.append(1000 * (time.perf_counter() - started))
                if result.is_error:
                    raise RuntimeError(f"search mode={mode}: {result.content}")
                hits = (result.structured_content or {})["results"]
                ranking.append(list(dict.fromkeys(h["document_id"] for h in hits))[:10])
            figures = split(shown, ranking)
            latencies.sort()
            results[mode] = {
                **figures,
                "p50_ms": statistics.median(latencies),
                "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
            }
            line = " | ".join(
                f"{k} nDCG {v['ndcg@10']:.3f} All {v['all@10']:.3f}" for k, v in figures.items()
            )
            print(f"{mode:8s} {line} | p50 {results[mode]['p50_ms']:.1f} ms", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="hotpotqa or scifact (under shared/datasets)")
    parser.add_argument(
        "--kb", type=Path, required=True, help="the knowledge base the corpus was ingested into"
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--limit", type=int, help="only the first N queries (a smoke run; writes nothing)")
    args = parser.parse_args()
    data = load(args.data)
    results = anyio.run(run, data, args.kb, args.modes.split(","), args.limit)
    if not args.limit:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"graphrag_quality_{args.data}.json"
        path.write_text(
            json.dumps({"data": args.data, "chunks_per_call": CHUNKS, "modes": results}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
