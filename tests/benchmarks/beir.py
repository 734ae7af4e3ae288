"""BEIR-style data sets and retrieval metrics shared by the knowledge-base benchmarks.

A data set directory holds ``corpus.jsonl`` (``id``, ``title``, ``text``), ``queries.jsonl``
(``id``, ``text``) and ``qrels.tsv`` (``query-id``, ``corpus-id``, ``score`` with a header line).
The metrics follow BEIR: nDCG@k with graded gains and a log2 discount, Recall@k, and All@k
(the share of queries whose every relevant document is in the top k, the figure multi-hop sets
need). Query embeddings are cached under a gitignored directory, beside the benchmark knowledge
bases, because MiniLM on a busy two-core machine is slow.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]
DATASETS = next(
    (up / "shared" / "datasets" for up in REPO.parents if (up / "shared" / "datasets").is_dir()),
    REPO.parent / "shared" / "datasets",
)
"""The sibling ``../shared/datasets`` of the checkout (or of a parent, for a worktree nested one deeper)."""
CACHE = REPO / "tests" / "benchmarks" / ".cache"
RESULTS = REPO / "tests" / "benchmarks" / "results"

Ranking = Sequence[Sequence[str]]
"""Per query (in query order), document ids best first."""


@dataclass(frozen=True)
class Dataset:
    """A data set as loaded: documents, the judged queries, and which documents answer which query."""

    name: str
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]]

    @property
    def docs(self) -> list[str]:
        """Title and text joined, as the embedders and BM25 see each document."""
        return [f"{title} {text}".strip() for title, text in zip(self.titles, self.texts, strict=True)]


def load(name_or_path: str | Path) -> Dataset:
    """Read a BEIR-style directory (a bare name resolves under ``DATASETS``); keep judged queries only."""
    path = Path(name_or_path)
    if not path.is_absolute() and not path.exists():
        path = DATASETS / str(name_or_path)
    missing = [f for f in ("corpus.jsonl", "queries.jsonl", "qrels.tsv") if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{path} is not a BEIR-style data set: missing {', '.join(missing)}")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate((path / "qrels.tsv").read_text().splitlines()[1:], start=2):
        parts = line.split("\t")
        if len(parts) != 3:
            raise ValueError(f"{path / 'qrels.tsv'} line {number}: expected 3 tab-separated fields")
        query_id, doc_id, relevance = parts
        if int(relevance) > 0:
            qrels.setdefault(query_id, {})[doc_id] = int(relevance)
    corpus = [json.loads(line) for line in (path / "corpus.jsonl").read_text().splitlines() if line.strip()]
    queries = [json.loads(line) for line in (path / "queries.jsonl").read_text().splitlines() if line.strip()]
    queries = [q for q in queries if q["id"] in qrels]
    return Dataset(
        name=path.name,
        doc_ids=[str(d["id"]) for d in corpus],
        titles=[str(d.get("title") or "") for d in corpus],
        texts=[str(d.get("text") or "") for d in corpus],
        query_ids=[str(q["id"]) for q in queries],
        queries=[str(q["text"]) for q in queries],
        qrels=qrels,
    )


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranking: graded gains, ``1/log2(rank + 1)`` discount, a repeated id counts once."""
    seen: set[str] = set()
    dcg = 0.0
    for rank, doc in enumerate(ranked[:k]):
        if doc not in seen:
            dcg += relevant.get(doc, 0) / math.log2(rank + 2)
            seen.add(doc)
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Share of the relevant documents found in the top k."""
    wanted = {doc for doc, gain in relevant.items() if gain > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def all_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """1.0 if every relevant document is in the top k, else 0.0."""
    return 1.0 if recall_at(ranked, relevant, k) == 1.0 else 0.0


@dataclass(frozen=True)
class Quality:
    """Mean metrics over a query set."""

    ndcg_at_10: float
    recall_at_10: float
    all_at_10: float

    def as_dict(self) -> dict[str, float]:
        """Rounded figures for the JSON results."""
        return {k: round(v, 4) for k, v in vars(self).items()}


def evaluate(data: Dataset, ranking: Ranking, k: int = 10) -> Quality:
    """Mean nDCG@k, Recall@k and All@k of ``ranking`` (one list of ids per query, in query order)."""
    if len(ranking) != len(data.query_ids):
        raise ValueError(f"{len(ranking)} rankings for {len(data.query_ids)} queries")
    rows = [
        (ndcg_at(r, data.qrels[q], k), recall_at(r, data.qrels[q], k), all_at(r, data.qrels[q], k))
        for q, r in zip(data.query_ids, ranking, strict=True)
    ]
    n = len(rows) or 1
    return Quality(*(sum(col) / n for col in zip(*rows, strict=True)))


def percentile(samples: Sequence[float], share: float) -> float:
    """The ``share`` quantile (0..1) of ``samples`` by linear interpolation; raises on an empty list."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = share * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def cached_query_embeddings(
    data: Dataset, model: str, embed: Callable[[list[str]], npt.NDArray[np.float32]], cache: Path = CACHE
) -> npt.NDArray[np.float32]:
    """Query vectors of ``data`` under ``model``, computed once and kept in ``cache``."""
    digest = hashlib.sha256("\n".join(data.queries).encode()).hexdigest()[:12]
    path = cache / f"{data.name}-queries-{model.replace('/', '__')}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = embed(data.queries)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def local_embed(model: str = "minilm-l6-int8") -> Callable[[list[str]], npt.NDArray[np.float32]]:
    """A blocking ``embed(texts) -> array`` over the ``local/<model>`` embedder plugin."""
    import anyio

    from toolkernel.registries import EmbedderRegistry
    from toolkernel_local_embed import plugin as local_plugin

    registry = EmbedderRegistry()
    local_plugin.register_embedders(registry)
    embedder = registry.get("local")(model)

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        return np.asarray(anyio.run(embedder.embed, texts), dtype=np.float32)

    return embed
