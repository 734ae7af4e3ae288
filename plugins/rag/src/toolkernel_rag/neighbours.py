"""Nearest chunks for a batch of vectors: what an embedded knowledge base's writer answers
``KBContext.nearest`` with (an extension finding each new chunk's neighbours).

The store (Qdrant Edge) searches its appendable segment exactly, one scan per query, and every
scan maps the whole vector file into the process, so the writer does not ask it. A small request
is answered by one exact scan of the catalog's vectors, page by page (:func:`scan_nearest`: one
page held, one matrix product per page shared by the batch). A catch-up of many batches would
scan every stored vector once per batch, work growing with the square of the corpus, so past a
few scans :class:`NeighbourSearch` builds an HNSW index over the generation's vectors once and
asks it instead (:class:`NeighbourIndex`): approximate, measured against the scan in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from toolkernel_rag.catalog import Catalog


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


EXACT_CALLS = 4
"""Requests of one catalog generation answered by an exact scan before a writer builds the index.

A scan costs a read of every stored vector; building the index costs about as much as three or
four scans (one read, then each vector inserted), and each later request then costs only its own
vectors. A small ingest into a large knowledge base therefore keeps the exact scan (as cheap as
before), and a large one pays at most these scans and one build: its work grows with the corpus,
not with its square."""

EXACT_ROWS = 4096
"""Up to this many stored vectors the scan stays exact for every request (it is cheap, and the
graph of a small knowledge base stays the exact kNN whatever the history of its ingests)."""

CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 64
"""HNSW parameters (M, efConstruction, ef); with them the index found 99.85 % of the exact 11
nearest at 30,000 short notes (``docs/benchmarks.md``)."""


class NeighbourIndex:
    """An HNSW index (USearch, vectors kept at half precision: 2 bytes a dimension) over one
    catalog generation's vectors, built from one scan."""

    def __init__(self, ids: list[str], index: Any) -> None:
        self.ids = ids
        self._index = index

    @classmethod
    def build(
        cls, pages: Iterable[tuple[list[str], npt.NDArray[np.float32]]], dimension: int
    ) -> NeighbourIndex:
        """Insert every page's vectors in catalog order, on one thread: the same vectors give the
        same index (USearch draws each node's level from a generator with a fixed seed)."""
        from usearch.index import Index

        index = Index(
            ndim=dimension,
            metric="cos",
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        ids: list[str] = []
        for page_ids, matrix in pages:
            index.add(np.arange(len(ids), len(ids) + len(page_ids)), matrix, threads=1)
            ids.extend(page_ids)
        return cls(ids, index)

    def nearest(self, vectors: npt.NDArray[np.float32], top_k: int) -> list[list[tuple[int, float]]]:
        """For each vector, the rows of the ``top_k`` stored vectors the index finds most similar,
        with their cosine (computed at half precision: within about 0.001 of the exact one)."""
        found = self._index.search(vectors, min(top_k, len(self.ids)), threads=1)
        if len(vectors) == 1:  # one query: USearch answers with one row of matches
            rows = [(found.keys, found.distances)]
        else:
            rows = [(k[:n], d[:n]) for k, d, n in zip(found.keys, found.distances, found.counts, strict=True)]
        return [
            sorted(
                ((int(k), 1.0 - float(d)) for k, d in zip(keys, distances, strict=True)),
                key=lambda h: (-h[1], h[0]),
            )
            for keys, distances in rows
        ]


class NeighbourSearch:
    """How an embedded knowledge base's writer answers ``KBContext.nearest`` (unfiltered).

    Within one catalog generation (a catch-up of extensions keeps it) the first
    :data:`EXACT_CALLS` requests are answered by an exact scan; later ones, when the catalog holds
    more than :data:`EXACT_ROWS` vectors, by a :class:`NeighbourIndex` built once for the
    generation. Safe to call from several threads (a lock: a writer's ``mastra`` searches ask too).
    """

    def __init__(self, catalog: Catalog, dimension: int) -> None:
        self._catalog = catalog
        self._dimension = dimension
        self._generation = -1
        self._calls = 0
        self._rows = 0
        self._index: NeighbourIndex | None = None
        self._lock = threading.Lock()

    def nearest(self, vectors: Sequence[Sequence[float]], top_k: int) -> list[list[tuple[str, float]]]:
        """For each of ``vectors``, the ``top_k`` ``(chunk id, cosine)`` most similar, best first."""
        with self._lock:
            return self._nearest(vectors, top_k)

    def _nearest(self, vectors: Sequence[Sequence[float]], top_k: int) -> list[list[tuple[str, float]]]:
        generation = self._catalog.generation()
        if generation != self._generation:
            self.release()
            self._generation = generation
        self._calls += 1
        if self._index is None and (self._calls <= EXACT_CALLS or self._rows <= EXACT_ROWS):
            return scan_nearest(self._counted(self._catalog.vector_pages()), vectors, top_k)
        if self._index is None:
            self._index = NeighbourIndex.build(self._catalog.vector_pages(), self._dimension)
        if not vectors or top_k <= 0:
            return [[] for _ in vectors]
        ids = self._index.ids
        found = self._index.nearest(np.asarray(vectors, dtype=np.float32), top_k)
        return [[(ids[row], score) for row, score in hits] for hits in found]

    def _counted(
        self, pages: Iterable[tuple[list[str], npt.NDArray[np.float32]]]
    ) -> Iterator[tuple[list[str], npt.NDArray[np.float32]]]:
        self._rows = 0
        for ids, matrix in pages:
            self._rows += len(ids)
            yield ids, matrix

    def release(self) -> None:
        """Drop the index (after a catch-up: the next generation needs another)."""
        self._index = None
        self._calls = 0
        self._rows = 0
