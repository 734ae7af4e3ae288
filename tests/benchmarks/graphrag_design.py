"""Design measurements for the graph, in process: which extractor, normalisation and walk settings.

Run from the repository root (a script, not a test):

    .venv/bin/python tests/benchmarks/graphrag_design.py hotpotqa scifact

Seeds come from an in-process hybrid retrieval (bm25s with English stemming and stop words,
MiniLM int8 through the local-embed plugin, reciprocal rank fusion k=60 over the top 100 of
each) — the same recipe as the knowledge base's ``hybrid`` mode, computed here so the graph's
settings can be studied without a server. Settings are compared on a *development split*: the
HotpotQA questions whose id hashes (SHA-1) to 0 modulo 5 (about 100 of 500). The figures on the
other 400 are reported beside them, and the defaults were fixed before those were read; the
MCP benchmark (``graphrag_quality.py``) reports all 500 through the ``search`` tool.
Writes ``tests/benchmarks/results/graphrag_design_<data>.json``. The variants leave out the
weak similarity edges (they need vectors per chunk, and only break ties).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from graphrag_common import RESULTS, Dataset, load, metrics, minilm_vectors

from toolkernel_graphrag.graph import ChunkGraph, ChunkInput
from toolkernel_graphrag.normalise import Normalisation
from toolkernel_graphrag.phrases import extract_phrases
from toolkernel_graphrag.settings import GraphSettings, WalkSettings
from toolkernel_graphrag.walk import GraphWalker

DEPTH = 100
RRF_K = 60


def is_dev(query_id: str) -> bool:
    """The development split: about one query in five, chosen by hash, never by looking at results."""
    return int(hashlib.sha1(query_id.encode()).hexdigest(), 16) % 5 == 0


def bm25_ranking(data: Dataset) -> list[list[str]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(data.passages, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    tokens = bm25s.tokenize(data.queries, stopwords="en", stemmer=stemmer, show_progress=False)
    docs, _ = retriever.retrieve(tokens, k=DEPTH, show_progress=False, n_threads=1)
    return [[data.doc_ids[i] for i in row] for row in docs]


def dense_ranking(data: Dataset) -> list[list[str]]:
    docs, queries = minilm_vectors(data)
    scores = queries @ docs.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :DEPTH]
    return [[data.doc_ids[i] for i in row] for row in order]


def rrf(*rankings: list[list[str]]) -> list[list[str]]:
    fused = []
    for rows in zip(*rankings, strict=True):
        scores: dict[str, float] = {}
        for row in rows:
            for rank, doc in enumerate(row):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank + 1)
        fused.append(sorted(scores, key=lambda d: (-scores[d], d))[:DEPTH])
    return fused


def build(
    data: Dataset, settings: GraphSettings, extract: Callable[[str], list[str]]
) -> tuple[ChunkGraph, float]:
    """The graph of a data set, one chunk per document (no similarity edges: the variants study entities)."""
    started = time.perf_counter()
    chunks = [
        ChunkInput(id=i, document_id=i, text=x, title=t or None, metadata={"title": t})
        for i, t, x in zip(data.doc_ids, data.titles, data.texts, strict=True)
    ]
    graph = ChunkGraph(settings)
    graph.add_chunks(chunks, [extract(x) for x in data.texts])
    graph.adjacency()
    return graph, time.perf_counter() - started


def graph_ranking(
    data: Dataset, graph: ChunkGraph, walk: WalkSettings, seeds: list[list[str]]
) -> list[list[str]]:
    walker = GraphWalker(graph, walk)
    out = []
    for query, seed in zip(data.queries, seeds, strict=True):
        entities = [graph.key(s) for s in extract_phrases(query)]
        out.append([r.chunk_id for r in walker.rank(seed, entities, top_k=10)])
    return out


def split_metrics(data: Dataset, ranking: list[list[str]]) -> dict[str, dict[str, float]]:
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


def show(label: str, figures: dict[str, dict[str, float]]) -> None:
    parts = [f"{split} nDCG {m['ndcg@10']:.3f} All {m['all@10']:.3f}" for split, m in figures.items()]
    print(f"{label:48s} " + " | ".join(parts), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--variants", default="all", help="comma-separated variant names, or 'all'")
    parser.add_argument(
        "--seeds",
        choices=("hybrid", "bm25"),
        default="hybrid",
        help="bm25: seeds from BM25 alone (when MiniLM vectors are not cached)",
    )
    args = parser.parse_args()
    results: dict[str, Any] = {}
    variants: dict[str, tuple[GraphSettings, WalkSettings]] = {
        "default": (GraphSettings(knn=0), WalkSettings()),
        "normalisation case": (GraphSettings(knn=0, normalisation=Normalisation.CASE), WalkSettings()),
        "normalisation exact": (GraphSettings(knn=0, normalisation=Normalisation.EXACT), WalkSettings()),
        "no sub-phrases": (GraphSettings(knn=0, subphrases=False), WalkSettings()),
        "title weight 1": (GraphSettings(knn=0, title_weight=1.0), WalkSettings()),
        "no query entities": (GraphSettings(knn=0), WalkSettings(entity_seed_share=0.0)),
        "walk only (fusion=pagerank)": (GraphSettings(knn=0), WalkSettings(fusion="pagerank")),
        "fusion k=10": (GraphSettings(knn=0), WalkSettings(fusion_k=10)),
        "fusion k=30": (GraphSettings(knn=0), WalkSettings(fusion_k=30)),
    }
    chosen = list(variants) if args.variants == "all" else args.variants.split(",")
    for name in args.datasets:
        data = load(name)
        bm25 = bm25_ranking(data)
        lines: dict[str, Any] = {}
        baselines = [("bm25", bm25)]
        hybrid = bm25
        if args.seeds == "hybrid":
            dense = dense_ranking(data)
            hybrid = rrf(bm25, dense)
            baselines += [("dense minilm", dense), ("hybrid rrf", hybrid)]
        for label, ranking in baselines:
            lines[label] = split_metrics(data, ranking)
            show(f"{name} {label}", lines[label])
        graphs: dict[str, tuple[ChunkGraph, float]] = {}
        for variant in chosen:
            settings, walk = variants[variant]
            identity = json.dumps(settings.graph_identity(), sort_keys=True)
            if identity not in graphs:
                graphs[identity] = build(data, settings, extract_phrases)
            graph, seconds = graphs[identity]
            started = time.perf_counter()
            ranking = graph_ranking(data, graph, walk, hybrid)
            per_query_ms = 1000 * (time.perf_counter() - started) / len(data.queries)
            lines[f"graph {variant}"] = {
                **split_metrics(data, ranking),
                "build_s": seconds,
                "query_ms": per_query_ms,
                "entities": graph.entity_count,
            }
            show(
                f"{name} graph {variant} ({seconds:.1f} s, {per_query_ms:.1f} ms/q)",
                split_metrics(data, ranking),
            )
        results[name] = {"seeds": args.seeds, "lines": lines}
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"graphrag_design_{name}.json"
        if path.exists() and args.variants != "all":  # a partial run adds its lines to the last full one
            earlier = json.loads(path.read_text())
            earlier["lines"].update(lines)
            results[name] = earlier
        path.write_text(json.dumps(results[name], indent=2) + "\n")


if __name__ == "__main__":
    main()
