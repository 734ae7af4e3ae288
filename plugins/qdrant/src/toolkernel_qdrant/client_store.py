"""The Qdrant store on ``qdrant-client``: a server or Qdrant Cloud by URL, or the pure-Python local mode."""

from __future__ import annotations

from typing import Any

from qdrant_client import AsyncQdrantClient, models

from toolkernel.vectors import Metric
from toolkernel_qdrant._base import Hit, IndexSpec, QdrantStoreBase
from toolkernel_qdrant._translate import QdrantFilter
from toolkernel_qdrant.settings import QdrantSettings

_DISTANCE: dict[Metric, models.Distance] = {
    "cosine": models.Distance.COSINE,
    "euclidean": models.Distance.EUCLID,
    "dot": models.Distance.DOT,
}
_METRIC: dict[models.Distance, Metric] = {d: m for m, d in _DISTANCE.items()}

_SERVER_BATCH = 256
"""Points per upsert request to a server, so a large batch never exceeds its request size limit."""


class QdrantClientStore(QdrantStoreBase):
    """A :class:`~toolkernel.vectors.VectorStore` on ``AsyncQdrantClient`` (modes 'server' and 'local')."""

    def __init__(self, settings: QdrantSettings) -> None:
        super().__init__(settings.collection_prefix)
        self._batch: int | None = None  # local mode: one call per upsert
        if settings.resolved_mode == "server":
            self._batch = _SERVER_BATCH
            self._client = AsyncQdrantClient(
                url=settings.url,
                api_key=settings.api_key.get_secret_value() if settings.api_key else None,
                prefer_grpc=settings.prefer_grpc,
                timeout=max(1, round(settings.timeout)),
                check_compatibility=False,  # the check is a blocking request made in the constructor
            )
        elif settings.path is not None:
            self._client = AsyncQdrantClient(path=str(settings.path))
        else:
            self._client = AsyncQdrantClient(location=":memory:")

    async def _create(self, collection: str, spec: IndexSpec) -> None:
        await self._client.create_collection(
            collection,
            vectors_config=models.VectorParams(size=spec.dimension, distance=_DISTANCE[spec.metric]),
        )

    async def _describe(self, collection: str) -> IndexSpec | None:
        if not await self._client.collection_exists(collection):
            return None
        params = (await self._client.get_collection(collection)).config.params.vectors
        if not isinstance(params, models.VectorParams) or params.distance not in _METRIC:
            raise TypeError(
                f"Qdrant collection {collection!r} was not created by toolkernel (named or custom vectors)"
            )
        return IndexSpec(params.size, _METRIC[params.distance])

    async def _list(self) -> list[str]:
        return [c.name for c in (await self._client.get_collections()).collections]

    async def _drop(self, collection: str) -> None:
        await self._client.delete_collection(collection)

    async def _upsert(self, collection: str, points: list[tuple[str, list[float], dict[str, Any]]]) -> None:
        structs = [models.PointStruct(id=pid, vector=vec, payload=payload) for pid, vec, payload in points]
        size = self._batch or max(1, len(structs))
        for start in range(0, len(structs), size):
            await self._client.upsert(collection, structs[start : start + size], wait=True)

    async def _query(
        self,
        collection: str,
        vector: list[float],
        top_k: int,
        qfilter: QdrantFilter | None,
        include_vectors: bool,
        options: dict[str, Any],
    ) -> list[Hit]:
        response = await self._client.query_points(
            collection,
            query=vector,
            limit=top_k,
            query_filter=_model(qfilter),
            with_payload=True,
            with_vectors=include_vectors,
            search_params=models.SearchParams(**options) if options else None,
        )
        return [
            Hit(p.score, p.payload or {}, list(p.vector) if isinstance(p.vector, list) else None)  # type: ignore[arg-type]
            for p in response.points
        ]

    async def _delete(
        self, collection: str, point_ids: list[str] | None, qfilter: QdrantFilter | None
    ) -> None:
        selector: models.PointIdsList | models.FilterSelector
        if qfilter is None:
            selector = models.PointIdsList(points=list(point_ids or []))
        elif point_ids is None:
            selector = models.FilterSelector(filter=_model(qfilter))
        else:
            both = {"must": [{"has_id": point_ids}, qfilter]}
            selector = models.FilterSelector(filter=_model(both))
        await self._client.delete(collection, points_selector=selector, wait=True)

    async def _count(self, collection: str, qfilter: QdrantFilter | None) -> int:
        return (await self._client.count(collection, count_filter=_model(qfilter), exact=True)).count

    async def aclose(self) -> None:
        """Close the client (and the local-mode storage)."""
        await self._client.close()


def _model(qfilter: dict[str, Any] | None) -> models.Filter | None:
    return None if qfilter is None else models.Filter.model_validate(qfilter)
