"""Nearest chunks for a batch of vectors by one exact scan of the catalog's vectors, page by page.

What an embedded knowledge base's writer answers ``KBContext.nearest`` with: the store (Qdrant
Edge) searches its appendable segment exactly too, one scan per query, and every scan maps the
whole vector file into the process (a writer's resident memory would grow with the corpus).
One scan of the catalog per batch holds a single page of vectors and shares the scan among
every vector of the batch (one matrix product per page).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt


def _unit(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = matrix / np.maximum(norms, 1e-12)
    return unit


def scan_nearest(
    pages: Iterable[tuple[list[str], npt.NDArray[np.float32]]],
    vectors: Sequence[Sequence[float]],
    top_k: int,
) -> list[list[tuple[str, float]]]:
    """For each of ``vectors``, the ``top_k`` ``(id, cosine)`` of ``pages`` most similar, best first
    (ties: the earlier row)."""
    if not vectors or top_k <= 0:
        return [[] for _ in vectors]
    queries = _unit(np.asarray(vectors, dtype=np.float32))
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_ids: npt.NDArray[np.object_] = np.empty((len(queries), 0), dtype=object)
    for ids, matrix in pages:
        page_ids = np.broadcast_to(np.asarray(ids, dtype=object), (len(queries), len(ids)))
        scores = np.concatenate([best_scores, queries @ _unit(matrix).T], axis=1)
        names = np.concatenate([best_ids, page_ids], axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
        best_scores = np.take_along_axis(scores, order, axis=1)
        best_ids = np.take_along_axis(names, order, axis=1)
    return [
        [(str(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True)]
        for row_ids, row_scores in zip(best_ids, best_scores, strict=True)
    ]
