"""A :class:`~toolkernel.vectors.VectorStore` on Chroma: a ``chroma run`` server or an embedded database.

Each index is a Chroma collection whose metadata records the index's name, dimension and
metric (``hnsw:space`` cosine / l2 / ip). Embeddings are always passed in, and every
collection is opened with ``embedding_function=None``, so Chroma never loads its default
model. The chromadb client is synchronous: each call runs in one of ``max_threads`` warm
threads the store owns (:class:`toolkernel.threads.WorkerThreads`, a cheaper hand-off than
``anyio.to_thread``), so the event loop never blocks. (chromadb's ``AsyncHttpClient`` was
measured and is slower here: more client CPU per query than the sync client plus the hop.)

Queries and counts use the collection handle remembered from the last call on that index,
so a query is one HTTP request; a handle made stale by another client (the collection was
dropped or recreated) fails with ``NotFoundError`` and is looked up again once. Writes look
the collection up afresh each time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx

from toolkernel.filters import Filter
from toolkernel.store_helpers import check_delete, check_filter, score_from_distance
from toolkernel.threads import WorkerThreads
from toolkernel.vectors import (
    FilterInput,
    IndexExistsError,
    IndexInfo,
    IndexNotFoundError,
    Metadata,
    MetadataValue,
    Metric,
    QueryResult,
    VectorInputError,
    VectorStoreError,
    check_index_args,
    check_options,
    check_top_k,
    check_upsert,
    check_vector,
    query_results,
)
from toolkernel_chroma._where import (
    RESERVED_PREFIX,
    STORE,
    SUPPORTED_OPERATORS,
    Where,
    bound_key,
    where_document,
)
from toolkernel_chroma.settings import ChromaSettings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

T = TypeVar("T")

QUERY_OPTIONS = ("where_document",)
"""Options :meth:`ChromaStore.query` accepts."""

SPACES: dict[str, str] = {"cosine": "cosine", "euclidean": "l2", "dot": "ip"}
"""Contract metric → Chroma ``hnsw:space``."""

NAME_KEY, DIMENSION_KEY, METRIC_KEY = "toolkernel:name", "toolkernel:dimension", "toolkernel:metric"
"""Collection metadata keys that mark a collection as a toolkernel index and describe it."""

UNFLUSHED_RETRIES = 5
"""Tries of a read that Chroma fails because a just-written segment is not on disk yet (~0.1 s in all)."""

_CHROMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
_ENCODED_PREFIX = "tkx-"


class ChromaStore:
    """Chroma-backed vector store; every method is safe to await concurrently."""

    name = STORE
    supported_filter_operators: frozenset[str] = SUPPORTED_OPERATORS

    def __init__(self, settings: ChromaSettings) -> None:
        """Keep validated ``settings``; nothing connects until the first call."""
        self.options = settings
        self._client: ClientAPI | None = None
        self._connecting = anyio.Lock()
        self._threads = WorkerThreads(self.options.max_threads, "toolkernel-chroma")
        self._closed = False
        # index -> (collection handle, dimension, metric), for queries and counts.
        self._collections: dict[str, tuple[Collection, int, Metric]] = {}
        self._max_batch: int | None = None

    # -- plumbing ------------------------------------------------------------

    async def _run(self, func: Callable[..., T], *args: Any, read: bool = False, **kwargs: Any) -> T:
        """Run a blocking chromadb call in one of the store's threads, turning its errors into store errors.

        At most ``max_threads`` calls run at once. A cancelled ``read`` (no side effects) is
        abandoned to finish in its thread; a cancelled write is waited for first.
        """
        from chromadb.errors import ChromaError

        try:
            return await self._threads.run(
                functools.partial(func, *args, **kwargs), finish_on_cancel=not read
            )
        except ValueError as exc:
            raise VectorInputError(f"vector store 'chroma': {exc}") from exc
        except (ChromaError, httpx.HTTPError) as exc:
            raise VectorStoreError(f"vector store 'chroma': {type(exc).__name__}: {exc}") from exc

    async def _get_client(self) -> ClientAPI:
        """The chromadb client, made on first use (connecting to a server does network I/O)."""
        if self._closed:
            raise VectorStoreError("vector store 'chroma' is closed")
        async with self._connecting:
            if self._client is None:
                try:
                    self._client = await self._threads.run(self._make_client, finish_on_cancel=True)
                except Exception as exc:
                    where = self.options.path or f"{self.options.host}:{self.options.port}"
                    raise VectorStoreError(
                        f"vector store 'chroma': cannot reach Chroma at {where}: {exc}"
                    ) from exc
            return self._client

    def _make_client(self) -> ClientAPI:
        """A chromadb client for the configured mode, with telemetry off (runs in a worker thread)."""
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        opts = self.options
        if opts.path is not None:
            return chromadb.PersistentClient(
                path=opts.path, settings=settings, tenant=opts.tenant, database=opts.database
            )
        assert opts.host is not None  # guaranteed by ChromaSettings._one_mode
        return chromadb.HttpClient(
            host=opts.host,
            port=opts.port,
            ssl=opts.ssl,
            headers=opts.headers,
            settings=settings,
            tenant=opts.tenant,
            database=opts.database,
        )

    async def _collection(self, index: str) -> tuple[Collection, int, Metric]:
        """The collection behind ``index``, its dimension and metric, or :class:`IndexNotFoundError`.

        Always asks Chroma, and remembers the answer for :meth:`_cached_collection`.
        """
        from chromadb.errors import NotFoundError

        client = await self._get_client()
        try:
            collection = await self._run(
                client.get_collection, _collection_name(index), embedding_function=None, read=True
            )
        except VectorStoreError as exc:
            if isinstance(exc.__cause__, NotFoundError):
                self._collections.pop(index, None)
                raise IndexNotFoundError(index) from None
            raise
        described = _describe(collection.metadata)
        if described is None:
            self._collections.pop(index, None)
            raise IndexNotFoundError(index)
        entry = (collection, described[1], described[2])
        self._collections[index] = entry
        return entry

    async def _cached_collection(self, index: str) -> tuple[tuple[Collection, int, Metric], bool]:
        """The remembered collection of ``index`` (looked up if unknown) and whether it was remembered."""
        if self._closed:
            raise VectorStoreError("vector store 'chroma' is closed")
        entry = self._collections.get(index)
        if entry is not None:
            return entry, True
        return await self._collection(index), False

    async def _read(self, index: str, call: Callable[[Collection, int, Metric], Awaitable[T]]) -> T:
        """``call`` on the remembered collection; if Chroma no longer knows it, look it up, call again."""
        from chromadb.errors import NotFoundError

        entry, remembered = await self._cached_collection(index)
        try:
            return await _retry_unflushed(call, *entry)
        except VectorStoreError as exc:
            if not remembered or not isinstance(exc.__cause__, NotFoundError):
                raise
        self._collections.pop(index, None)
        return await _retry_unflushed(call, *await self._collection(index))

    # -- indexes -------------------------------------------------------------

    async def create_index(self, name: str, dimension: int, metric: Metric = "cosine") -> None:
        """Create the collection for ``name``; a no-op if it exists with the same dimension and metric."""
        check_index_args(name, dimension, metric)
        client = await self._get_client()
        metadata: dict[str, Any] = {
            "hnsw:space": SPACES[metric],
            NAME_KEY: name,
            DIMENSION_KEY: dimension,
            METRIC_KEY: metric,
        }
        for key, value in (
            ("hnsw:M", self.options.hnsw_m),
            ("hnsw:construction_ef", self.options.hnsw_construction_ef),
            ("hnsw:search_ef", self.options.hnsw_search_ef),
        ):
            if value is not None:
                metadata[key] = value
        try:
            _, existing_dim, existing_metric = await self._collection(name)
        except IndexNotFoundError:
            try:
                await self._run(
                    client.create_collection,
                    _collection_name(name),
                    metadata=metadata,
                    embedding_function=None,
                )
                return
            except VectorStoreError as exc:
                # A concurrent create_index may have won the race: then compare with what it made.
                try:
                    _, existing_dim, existing_metric = await self._collection(name)
                except IndexNotFoundError:
                    raise exc from None
        if (existing_dim, existing_metric) != (dimension, metric):
            existing = IndexInfo(name=name, dimension=existing_dim, metric=existing_metric, count=0)
            raise IndexExistsError(name, existing)

    async def describe_index(self, name: str) -> IndexInfo:
        """Dimension, metric and record count of ``name``."""
        collection, dimension, metric = await self._collection(name)
        count = await self._run(collection.count)
        return IndexInfo(name=name, dimension=dimension, metric=metric, count=count)

    async def list_indexes(self) -> list[str]:
        """Every toolkernel index in this tenant and database, sorted (other collections are skipped)."""
        client = await self._get_client()
        collections = await self._run(client.list_collections)
        names = [described[0] for c in collections if (described := _describe(c.metadata)) is not None]
        return sorted(names)

    async def delete_index(self, name: str) -> None:
        """Drop the collection behind ``name``, deleting its records first.

        chromadb 1.5 leaves list-valued metadata of a dropped collection behind, and records of
        a later collection inherit it; deleting the records first removes it.
        """
        await self.delete(name, filter={})
        client = await self._get_client()
        self._collections.pop(name, None)
        try:
            await self._run(client.delete_collection, _collection_name(name))
        finally:
            self._collections.pop(name, None)

    async def _batch_size(self) -> int:
        """Records per write call: the ``batch_size`` option or the server's maximum (asked once)."""
        if self.options.batch_size is not None:
            return self.options.batch_size
        if self._max_batch is None:
            client = await self._get_client()
            self._max_batch = await self._run(client.get_max_batch_size, read=True)
        return self._max_batch

    # -- records -------------------------------------------------------------

    async def upsert(
        self,
        index: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, MetadataValue]] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> None:
        """Insert or replace records by id; the whole batch is checked before anything is written.

        Chroma's own upsert merges metadata and keeps an old document, so replaced ids are
        deleted and added again: concurrent readers may briefly miss them.
        """
        collection, dimension, _ = await self._collection(index)
        out_ids, out_vectors, out_meta, out_docs = check_upsert(dimension, ids, vectors, metadata, documents)
        chroma_meta = [_to_chroma_metadata(m, f"metadata[{i}]") for i, m in enumerate(out_meta)]
        if not out_ids:
            return
        size = await self._batch_size()
        for start in range(0, len(out_ids), size):
            chunk = slice(start, start + size)
            await self._run(collection.delete, ids=out_ids[chunk])
            await self._run(
                collection.add,
                ids=out_ids[chunk],
                embeddings=out_vectors[chunk],
                metadatas=chroma_meta[chunk],
                documents=out_docs[chunk],
            )

    async def query(
        self,
        index: str,
        vector: Sequence[float],
        top_k: int = 10,
        filter: FilterInput | None = None,
        include_vectors: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> list[QueryResult]:
        """The ``top_k`` nearest records matching ``filter``; option ``where_document`` filters on text."""
        return await self._read(
            index,
            functools.partial(
                self._query,
                vector=vector,
                top_k=top_k,
                filter=filter,
                include_vectors=include_vectors,
                options=options,
            ),
        )

    async def _query(
        self,
        collection: Collection,
        dimension: int,
        metric: Metric,
        *,
        vector: Sequence[float],
        top_k: int,
        filter: FilterInput | None,
        include_vectors: bool,
        options: Mapping[str, Any] | None,
    ) -> list[QueryResult]:
        query_vector = check_vector(vector, dimension, "vector")
        check_top_k(top_k)
        opts = check_options(self.name, options, QUERY_OPTIONS)
        text_filter = opts.get("where_document")
        if text_filter is not None and not isinstance(text_filter, Mapping):
            raise VectorInputError(
                "query option 'where_document' must be a mapping such as {'$contains': 'word'}, "
                f"got {text_filter!r}"
            )
        include = ["metadatas", "documents", "distances", *(["embeddings"] if include_vectors else [])]
        found = await self._run(
            collection.query,
            query_embeddings=[query_vector],
            n_results=top_k,
            where=self._where(filter),
            where_document=dict(text_filter) if text_filter is not None else None,
            include=include,
            read=True,
        )
        ids = found["ids"][0]
        nothing: list[Any] = [None] * len(ids)
        distances = found["distances"][0] if found["distances"] else nothing
        metadatas = found["metadatas"][0] if found["metadatas"] else nothing
        docs = found["documents"][0] if found["documents"] else nothing
        embeddings = found["embeddings"][0] if include_vectors and found["embeddings"] is not None else None
        hits: list[dict[str, Any]] = [
            {
                "id": id_,
                "score": score_from_distance(metric, float(distances[i])),
                "metadata": _from_chroma_metadata(metadatas[i]),
                "document": docs[i],
                "vector": [float(x) for x in embeddings[i]] if embeddings is not None else None,
            }
            for i, id_ in enumerate(ids)
        ]
        hits.sort(key=lambda hit: hit["score"], reverse=True)
        return query_results(hits)

    async def delete(
        self, index: str, ids: Sequence[str] | None = None, filter: FilterInput | None = None
    ) -> None:
        """Delete records by id, by filter, or ids that also match the filter."""
        collection, _, _ = await self._collection(index)
        ids, parsed = check_delete(self, ids, filter)
        where = None if parsed is None else where_document(parsed)
        if ids is None and where is not None:
            await self._run(collection.delete, where=where)
            return
        if ids is None:
            # An empty filter matches every record: delete them all by id.
            ids = (await self._run(collection.get, include=[]))["ids"]
        size = await self._batch_size()
        for start in range(0, len(ids), size):
            await self._run(collection.delete, ids=list(ids[start : start + size]), where=where)

    async def count(self, index: str, filter: FilterInput | None = None) -> int:
        """How many records ``index`` holds, or how many match ``filter``."""

        async def count(collection: Collection, dimension: int, metric: Metric) -> int:
            where = self._where(filter)
            if where is None:
                return await self._run(collection.count, read=True)
            found = await self._run(collection.get, where=where, include=[], read=True)
            return len(found["ids"])

        return await self._read(index, count)

    def _where(self, filter: FilterInput | None) -> Where | None:
        """The Chroma ``where`` for ``filter``, refusing operators Chroma lacks."""
        parsed: Filter | None = check_filter(self, filter)
        return None if parsed is None else where_document(parsed)

    async def aclose(self) -> None:
        """Drop the client (an embedded database releases its files); the store cannot be used afterwards."""
        self._closed = True
        async with self._connecting:
            self._client = None
            self._collections.clear()
            self._threads.close()


async def _retry_unflushed(call: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await call(*args)``, retried briefly while Chroma reports a just-written segment missing on disk.

    chromadb 1.5 can fail a read that races the first flush of a collection's vector segment
    with ``InternalError: ... Error creating hnsw segment reader: Nothing found on disk``; the
    same read succeeds a few milliseconds later. Other errors, and this one after
    :data:`UNFLUSHED_RETRIES` tries, are raised.
    """
    from chromadb.errors import InternalError

    for attempt in range(UNFLUSHED_RETRIES):
        try:
            return await call(*args)
        except VectorStoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, InternalError) or "Nothing found on disk" not in str(cause):
                raise
            if attempt == UNFLUSHED_RETRIES - 1:
                raise
            await anyio.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")


def _collection_name(index: str) -> str:
    """The Chroma collection name for ``index``: itself when Chroma accepts it, else a reversible encoding."""
    if _CHROMA_NAME.match(index) and not index.startswith(_ENCODED_PREFIX):
        return index
    return _ENCODED_PREFIX + index.encode().hex()


def _describe(metadata: Mapping[str, Any] | None) -> tuple[str, int, Metric] | None:
    """``(index name, dimension, metric)`` from collection metadata; ``None`` if not a toolkernel index."""
    if not metadata or DIMENSION_KEY not in metadata or NAME_KEY not in metadata:
        return None
    metric = metadata.get(METRIC_KEY)
    if metric not in SPACES:
        return None
    return str(metadata[NAME_KEY]), int(metadata[DIMENSION_KEY]), metric


def _to_chroma_metadata(metadata: Metadata, where: str) -> dict[str, Any] | None:
    """Metadata as Chroma stores it: ``None`` when empty, lists of one element type (ints widen to floats).

    A list of numbers also gets hidden bound keys (see :func:`~toolkernel_chroma._where.bound_key`),
    so range filters can ask whether *any* element is above or below a value.
    """
    if not metadata:
        return None
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if key.startswith(RESERVED_PREFIX):
            raise VectorInputError(
                f"{where}.{key}: keys starting with {RESERVED_PREFIX!r} are reserved by the store"
            )
        if isinstance(value, list):
            kinds = {
                bool if isinstance(v, bool) else float if isinstance(v, int | float) else str for v in value
            }
            if len(kinds) > 1:
                raise VectorInputError(
                    f"{where}.{key}: Chroma stores lists whose elements share one type (all strings, "
                    f"all numbers or all booleans); got {value!r}"
                )
            if kinds == {float}:
                if any(isinstance(v, float) for v in value):
                    value = [float(v) for v in value]
                out[bound_key("min", key)] = min(value)
                out[bound_key("max", key)] = max(value)
        out[key] = value
    return out


def _from_chroma_metadata(metadata: Mapping[str, Any] | None) -> Metadata:
    """Chroma's metadata back as the contract's (``None`` → ``{}``, hidden bound keys dropped)."""
    return {
        key: list(value) if isinstance(value, list | tuple) else value
        for key, value in (metadata or {}).items()
        if not key.startswith(RESERVED_PREFIX)
    }
