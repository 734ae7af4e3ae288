"""Shared parts of the GraphRAG benchmarks: BEIR-style data sets, cached MiniLM vectors, metrics.

Not a benchmark itself. Vectors are cached under ``tests/benchmarks/.cache/`` (gitignored):
embedding a 5k-passage corpus with MiniLM int8 takes minutes on two cores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import anyio
import numpy as np
import numpy.typing as npt

from toolkernel import Kernel
from toolkernel_local_embed import plugin as local_plugin

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "tests" / "benchmarks" / ".cache"
RESULTS = REPO / "tests" / "benchmarks" / "results"
K = 10

Vectors = npt.NDArray[np.float32]


def shared_datasets() -> Path:
    """``shared/datasets`` beside the clone (CI), or the workplace's copy when working in a worktree."""
    for root in (REPO.parent / "shared", REPO.parents[1] / "shared", REPO.parents[2] / "shared"):
        if (root / "datasets").is_dir():
            return root / "datasets"
    raise FileNotFoundError("no shared/datasets directory beside the repository")


@dataclass
class Dataset:
    """A BEIR-style data set: documents (one per corpus record), queries, relevance judgements."""

    name: str
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]]

    @property
    def passages(self) -> list[str]:
        """What gets embedded and indexed: title and text."""
        return [f"{t}\n{x}".strip() for t, x in zip(self.titles, self.texts, strict=True)]


def load(name: str) -> Dataset:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.tsv``; keep queries that have judgements."""
    data = shared_datasets() / name
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels.tsv").read_text().splitlines()[1:]:
        query_id, doc_id, relevance = line.split("\t")
        qrels.setdefault(query_id, {})[doc_id] = int(relevance)
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines() if line]
    queries = [json.loads(line) for line in (data / "queries.jsonl").read_text().splitlines() if line]
    queries = [q for q in queries if q["id"] in qrels]
    return Dataset(
        name=name,
        doc_ids=[str(d["id"]) for d in corpus],
        titles=[d.get("title") or "" for d in corpus],
        texts=[d["text"] for d in corpus],
        query_ids=[q["id"] for q in queries],
        queries=[q["text"] for q in queries],
        qrels=qrels,
    )


def minilm_vectors(data: Dataset) -> tuple[Vectors, Vectors]:
    """Unit-length MiniLM int8 vectors of the passages and the queries, cached between runs."""
    path = CACHE / f"{data.name}__minilm-l6-int8.npz"
    if path.exists():
        stored = np.load(path)
        return stored["docs"], stored["queries"]
    kernel = Kernel(load_entry_points=False, plugins=[local_plugin])
    embedder = kernel.embedder("local/minilm-l6-int8")

    def embed(texts: list[str]) -> Vectors:
        return np.asarray(anyio.run(embedder.embed, texts), dtype=np.float32)

    docs, queries = embed(data.passages), embed(data.queries)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, docs=docs, queries=queries)
    return docs, queries


def metrics(data: Dataset, ranking: list[list[str]]) -> dict[str, float]:
    """Mean nDCG@10, Recall@10 and All@10 (every relevant document in the top 10) over the queries."""
    ndcgs, recalls, alls = [], [], []
    for query_id, ranked in zip(data.query_ids, ranking, strict=True):
        relevant = data.qrels[query_id]
        top = ranked[:K]
        dcg = sum(relevant.get(doc, 0) / np.log2(rank + 2) for rank, doc in enumerate(top))
        ideal = sorted(relevant.values(), reverse=True)[:K]
        idcg = sum(gain / np.log2(rank + 2) for rank, gain in enumerate(ideal))
        found = {doc for doc in top if relevant.get(doc, 0) > 0}
        wanted = {doc for doc, gain in relevant.items() if gain > 0}
        ndcgs.append(dcg / idcg)
        recalls.append(len(found) / len(wanted))
        alls.append(float(found == wanted))
    return {
        "ndcg@10": float(np.mean(ndcgs)),
        "recall@10": float(np.mean(recalls)),
        "all@10": float(np.mean(alls)),
    }


if __name__ == "__main__":
    import sys
    import time

    for name in sys.argv[1:]:
        started = time.perf_counter()
        dataset = load(name)
        docs, queries = minilm_vectors(dataset)
        print(name, docs.shape, queries.shape, f"{time.perf_counter() - started:.0f} s", flush=True)
