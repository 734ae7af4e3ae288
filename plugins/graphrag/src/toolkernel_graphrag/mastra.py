"""Mastra's GraphRAG algorithm, for parity: a cosine-threshold graph and random walks with restart.

What Mastra's ``GraphRAG`` (``@mastra/rag``) does, step for step: every pair of chunks whose
cosine similarity exceeds ``threshold`` is joined by an undirected edge weighted by that
similarity; a query takes the ``top_k`` chunks most similar to the query vector as seeds and,
from each, walks ``random_walk_steps`` steps, restarting at the seed with probability
``restart_prob`` (or when a node has no neighbour) and otherwise moving to a neighbour chosen
in proportion to edge weight; a chunk's score is the sum over seeds of the seed's similarity
times the share of that walk's steps spent on the chunk.

Two things differ, both fixes: the walks draw from a generator seeded by the query and the
parameters, so the same query gives the same ranking; and the graph is built over the
candidates of *each* query, where Mastra's tool builds it once, from the first query's
results, and reuses it for every later query. Pair similarities are one matrix product
(numpy), where Mastra compares every pair in a JavaScript loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class MastraHit:
    """A chunk (by its position in the vectors given) and its Mastra score."""

    index: int
    score: float


def _unit(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def similarity_graph(vectors: Vectors, threshold: float, block: int = 1024) -> sp.csr_array:
    """Undirected edges between chunks whose cosine similarity exceeds ``threshold``, weighted by it.

    Each block of rows is compared with itself and the rows after it (a pair is computed once),
    one float32 BLAS product per block into a buffer reused across blocks, so memory stays at
    ``block x n`` floats and no block allocates; the matrix is built once from every block's pairs.
    """
    unit = _unit(np.asarray(vectors, dtype=np.float32))
    n = unit.shape[0]
    rows, cols, weights = [], [], []
    sims_buffer = np.empty((min(block, n), n), dtype=np.float32)
    above_buffer = np.empty((min(block, n), n), dtype=bool)
    for start in range(0, n, block):
        height, width = min(block, n - start), n - start
        sims, above = sims_buffer[:height, :width], above_buffer[:height, :width]
        np.matmul(unit[start : start + height], unit[start:].T, out=sims)
        np.greater(sims, threshold, out=above)
        r, c = np.nonzero(above)
        upper = c > r  # column c of this block is row start + c: keep each pair once, no self-pairs
        r, c = r[upper], c[upper]
        rows.append(r + start)
        cols.append(c + start)
        weights.append(sims[r, c])
    r, c = np.concatenate(rows), np.concatenate(cols)
    w = np.concatenate(weights).astype(np.float64)
    return sp.csr_array(
        (np.concatenate([w, w]), (np.concatenate([r, c]), np.concatenate([c, r]))), shape=(n, n)
    )


def _walk(
    graph: sp.csr_array, start: int, steps: int, restart_prob: float, rng: np.random.Generator
) -> dict[int, float]:
    """Visit shares of one random walk with restart from ``start`` (Mastra's ``randomWalkWithRestart``)."""
    visits: dict[int, int] = {}
    current = start
    indptr, indices, data = graph.indptr, graph.indices, graph.data
    for _ in range(steps):
        visits[current] = visits.get(current, 0) + 1
        if rng.random() < restart_prob:
            current = start
            continue
        lo, hi = indptr[current], indptr[current + 1]
        if lo == hi:
            current = start
            continue
        weights = data[lo:hi]
        current = int(indices[lo + rng.choice(hi - lo, p=weights / weights.sum())])
    return {node: count / steps for node, count in visits.items()}


def walk_seed(query: Sequence[float] | str, *params: float) -> int:
    """A generator seed from the query and the walk's parameters: same inputs, same walks."""
    text = query if isinstance(query, str) else np.asarray(query, dtype=np.float32).tobytes().hex()
    digest = hashlib.sha256(repr((text, params)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def mastra_query(
    vectors: Vectors,
    query_vector: Sequence[float],
    *,
    top_k: int = 10,
    random_walk_steps: int = 100,
    restart_prob: float = 0.15,
    threshold: float = 0.7,
    seed: int | None = None,
    graph: sp.csr_array | None = None,
) -> list[MastraHit]:
    """Mastra's ``GraphRAG.query`` over ``vectors`` (the graph's nodes); ``seed`` fixes the walks."""
    unit = _unit(np.asarray(vectors, dtype=np.float32))
    if graph is None:
        graph = similarity_graph(unit, threshold)
    query = np.asarray(query_vector, dtype=np.float32)
    query = query / max(float(np.linalg.norm(query)), 1e-12)
    sims = unit @ query
    seeds = np.argsort(-sims, kind="stable")[:top_k]
    if seed is None:
        seed = walk_seed(query_vector, random_walk_steps, restart_prob, threshold, top_k)
    rng = np.random.default_rng(seed)
    scores: dict[int, float] = {}
    for node in seeds.tolist():
        for visited, share in _walk(graph, node, random_walk_steps, restart_prob, rng).items():
            scores[visited] = scores.get(visited, 0.0) + float(sims[node]) * share
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:top_k]
    return [MastraHit(index, score) for index, score in ranked]
