"""What both Qdrant backends share: the contract's checks, the payload layout, scores and errors.

A backend (server/local through ``qdrant-client``, or the embedded engine) implements the
small async primitives at the bottom of :class:`QdrantStoreBase`; everything the contract
specifies — input checks, id mapping, filter translation, score signs — lives here once.

Qdrant point ids must be integers or UUIDs, so a record's id is mapped to a UUIDv5 and kept
in the payload as ``id``, next to ``document`` and ``metadata``.
"""

from __future__ import annotations

import hashlib
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkernel.filters import coerce_filter
from toolkernel.store_helpers import check_delete
from toolkernel.vectors import (
    FilterInput,
    IndexExistsError,
    IndexInfo,
    IndexNotFoundError,
    MetadataValue,
    Metric,
    QueryResult,
    VectorInputError,
    check_index_args,
    check_index_name,
    check_options,
    check_top_k,
    check_upsert,
    check_vector,
    query_results,
)
from toolkernel_qdrant._translate import METADATA_KEY, SUPPORTED_OPERATORS, QdrantFilter, to_qdrant

_ID_NAMESPACE = uuid.UUID("6f0c1f52-3c55-4d8e-9a57-3f2f0b8f5a11")

QUERY_OPTIONS = ("hnsw_ef", "exact")
"""Store-specific query options: ``hnsw_ef`` (int, HNSW beam width) and ``exact`` (bool, skip the index)."""


def point_id(record_id: str) -> str:
    """The Qdrant point id for ``record_id``: ``str(uuid.uuid5(_ID_NAMESPACE, record_id))``, only faster."""
    digest = bytearray(hashlib.sha1(_ID_NAMESPACE.bytes + record_id.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """The fixed settings of an index."""

    dimension: int
    metric: Metric


@dataclass(frozen=True, slots=True)
class Hit:
    """One raw search result from a backend."""

    score: float
    payload: Mapping[str, Any]
    vector: list[float] | None


class QdrantStoreBase(ABC):
    """The contract on top of a backend's primitives; subclasses talk to one Qdrant flavour."""

    name = "qdrant"
    supported_filter_operators: frozenset[str] = SUPPORTED_OPERATORS

    def __init__(self, collection_prefix: str = "") -> None:
        self._prefix = collection_prefix
        self._specs: dict[str, IndexSpec] = {}

    # -- the contract ----------------------------------------------------------

    async def create_index(self, name: str, dimension: int, metric: Metric = "cosine") -> None:
        """Create ``name``; a no-op when it exists with the same settings."""
        check_index_args(name, dimension, metric)
        wanted = IndexSpec(dimension, metric)
        existing = await self._spec_or_none(name)
        if existing is None:
            collection = self._collection(name)
            try:
                await self._create(collection, wanted)
            except Exception:
                if await self._describe(collection) is None:
                    raise
            # A concurrent create_index may have won the race: its settings are the index's.
            existing = await self._describe(collection) or wanted
            self._specs[name] = existing
        if existing != wanted:
            raise IndexExistsError(name, await self.describe_index(name))

    async def describe_index(self, name: str) -> IndexInfo:
        """Dimension, metric and exact count of ``name``."""
        spec = await self._spec(name)
        count = await self._count(self._collection(name), None)
        return IndexInfo(name=name, dimension=spec.dimension, metric=spec.metric, count=count)

    async def list_indexes(self) -> list[str]:
        """Names of this store's indexes (collections carrying its prefix), sorted."""
        n = len(self._prefix)
        return sorted(c[n:] for c in await self._list() if c.startswith(self._prefix))

    async def delete_index(self, name: str) -> None:
        """Drop ``name`` and its vectors."""
        await self._spec(name)
        await self._drop(self._collection(name))
        self._specs.pop(name, None)

    async def upsert(
        self,
        index: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, MetadataValue]] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> None:
        """Insert or replace records; the whole batch is checked before anything is written."""
        spec = await self._spec(index)
        rids, vecs, metas, docs = check_upsert(spec.dimension, ids, vectors, metadata, documents)
        points = [
            (point_id(rid), vec, {"id": rid, "document": doc, METADATA_KEY: self._encode_metadata(meta)})
            for rid, vec, meta, doc in zip(rids, vecs, metas, docs, strict=True)
        ]
        await self._upsert(self._collection(index), points)

    async def query(
        self,
        index: str,
        vector: Sequence[float],
        top_k: int = 10,
        filter: FilterInput | None = None,
        include_vectors: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> list[QueryResult]:
        """Nearest records, best first; ``options``: ``hnsw_ef`` (int) and ``exact`` (bool)."""
        spec = await self._spec(index)
        query = check_vector(vector, spec.dimension)
        check_top_k(top_k)
        opts = check_options(self.name, options, QUERY_OPTIONS)
        ef = opts.get("hnsw_ef", 1)
        if isinstance(ef, bool) or not isinstance(ef, int) or ef <= 0:
            raise VectorInputError(
                f"vector store 'qdrant': option hnsw_ef must be a positive integer, got {ef!r}"
            )
        if not isinstance(opts.get("exact", False), bool):
            raise VectorInputError(
                f"vector store 'qdrant': option exact must be true or false, got {opts['exact']!r}"
            )
        qfilter = self._filter(filter)
        hits = await self._query(self._collection(index), query, top_k, qfilter, include_vectors, opts)
        sign = -1.0 if spec.metric == "euclidean" else 1.0  # Qdrant reports euclidean distance
        return query_results(
            [
                {
                    "id": hit.payload["id"],
                    "score": sign * hit.score,
                    "metadata": self._decode_metadata(hit.payload.get(METADATA_KEY) or {}),
                    "document": hit.payload.get("document"),
                    "vector": hit.vector if include_vectors else None,
                }
                for hit in hits
            ]
        )

    async def delete(
        self, index: str, ids: Sequence[str] | None = None, filter: FilterInput | None = None
    ) -> None:
        """Delete by ids, by filter, or ids that match the filter."""
        await self._spec(index)
        ids, parsed = check_delete(self, ids, filter)
        if ids == []:
            return
        point_ids = None if ids is None else [point_id(i) for i in ids]
        if parsed is not None:
            qfilter: QdrantFilter | None = self._filter(parsed)
        else:  # no condition: only the ids, or (neither) every record
            qfilter = {"must": []} if point_ids is None else None
        await self._delete(self._collection(index), point_ids, qfilter)

    async def count(self, index: str, filter: FilterInput | None = None) -> int:
        """Exact number of records, or of records matching ``filter``."""
        await self._spec(index)
        return await self._count(self._collection(index), self._filter(filter))

    # -- helpers ---------------------------------------------------------------

    def _collection(self, index: str) -> str:
        return f"{self._prefix}{index}"

    def _filter(self, flt: FilterInput | None) -> QdrantFilter | None:
        parsed = coerce_filter(flt)
        return None if parsed is None else to_qdrant(self.name, parsed, self._encode)

    async def _spec_or_none(self, name: str) -> IndexSpec | None:
        check_index_name(name)
        spec = self._specs.get(name)
        if spec is None:
            spec = await self._describe(self._collection(name))
            if spec is not None:
                self._specs[name] = spec
        return spec

    async def _spec(self, name: str) -> IndexSpec:
        if not isinstance(name, str) or not name:
            raise IndexNotFoundError(str(name))
        try:
            spec = await self._spec_or_none(name)
        except VectorInputError:
            raise IndexNotFoundError(name) from None
        if spec is None:
            raise IndexNotFoundError(name)
        return spec

    def _encode(self, value: Any) -> Any:
        """How a backend stores one metadata scalar (the identity unless a backend needs otherwise)."""
        return value

    def _decode(self, value: Any) -> Any:
        """The metadata scalar a stored value stands for (the inverse of :meth:`_encode`)."""
        return value

    def _encode_metadata(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: [self._encode(x) for x in v] if isinstance(v, list) else self._encode(v)
            for k, v in meta.items()
        }

    def _decode_metadata(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: [self._decode(x) for x in v] if isinstance(v, list) else self._decode(v)
            for k, v in meta.items()
        }

    # -- backend primitives ----------------------------------------------------

    @abstractmethod
    async def _create(self, collection: str, spec: IndexSpec) -> None:
        """Create the collection."""

    @abstractmethod
    async def _describe(self, collection: str) -> IndexSpec | None:
        """The collection's settings, or ``None`` if it does not exist."""

    @abstractmethod
    async def _list(self) -> list[str]:
        """Every collection name the backend holds."""

    @abstractmethod
    async def _drop(self, collection: str) -> None:
        """Delete the collection."""

    @abstractmethod
    async def _upsert(self, collection: str, points: list[tuple[str, list[float], dict[str, Any]]]) -> None:
        """Write ``(point id, vector, payload)`` triples."""

    @abstractmethod
    async def _query(
        self,
        collection: str,
        vector: list[float],
        top_k: int,
        qfilter: QdrantFilter | None,
        include_vectors: bool,
        options: dict[str, Any],
    ) -> list[Hit]:
        """Nearest points with their payloads (raw Qdrant scores)."""

    @abstractmethod
    async def _delete(
        self, collection: str, point_ids: list[str] | None, qfilter: QdrantFilter | None
    ) -> None:
        """Delete the given points, those matching ``qfilter``, or (both) the given points that match."""

    @abstractmethod
    async def _count(self, collection: str, qfilter: QdrantFilter | None) -> int:
        """Exact number of points (matching ``qfilter``)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release the client or the embedded shards."""
