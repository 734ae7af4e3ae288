"""The Qdrant store embedded in-process with ``qdrant-edge-py`` (the real Qdrant engine, no server).

Each index is one Edge shard in its own directory, next to a small ``toolkernel-index.json``
that records its dimension and metric (a shard does not report its configuration). Without
a ``path`` the shards live in a temporary directory removed by :meth:`QdrantEdgeStore.aclose`.

Shard calls are blocking native code (which releases the GIL), so they run in worker threads:
searches and counts in a few warm threads of the store's own (:class:`toolkernel.threads.WorkerThreads`,
a cheaper hand-off than ``anyio.to_thread``), writes in anyio's threads, serialized per index
by a lock while searches run concurrently; after each write the shard's file pages leave the
process's resident set (:mod:`toolkernel_qdrant.residency`). Points sit in an appendable segment
that is searched exactly until the shard is optimized (which builds the HNSW index); see
``docs/plugins/qdrant.md`` for the measured trade-off.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import qdrant_edge as qe

from toolkernel.threads import WorkerThreads
from toolkernel.vectors import Metric, VectorStoreError
from toolkernel_qdrant._base import Hit, IndexSpec, QdrantStoreBase
from toolkernel_qdrant._translate import QdrantFilter
from toolkernel_qdrant.residency import release_file_pages
from toolkernel_qdrant.settings import QdrantSettings

_DISTANCE: dict[Metric, qe.Distance] = {
    "cosine": qe.Distance.Cosine,
    "euclidean": qe.Distance.Euclid,
    "dot": qe.Distance.Dot,
}
_SPEC_FILE = "toolkernel-index.json"

# qdrant-edge-py 0.9 turns MatchValue(True) into the integer 1, which never matches a stored
# boolean; booleans are therefore stored as these marker strings (strings that start with the
# marker are escaped by doubling it), so equality filters on booleans work.
_MARK = "\x1f"
_TRUE, _FALSE = _MARK + "T", _MARK + "F"


class _Shard:
    """An open Edge shard and the lock that serializes writes to it."""

    def __init__(self, shard: qe.EdgeShard) -> None:
        self.shard = shard
        self.write_lock = anyio.Lock()


class QdrantEdgeStore(QdrantStoreBase):
    """A :class:`~toolkernel.vectors.VectorStore` on embedded Qdrant Edge shards (mode 'edge')."""

    def __init__(self, settings: QdrantSettings) -> None:
        super().__init__(settings.collection_prefix)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if settings.path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="toolkernel-qdrant-")
            self._root = Path(self._tmp.name)
        else:
            self._root = settings.path
            self._root.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, _Shard] = {}
        self._admin = anyio.Lock()
        self._reads = WorkerThreads(min(4, os.cpu_count() or 1), "toolkernel-qdrant-edge")

    def _encode(self, value: Any) -> Any:
        """Booleans as marker strings, marker-prefixed strings escaped; see ``_MARK``."""
        if isinstance(value, bool):
            return _TRUE if value else _FALSE
        if isinstance(value, str) and value.startswith(_MARK):
            return _MARK + value
        return value

    def _decode(self, value: Any) -> Any:
        """The inverse of :meth:`_encode`."""
        if isinstance(value, str) and value.startswith(_MARK):
            return value == _TRUE if value in (_TRUE, _FALSE) else value[1:]
        return value

    def _decode_metadata(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`_decode` only where a marker can be: a query decodes hundreds of hits."""
        out = dict(meta)
        for key, value in meta.items():
            if type(value) is list:
                out[key] = [self._decode(x) for x in value]
            elif type(value) is str and value.startswith(_MARK):
                out[key] = self._decode(value)
        return out

    # -- shards ------------------------------------------------------------------

    def _dir(self, collection: str) -> Path:
        return self._root / collection

    async def _shard(self, collection: str) -> _Shard:
        opened = self._shards.get(collection)
        if opened is None:
            async with self._admin:
                opened = self._shards.get(collection)
                if opened is None:
                    path = str(self._dir(collection) / "shard")
                    opened = _Shard(await _open_shard(qe.EdgeShard.load, path))
                    self._shards[collection] = opened
        return opened

    # -- backend primitives ------------------------------------------------------

    async def _create(self, collection: str, spec: IndexSpec) -> None:
        async with self._admin:
            directory = self._dir(collection)
            if (directory / _SPEC_FILE).exists():
                return  # created concurrently with the same name; create_index re-checks settings
            config = qe.EdgeConfig(
                vectors=qe.EdgeVectorParams(size=spec.dimension, distance=_DISTANCE[spec.metric])
            )
            shard = await _open_shard(qe.EdgeShard.create, str(directory / "shard"), config)
            (directory / _SPEC_FILE).write_text(
                json.dumps({"dimension": spec.dimension, "metric": spec.metric})
            )
            self._shards[collection] = _Shard(shard)

    async def _describe(self, collection: str) -> IndexSpec | None:
        try:
            raw = json.loads((self._dir(collection) / _SPEC_FILE).read_text())
        except FileNotFoundError:
            return None
        return IndexSpec(int(raw["dimension"]), raw["metric"])

    async def _list(self) -> list[str]:
        return [p.parent.name for p in self._root.glob(f"*/{_SPEC_FILE}")]

    async def _drop(self, collection: str) -> None:
        async with self._admin:
            opened = self._shards.pop(collection, None)
            if opened is not None:
                async with opened.write_lock:
                    await anyio.to_thread.run_sync(opened.shard.close)
            (self._dir(collection) / _SPEC_FILE).unlink(missing_ok=True)
            await anyio.to_thread.run_sync(shutil.rmtree, self._dir(collection))

    async def _upsert(self, collection: str, points: list[tuple[str, list[float], dict[str, Any]]]) -> None:
        opened = await self._shard(collection)
        operation = qe.UpdateOperation.upsert_points(
            [qe.Point(pid, vec, payload) for pid, vec, payload in points]
        )
        await self._write(collection, opened, operation)

    async def _write(self, collection: str, opened: _Shard, operation: qe.UpdateOperation) -> None:
        """Apply one update, then drop the file pages it touched from this process's resident set
        (:mod:`toolkernel_qdrant.residency`): a writer's memory stays flat in the shard's size."""

        def update() -> None:
            opened.shard.update(operation)
            release_file_pages(self._dir(collection))

        async with opened.write_lock:
            await anyio.to_thread.run_sync(update)

    async def _query(
        self,
        collection: str,
        vector: list[float],
        top_k: int,
        qfilter: QdrantFilter | None,
        include_vectors: bool,
        options: dict[str, Any],
    ) -> list[Hit]:
        opened = await self._shard(collection)
        request = qe.QueryRequest(
            limit=top_k,
            query=qe.Query.Nearest(vector),
            with_payload=True,
            with_vector=include_vectors,
            filter=_edge_filter(qfilter),
            params=qe.SearchParams(**options) if options else None,
        )
        points = await self._reads.run(functools.partial(opened.shard.query, request))
        return [
            Hit(
                p.score,
                p.payload or {},
                list(p.vector) if include_vectors and isinstance(p.vector, list) else None,  # type: ignore[arg-type]
            )
            for p in points
        ]

    async def _delete(
        self, collection: str, point_ids: list[str] | None, qfilter: QdrantFilter | None
    ) -> None:
        opened = await self._shard(collection)
        if qfilter is None:
            operation = qe.UpdateOperation.delete_points(list(point_ids or []))
        else:
            if point_ids is not None:
                qfilter = {"must": [{"has_id": point_ids}, qfilter]}
            operation = qe.UpdateOperation.delete_points_by_filter(_edge_filter(qfilter) or qe.Filter())
        await self._write(collection, opened, operation)

    async def _count(self, collection: str, qfilter: QdrantFilter | None) -> int:
        opened = await self._shard(collection)
        request = qe.CountRequest(exact=True, filter=_edge_filter(qfilter))
        return await self._reads.run(functools.partial(opened.shard.count, request))

    async def aclose(self) -> None:
        """Flush and close every shard; remove the data when it was kept in a temporary directory."""
        async with self._admin:
            for opened in self._shards.values():
                async with opened.write_lock:
                    await anyio.to_thread.run_sync(opened.shard.close)
            self._shards.clear()
            self._reads.close()
            if self._tmp is not None:
                await anyio.to_thread.run_sync(self._tmp.cleanup)
                self._tmp = None


def _edge_filter(qfilter: dict[str, Any] | None) -> qe.Filter | None:
    """Build the Edge objects for a Qdrant filter in its REST shape."""
    if qfilter is None:
        return None
    return qe.Filter(
        must=[_edge_condition(c) for c in qfilter.get("must", [])] or None,
        should=[_edge_condition(c) for c in qfilter.get("should", [])] or None,
        must_not=[_edge_condition(c) for c in qfilter.get("must_not", [])] or None,
    )


def _edge_condition(cond: dict[str, Any]) -> Any:
    if "key" in cond:
        if "range" in cond:
            return qe.FieldCondition(key=cond["key"], range=qe.RangeFloat(**cond["range"]))
        match = cond["match"]
        edge_match = qe.MatchAny(any=match["any"]) if "any" in match else qe.MatchValue(match["value"])
        return qe.FieldCondition(key=cond["key"], match=edge_match)
    if "is_empty" in cond:
        return qe.IsEmptyCondition(key=cond["is_empty"]["key"])
    if "has_id" in cond:
        return qe.HasIdCondition(point_ids=set(cond["has_id"]))
    return _edge_filter(cond)


async def _open_shard(open_: Any, path: str, *args: Any) -> qe.EdgeShard:
    """Open or create a shard; one already held by another process is a clear error, not a WAL one."""
    try:
        return await anyio.to_thread.run_sync(open_, path, *args)
    except Exception as exc:
        if "WouldBlock" in str(exc):
            raise VectorStoreError(
                f"qdrant: the shard at {path} is in use by another process (a Qdrant Edge shard "
                "opens in one process at a time: stop the other server or ingestion first)"
            ) from exc
        raise
