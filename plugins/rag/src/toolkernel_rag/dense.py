"""How a reader reaches the dense vectors of an embedded knowledge base: an exact in-memory matrix.

An embedded vector store (Qdrant Edge, or any store given a ``path``) opens in one process
at a time, and that process is the writer. A reader (``kb serve``, ``kb stats``, the Python
API opened read-only) therefore never opens it: it loads every chunk's float32 vector from
the catalog (which holds them all) into one normalised matrix and ranks by exact cosine
similarity with one matrix-vector product. The store searches its appendable segment
exactly too, so the ranking is the same; ``docs/plugins/rag.md`` has the measured
alternatives (a private Edge shard per reader, snapshots) and why this one was chosen.

A matrix belongs to one catalog generation and is never changed: the next one is made from it
and the catalog's changes (rows appended, removed rows masked) and swapped in whole, so a
search never mixes two generations.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from toolkernel.filters import coerce_filter, matches

if TYPE_CHECKING:
    from toolkernel_rag.catalog import Catalog

FILTER_CACHE = 32
"""Filters whose allowed-row masks a matrix keeps (a server's mandatory filter repeats)."""


@dataclass(frozen=True, slots=True)
class DenseHit:
    """One ranked chunk: its id, cosine similarity and metadata (as the store would return them)."""

    id: str
    score: float
    metadata: Mapping[str, Any]


@dataclass
class VectorMatrix:
    """Every chunk vector of one catalog generation, normalised, one row per chunk (rowid order).

    A new generation's matrix shares its predecessor's buffer: new rows are written past the
    rows the older matrix uses (which it never reads) and removed rows are masked, so following
    a small change costs the change, not the matrix. When a fifth of the rows are dead, or the
    buffer is full, the next matrix is copied afresh.
    """

    generation: int
    ids: list[str]
    metadata: list[dict[str, Any]]
    buffer: npt.NDArray[np.float32]
    """Rows ``[0, len(ids))`` are this matrix's; rows past them may belong to a newer one."""
    rowids: npt.NDArray[np.int64]
    live: npt.NDArray[np.bool_]
    _masks: OrderedDict[str, tuple[Any, npt.NDArray[np.bool_]]] = field(default_factory=OrderedDict)
    """A filter's parsed form and which rows it allows (a server's mandatory filter repeats)."""

    @property
    def matrix(self) -> npt.NDArray[np.float32]:
        return self.buffer[: len(self.ids)]

    @classmethod
    def load(cls, catalog: Catalog, generation: int, dimension: int) -> VectorMatrix:
        """The matrix of the catalog as it is now (call inside :meth:`Catalog.reading`)."""
        empty = cls(
            generation, [], [], np.zeros((0, dimension), np.float32), np.zeros(0, np.int64), np.zeros(0, bool)
        )
        return empty.apply(catalog, generation, 0, [])

    @property
    def max_rowid(self) -> int:
        return int(self.rowids[-1]) if len(self.rowids) else 0

    def apply(self, catalog: Catalog, generation: int, after: int, removed: list[int]) -> VectorMatrix:
        """The next generation's matrix: chunks above rowid ``after`` added (read from ``catalog``
        inside its :meth:`Catalog.reading`), ``removed`` rowids masked."""
        rowids, ids, metadata, blob = catalog.vectors_above(after)
        dimension = self.buffer.shape[1]
        added = np.frombuffer(blob, dtype=np.float32).reshape(len(ids), dimension).copy()
        norms = np.linalg.norm(added, axis=1, keepdims=True)
        added /= np.where(norms == 0, 1.0, norms)
        live = self.live.copy()
        if removed:
            live[np.isin(self.rowids, np.asarray(removed, dtype=np.int64))] = False
        n, total = len(self.ids), len(self.ids) + len(ids)
        dead = n - int(live.sum())
        if dead * 5 > total or total > len(self.buffer):
            keep = np.flatnonzero(live)
            buffer = np.empty((max(total - dead, 16) * 5 // 4, dimension), dtype=np.float32)
            buffer[: len(keep)] = self.buffer[keep]
            old_ids = [self.ids[i] for i in keep]
            old_metadata = [self.metadata[i] for i in keep]
            old_rowids, live = self.rowids[keep], live[keep]
            masks: OrderedDict[str, tuple[Any, npt.NDArray[np.bool_]]] = OrderedDict()
            n = len(keep)
        else:
            buffer, old_ids, old_metadata, old_rowids = self.buffer, self.ids, self.metadata, self.rowids
            masks = OrderedDict((key, mask) for key, mask in self._masks.items())
        buffer[n : n + len(ids)] = added
        out = VectorMatrix(
            generation,
            old_ids + ids,
            old_metadata + metadata,
            buffer,
            np.concatenate([old_rowids, np.asarray(rowids, dtype=np.int64)]),
            np.concatenate([live, np.ones(len(ids), dtype=bool)]),
        )
        for key, (parsed, mask) in masks.items():  # a filter's mask grows by the new rows alone
            extra = np.fromiter((matches(parsed, m) for m in metadata), dtype=bool, count=len(metadata))
            out._masks[key] = (parsed, np.concatenate([mask, extra]))
        return out

    def query(self, vector: list[float], top_k: int, filter: Mapping[str, Any] | None) -> list[DenseHit]:
        """The ``top_k`` chunks most similar to ``vector`` among those ``filter`` allows, best first."""
        if not self.ids or top_k <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        # numpy's own single-threaded loop: OpenBLAS's matrix-vector product spins its threads
        # and took 11-21 ms for 13k x 256 on a busy 2-core machine, einsum 1.1 ms.
        scores = np.einsum("ij,j->i", self.matrix, q / norm if norm else q)
        candidates: npt.NDArray[np.intp] | None = None
        mask = self._mask(filter)
        if mask is not None or not self.live.all():
            candidates = np.flatnonzero(self.live if mask is None else mask & self.live)
            pool = scores[candidates]
        else:
            pool = scores
        k = min(top_k, len(pool))
        if k == 0:
            return []
        best = np.argpartition(-pool, k - 1)[:k] if k < len(pool) else np.arange(len(pool))
        best = best[np.argsort(-pool[best], kind="stable")]
        rows = candidates[best] if candidates is not None else best
        return [DenseHit(self.ids[r], float(scores[r]), self.metadata[r]) for r in rows]

    def _mask(self, filter: Mapping[str, Any] | None) -> npt.NDArray[np.bool_] | None:
        parsed = coerce_filter(filter)
        if parsed is None:
            return None
        key = json.dumps(filter, sort_keys=True, default=str)
        found = self._masks.get(key)
        if found is None:
            test: Callable[[Mapping[str, Any]], bool] = lambda meta: matches(parsed, meta)  # noqa: E731
            mask = np.fromiter((test(m) for m in self.metadata), dtype=bool, count=len(self.metadata))
            if len(self._masks) >= FILTER_CACHE:
                self._masks.popitem(last=False)
            self._masks[key] = found = (parsed, mask)
        return found[1]
