"""Nearest chunks for a batch of vectors: what an embedded knowledge base's writer answers
``KBContext.nearest`` with (an extension finding each new chunk's neighbours).

The store (Qdrant Edge) searches its appendable segment exactly, one scan per query, and every
scan maps the whole vector file into the process, so the writer does not ask it. A small request
is answered by one exact scan of the catalog's vectors, page by page (:func:`scan_nearest`: one
page held, one matrix product per page shared by the batch). A catch-up of many batches would
scan every stored vector once per batch, work growing with the square of the corpus, so past a
few scans :class:`NeighbourSearch` builds an HNSW index over the generation's vectors once (8-bit
projections, keyed by catalog row) and asks it for candidates that are then scored exactly against
the catalog's vectors (:class:`NeighbourIndex`): approximate, measured against the scan in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    # The ids of the best so far, as a numpy array: keeping the pages' own id strings pinned a
    # megabyte of Python's allocator per page they came from (+10 MiB over 30 pages).
    best_ids = np.full((len(queries), top_k), "", dtype=str)
    offset = 0
    for ids, matrix in pages:
        scores = queries @ _unit(matrix).T
        columns = np.arange(len(ids))[None, :].repeat(len(queries), axis=0)
        if len(ids) > top_k:  # the page's k best per row (unordered), then merged with the best so far
            columns = np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]
        page_ids = np.asarray(ids, dtype=str)[columns]
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, columns, axis=1)], axis=1)
        merged_rows = np.concatenate([best_rows, columns + offset], axis=1)
        order = np.lexsort((merged_rows, -merged_scores), axis=1)[:, :top_k]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_rows = np.take_along_axis(merged_rows, order, axis=1)
        best_ids = np.take_along_axis(np.concatenate([best_ids, page_ids], axis=1), order, axis=1)
        offset += len(ids)
    return [
        [(str(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if np.isfinite(s)]
        for row_ids, row_scores in zip(best_ids, best_scores, strict=True)
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

CONNECTIVITY = 8
EXPANSION_ADD = 64
EXPANSION_SEARCH = 64
"""HNSW parameters (M, efConstruction, ef; the search widens ef to the candidates asked for)."""

PROJECTED = 128
"""Dimensions the index keeps of each vector: its coordinates along the generation's principal
directions (of the unit vectors' second moment), at 8 bits each."""

CANDIDATE_FACTOR = 8
"""Candidates the index is asked for, in multiples of ``top_k``, before they are scored exactly
against the catalog's vectors (``docs/benchmarks.md``: 99.6 % of the exact 11 nearest at 30,000
short notes, 99.0 % on HotpotQA's passages)."""


RESCORE_ROWS = 512
"""Candidates' vectors read back from the catalog at a time to score them (512 KB at 256
dimensions: a batch's candidates read at once held about 25 MB at 64 chunks and 88 candidates)."""


class NeighbourIndex:
    """An HNSW index (USearch) over one catalog generation's vectors, keyed by catalog row number,
    that holds each vector as :data:`PROJECTED` coordinates of 8 bits (128 bytes, against 1,024 in
    the catalog at 256 dimensions) plus its links: it only proposes candidates, which are scored
    exactly against the catalog's float32 vectors, read back by row in one query per request."""

    def __init__(self, catalog: Catalog, index: Any, projection: npt.NDArray[np.float32]) -> None:
        self._catalog = catalog
        self._index = index
        self._projection = projection

    @classmethod
    def build(cls, catalog: Catalog, dimension: int) -> NeighbourIndex:
        """Two reads of the catalog's vectors: the principal directions, then every done chunk's
        vector inserted in row order on one thread (the same vectors give the same index: USearch
        draws each node's level from a generator with a fixed seed)."""
        from usearch.index import Index

        moment = np.zeros((dimension, dimension), dtype=np.float64)
        for _, matrix in catalog.vector_rows():
            unit = _unit(matrix)
            moment += unit.T @ unit
        _, vectors = np.linalg.eigh(moment)  # ascending eigenvalues: the last columns lead
        projection = np.ascontiguousarray(vectors[:, ::-1][:, :PROJECTED], dtype=np.float32)
        index = Index(
            ndim=projection.shape[1],
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
            enable_key_lookups=False,  # searches return keys; no key-to-slot table (1 MiB at 30,000)
        )
        for rows, matrix in catalog.vector_rows():
            index.add(rows, _unit(matrix) @ projection, threads=1)
        return cls(catalog, index, projection)

    def __len__(self) -> int:
        return len(self._index)

    def nearest(self, vectors: npt.NDArray[np.float32], top_k: int) -> list[list[tuple[str, float]]]:
        """For each vector, the ``top_k`` ``(chunk id, cosine)`` among the index's
        ``CANDIDATE_FACTOR * top_k`` candidates, scored exactly, best first (ties: the earlier row)."""
        queries = _unit(vectors)
        found = self._index.search(queries @ self._projection, CANDIDATE_FACTOR * top_k, threads=1)
        keys = np.atleast_2d(np.asarray(found.keys, dtype=np.int64))  # one query: one row of matches
        counts = np.atleast_1d(np.asarray(found.counts if len(vectors) > 1 else len(found.keys)))
        keys[np.arange(keys.shape[1])[None, :] >= counts[:, None]] = -1  # past a row's matches
        scores = np.full(keys.shape, -np.inf, dtype=np.float32)
        names = np.full(keys.shape, "", dtype=str)  # not the pages' strings (see scan_nearest)
        wanted = np.unique(keys[keys >= 0])
        for first in range(0, len(wanted), RESCORE_ROWS):  # a page of candidates' vectors at a time
            rows, ids, matrix = self._catalog.vectors_at(wanted[first : first + RESCORE_ROWS].tolist())
            if not len(rows):
                continue
            page_scores = queries @ _unit(matrix).T
            at = np.minimum(np.searchsorted(rows, keys), len(rows) - 1)
            hit = rows[at] == keys
            scores[hit] = page_scores[np.nonzero(hit)[0], at[hit]]
            page_ids = np.asarray(ids, dtype=str)
            names = names.astype(np.result_type(names, page_ids))
            names[hit] = page_ids[at[hit]]
        out = []
        for row_keys, row_names, row_scores in zip(keys, names, scores, strict=True):
            order = np.lexsort((row_keys, -row_scores))[:top_k]
            out.append(
                [(str(row_names[i]), float(row_scores[i])) for i in order if np.isfinite(row_scores[i])]
            )
        return out


class NeighbourSearch:
    """How an embedded knowledge base's writer answers ``KBContext.nearest`` (unfiltered).

    Within one catalog generation (a catch-up of extensions keeps it) the first
    :data:`EXACT_CALLS` requests are answered by an exact scan; later ones, when the catalog holds
    more than :data:`EXACT_ROWS` vectors, by a :class:`NeighbourIndex` built once for the
    generation. Safe to call from several threads (a lock: a writer's ``mastra`` searches ask too).
    """

    def __init__(
        self, catalog: Catalog, dimension: int, before_build: Callable[[], None] | None = None
    ) -> None:
        self._catalog = catalog
        self._dimension = dimension
        self._before_build = before_build
        """Called before the index is built: the writer frees what a catch-up does not use."""
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
            if self._before_build is not None:
                self._before_build()
            self._index = NeighbourIndex.build(self._catalog, self._dimension)
        if not vectors or top_k <= 0 or not len(self._index):
            return [[] for _ in vectors]
        return self._index.nearest(np.asarray(vectors, dtype=np.float32), top_k)

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
