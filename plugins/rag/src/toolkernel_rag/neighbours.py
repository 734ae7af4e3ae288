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
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    names: dict[int, str] = {}  # the ids of the rows among the best so far, nothing more
    offset = 0
    for ids, matrix in pages:
        scores = np.concatenate([best_scores, queries @ _unit(matrix).T], axis=1)
        page_rows = np.broadcast_to(np.arange(offset, offset + len(ids)), (len(queries), len(ids)))
        rows = np.concatenate([best_rows, page_rows], axis=1)
        if scores.shape[1] > top_k:  # the k best of each row, unordered, then ordered
            part = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
            scores, rows = np.take_along_axis(scores, part, axis=1), np.take_along_axis(rows, part, axis=1)
        order = np.lexsort((rows, -scores), axis=1)
        best_scores = np.take_along_axis(scores, order, axis=1)
        best_rows = np.take_along_axis(rows, order, axis=1)
        kept = {int(r) for r in np.unique(best_rows)}
        names = {r: names[r] if r in names else ids[r - offset] for r in kept}
        offset += len(ids)
    return [
        [(names[int(r)], float(s)) for r, s in zip(row_rows, row_scores, strict=True)]
        for row_rows, row_scores in zip(best_rows, best_scores, strict=True)
    ]
