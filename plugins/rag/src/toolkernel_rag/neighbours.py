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
    (ties: the earlier row, except among equal scores at a page's own k-th place)."""
    if not vectors or top_k <= 0:
        return [[] for _ in vectors]
    queries = _unit(np.asarray(vectors, dtype=np.float32))
    best_scores = np.full((len(queries), top_k), -np.inf, dtype=np.float32)
    best_rows = np.full((len(queries), top_k), np.iinfo(np.int64).max, dtype=np.int64)
    names: dict[int, str] = {}  # the ids of the rows among the best so far, nothing more
    offset = 0
    for ids, matrix in pages:
        scores = queries @ _unit(matrix).T
        columns = np.arange(len(ids))[None, :].repeat(len(queries), axis=0)
        if len(ids) > top_k:  # the page's k best per row (unordered), then merged with the best so far
            columns = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, columns, axis=1)], axis=1)
        merged_rows = np.concatenate([best_rows, columns + offset], axis=1)
        order = np.lexsort((merged_rows, -merged_scores), axis=1)[:, :top_k]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_rows = np.take_along_axis(merged_rows, order, axis=1)
        kept = {int(r) for r in np.unique(best_rows) if r < offset + len(ids)}
        names = {r: names[r] if r in names else ids[r - offset] for r in kept}
        offset += len(ids)
    return [
        [(names[int(r)], float(s)) for r, s in zip(row_rows, row_scores, strict=True) if np.isfinite(s)]
        for row_rows, row_scores in zip(best_rows, best_scores, strict=True)
    ]
