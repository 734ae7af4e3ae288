"""Knowledge-base retrieval quality and latency through the MCP ``search`` tool over stdio.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_quality.py [--datasets scifact hotpotqa] [--queries N]
        [--embedder local/wordllama-256] [--out FILE]

For each data set (BEIR-style, read from ``../shared/datasets``) it builds a knowledge base at
the defaults with the real command, ``toolkernel kb ingest corpus.jsonl --kb DIR`` (kept under
the gitignored ``tests/benchmarks/.cache/kb``; ingestion is incremental, so a rerun costs
seconds), starts ``toolkernel kb serve --kb DIR`` as a subprocess and drives it with the
``mcp`` SDK's client over stdio, as an MCP host would. Every judged query is asked once per
configuration, the configurations rotating from query to query so that machine noise lands on
all alike: ``dense``, ``sparse``, ``hybrid``, and ``hybrid`` + each reranker that can run here
(``weighted`` always; ``cross-encoder`` when a model is found in the model caches; ``http``
when ``$RERANK_BASE_URL`` is set).

A result's ``document_id`` is the corpus record's ``id`` after its source key
``corpus.jsonl/``. The tool returns one passage per
document in every built-in mode; the ranking scored is the distinct documents in the order
they first appear. Reported per configuration: nDCG@10, Recall@10, All@10 (share of
queries with every relevant document in the top 10), the mean number of distinct documents in
the passages returned, the client-side latency p50/p99 of the ``tools/call`` round trip, and the
server's CPU time per call (``/proc``, 10 ms ticks averaged over all calls): on a shared machine
latency mostly measures how many time slices the server got, CPU per call the work it did.
Writes ``tests/benchmarks/results/kb_quality.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

KB_ROOT = beir.CACHE / "kb"
TOP_K = 10
CALL_TIMEOUT = 120.0
INGEST_TIMEOUT = 3 * 3600
REFERENCE = {"scifact": 0.716, "hotpotqa": 0.794}
"""The hybrid target per data set: MiniLM + BM25 fused by RRF, whole documents, exact search."""


@dataclass(frozen=True)
class Config:
    """One way of calling ``search``."""

    name: str
    arguments: dict[str, Any]


def configs() -> list[Config]:
    """Every configuration that can run here."""
    out = [
        Config("dense", {"mode": "dense"}),
        Config("sparse", {"mode": "sparse"}),
        Config("hybrid", {"mode": "hybrid"}),
        Config("hybrid+weighted", {"mode": "hybrid", "rerank": "weighted"}),
    ]
    try:
        from toolkernel_rag.rerankers.cross_encoder import DEFAULT_MODEL, locate

        locate(DEFAULT_MODEL)
    except Exception as exc:
        print(f"  cross-encoder: not measured ({exc})", flush=True)
    else:
        out.append(Config("hybrid+cross-encoder", {"mode": "hybrid", "rerank": "cross-encoder"}))
    if os.environ.get("RERANK_BASE_URL"):
        out.append(Config("hybrid+http", {"mode": "hybrid", "rerank": "http"}))
    else:
        print("  http: not measured ($RERANK_BASE_URL is unset)", flush=True)
    return out


def ensure_kb(data: beir.Dataset, source: Path, embedder: str | None = None) -> Path:
    """Build (or bring up to date) the knowledge base of ``source`` with the real CLI."""
    directory = KB_ROOT / (data.name if embedder is None else f"{data.name}-{embedder.replace('/', '-')}")
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkernel",
            "kb",
            "ingest",
            str(source / "corpus.jsonl"),
            "--kb",
            str(directory),
            "--quiet",
            *(["--embedder", embedder] if embedder else []),
        ],
        capture_output=True,
        text=True,
        timeout=INGEST_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"toolkernel kb ingest failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"  {data.name}: knowledge base ready in {time.perf_counter() - started:.0f} s: {report}", flush=True
    )
    return directory


async def run_queries(
    directory: Path, data: beir.Dataset, wanted: list[Config], limit: int | None, errlog: TextIO
) -> dict[str, dict[str, Any]]:
    """Ask every query under every configuration through one ``kb serve`` subprocess."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolkernel", "kb", "serve", "--kb", str(directory)]
    )
    count = min(limit or len(data.queries), len(data.queries))
    rankings: dict[str, list[list[str]]] = {c.name: [] for c in wanted}
    latencies: dict[str, list[float]] = {c.name: [] for c in wanted}
    distinct: dict[str, list[int]] = {c.name: [] for c in wanted}
    server_cpu: dict[str, float] = {c.name: 0.0 for c in wanted}
    async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
        with anyio.fail_after(CALL_TIMEOUT):
            tools = await client.list_tools()
        if "search" not in {t.name for t in tools.tools}:
            raise RuntimeError("kb serve offers no 'search' tool")
        for config in wanted:  # warm-up: load models, fill caches
            await _search(client, data.queries[0], config)
        pid = server_pid()
        for number in range(count):
            query = data.queries[number]
            for shift in range(len(wanted)):
                config = wanted[(number + shift) % len(wanted)]
                cpu, started = cpu_seconds(pid), time.perf_counter()
                documents = await _search(client, query, config)
                latencies[config.name].append(time.perf_counter() - started)
                server_cpu[config.name] += cpu_seconds(pid) - cpu
                ranking = list(dict.fromkeys(documents))
                rankings[config.name].append(ranking)
                distinct[config.name].append(len(ranking))
            if (number + 1) % 100 == 0:
                print(f"    {number + 1}/{count} queries", flush=True)
    judged = beir.Dataset(
        data.name,
        data.doc_ids,
        data.titles,
        data.texts,
        data.query_ids[:count],
        data.queries[:count],
        data.qrels,
    )
    out: dict[str, dict[str, Any]] = {}
    for config in wanted:
        quality = beir.evaluate(judged, rankings[config.name])
        times = latencies[config.name]
        out[config.name] = {
            **quality.as_dict(),
            "distinct_documents": round(sum(distinct[config.name]) / count, 2),
            "p50_ms": round(1000 * beir.percentile(times, 0.5), 1),
            "p99_ms": round(1000 * beir.percentile(times, 0.99), 1),
            "server_cpu_ms_per_call": round(1000 * server_cpu[config.name] / count, 1),
            "arguments": config.arguments,
        }
    return out


def server_pid() -> int | None:
    """The ``kb serve`` child of this process (Linux ``/proc``), to read its CPU time; None elsewhere."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"serve" in cmdline and b"kb" in cmdline:
            return int(stat.parent.name)
    return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (10 ms ticks); 0 when unknown."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _search(client: Client, query: str, config: Config) -> list[str]:
    """One ``search`` call; the document ids of the passages, best first. A tool error stops the run."""
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool("search", {"query": query, "top_k": TOP_K, **config.arguments})
    if result.is_error:
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        raise RuntimeError(f"search {config.arguments} for {query[:60]!r} failed: {text}")
    payload = result.structured_content or {}
    return [str(hit["document_id"]).removeprefix("corpus.jsonl/") for hit in payload.get("results", [])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["scifact", "hotpotqa"])
    parser.add_argument("--queries", type=int, help="only the first N judged queries (a quick look)")
    parser.add_argument("--embedder", help="embed with this one, not the default (e.g. local/wordllama-256)")
    parser.add_argument("--out", type=Path, default=beir.RESULTS / "kb_quality.json")
    args = parser.parse_args()
    wanted = configs()
    report: dict[str, Any] = {
        "benchmark": "kb_quality",
        "top_k": TOP_K,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "datasets": {},
    }
    for name in args.datasets:
        data = beir.load(name)
        source = beir.DATASETS / name if (beir.DATASETS / name).is_dir() else Path(name)
        directory = ensure_kb(data, source, args.embedder)
        with open(os.devnull, "w") as devnull:
            rows = anyio.run(run_queries, directory, data, wanted, args.queries, devnull)
        report["datasets"][name] = {
            "documents": len(data.doc_ids),
            "queries": len(data.queries),
            "rows": rows,
        }
        print(f"\n{name} (hybrid target nDCG@10 >= {REFERENCE.get(name, float('nan')):.3f})")
        print(
            f"{'configuration':<22} {'nDCG@10':>8} {'R@10':>7} {'All@10':>7} {'docs':>5} "
            f"{'p50 ms':>7} {'p99 ms':>7} {'srv CPU ms':>10}"
        )
        for config, row in rows.items():
            print(
                f"{config:<22} {row['ndcg_at_10']:>8.4f} {row['recall_at_10']:>7.4f} "
                f"{row['all_at_10']:>7.4f} {row['distinct_documents']:>5.1f} "
                f"{row['p50_ms']:>7.1f} {row['p99_ms']:>7.1f} {row['server_cpu_ms_per_call']:>10.1f}",
                flush=True,
            )
    report["machine"]["load_end"] = os.getloadavg()
    if args.queries is None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
