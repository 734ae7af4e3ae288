"""A base class for stores whose backend searches but cannot filter: the contract written once.

A backend without a filter language (LanceDB's vector search, an array in memory, a
key-value store) evaluates the contract's metadata filters with
:func:`toolkernel.filters.matches`, and every such store writes its nine methods the same
way around a few backend calls. :class:`MatchingStore` writes those methods; a subclass
names itself and writes only the backend's part:

* :meth:`~MatchingStore.connect` (and optionally :meth:`~MatchingStore.disconnect`);
* per index: :meth:`~MatchingStore.open_index`, :meth:`~MatchingStore.make_index`,
  :meth:`~MatchingStore.index_names`, :meth:`~MatchingStore.drop_index`;
* per record: :meth:`~MatchingStore.write`, :meth:`~MatchingStore.nearest`,
  :meth:`~MatchingStore.records`, :meth:`~MatchingStore.remove`, :meth:`~MatchingStore.size`.

The contract's rules stay here: argument checks and their order, ``create_index`` against
an existing index, an empty upsert, delete's argument rules, search widened until
``top_k`` records match (:mod:`toolkernel.store_helpers` holds each piece). A store whose
backend can filter translates the parsed filter instead (see the SQLite example in
``docs/vector-stores.md``), or overrides the methods where its backend does better.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from toolkernel.filters import ALL_OPERATORS
from toolkernel.store_helpers import (
    LazyResource,
    check_filter,
    check_query,
    create_index_once,
    ids_to_delete,
    matching_ids,
    search_matching,
)
from toolkernel.vectors import IndexInfo, Metric, QueryResult, UpsertBatch, check_upsert

if TYPE_CHECKING:
    from toolkernel.vectors import FilterInput

__all__ = ["MatchingStore", "OpenIndex"]

C = TypeVar("C")
H = TypeVar("H")


@dataclass(frozen=True)
class OpenIndex(Generic[H]):
    """An index as :meth:`MatchingStore.open_index` found it: the backend's handle and its shape."""

    handle: H
    """Whatever the backend works on: a table, a collection, a dict of records."""
    dimension: int
    """The vector length given to ``create_index``; vectors are checked against it."""
    metric: Metric
    """The metric given to ``create_index``; :meth:`MatchingStore.nearest` scores by it."""


class MatchingStore(ABC, Generic[C, H]):
    """A :class:`~toolkernel.vectors.VectorStore` on a backend that searches, with filters by ``matches()``.

    ``C`` is the type of the backend's connection, ``H`` of an index's handle. Subclasses
    set ``name``, call ``super().__init__(timeout=...)`` from an ``__init__`` that only
    keeps the settings, and implement the abstract methods (each says what the contract
    needs of it), getting the connection with ``await self.connection()``. Every filter
    operator is supported, since :func:`~toolkernel.filters.matches` evaluates them all.
    """

    name: str
    """The name the store is registered under; error messages use it."""

    supported_filter_operators: frozenset[str] = ALL_OPERATORS
    """Every operator: filters are evaluated in Python, never by the backend."""

    def __init__(self, *, timeout: float | None = None) -> None:
        """Nothing opens here (factories must not do I/O); ``timeout`` bounds :meth:`connect`, in seconds."""
        self._connection: LazyResource[C] = LazyResource(self.connect, self.disconnect, timeout=timeout)

    async def connection(self) -> C:
        """The backend's connection: :meth:`connect` opens it on the first call, later calls share it."""
        return await self._connection.get()

    # -- what a subclass writes ---------------------------------------------------------

    @abstractmethod
    async def connect(self) -> C:
        """Open the backend's client, once, on first use: the store's factory runs outside any event loop."""

    async def disconnect(self, connection: C) -> None:
        """Close what :meth:`connect` opened; :meth:`aclose` calls it, if a connection was made."""

    @abstractmethod
    async def open_index(self, name: str) -> OpenIndex[H]:
        """The index with its dimension and metric, read from the backend (so a reopened store sees them).

        :raises IndexNotFoundError: there is no index ``name``; every method relies on this.
        """

    @abstractmethod
    async def make_index(self, name: str, dimension: int, metric: Metric) -> None:
        """Create an empty index (arguments checked) and fail when it exists, so a lost race is noticed."""

    @abstractmethod
    async def index_names(self) -> Iterable[str]:
        """The name of every index, in any order."""

    @abstractmethod
    async def drop_index(self, name: str) -> None:
        """Remove the index and its records; :meth:`open_index` has just found it."""

    @abstractmethod
    async def write(self, index: OpenIndex[H], batch: UpsertBatch) -> None:
        """Insert or replace the batch's records by id: one or more, every value already checked.

        ``batch`` holds four lists of one length: ``ids``, ``vectors``, ``metadata`` (dicts;
        a backend with a fixed schema can keep each as JSON text) and ``documents``.
        """

    @abstractmethod
    async def nearest(
        self, index: OpenIndex[H], vector: list[float], limit: int
    ) -> Sequence[Mapping[str, Any]]:
        """The ``limit`` records nearest to ``vector``, best first (all of them when there are fewer).

        Each is a mapping with ``id``, ``score`` (higher is better:
        :func:`~toolkernel.store_helpers.score_from_distance` converts a distance),
        ``metadata`` (a mapping, or a JSON object as text), ``document`` and ``vector``;
        other keys are ignored. ``query`` drops those that fail the filter and asks again,
        wider, until ``top_k`` match.
        """

    @abstractmethod
    async def records(self, index: OpenIndex[H]) -> Iterable[Mapping[str, Any]]:
        """Every record's ``id`` and ``metadata``, which filtered deletes and counts test with ``matches``."""

    @abstractmethod
    async def remove(self, index: OpenIndex[H], ids: list[str]) -> None:
        """Delete these ids (one or more); ids the index does not hold are ignored."""

    @abstractmethod
    async def size(self, index: OpenIndex[H]) -> int:
        """How many records the index holds."""

    # -- the contract, written once -----------------------------------------------------

    async def create_index(self, name: str, dimension: int, metric: Metric = "cosine") -> None:
        """Create index ``name``; a no-op if it exists with the same dimension and metric."""
        await create_index_once(
            self, name, dimension, metric, lambda: self.make_index(name, dimension, metric)
        )

    async def describe_index(self, name: str) -> IndexInfo:
        """Dimension, metric and record count of ``name``."""
        index = await self.open_index(name)
        return IndexInfo(
            name=name, dimension=index.dimension, metric=index.metric, count=await self.size(index)
        )

    async def list_indexes(self) -> list[str]:
        """The names of every index, sorted."""
        return sorted(await self.index_names())

    async def delete_index(self, name: str) -> None:
        """Drop ``name`` and everything in it."""
        await self.open_index(name)
        await self.drop_index(name)

    async def upsert(
        self,
        index: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> None:
        """Insert or replace records by id; the whole batch is checked before :meth:`write` sees it."""
        opened = await self.open_index(index)
        batch = check_upsert(opened.dimension, ids, vectors, metadata, documents)
        if batch.ids:
            await self.write(opened, batch)

    async def query(
        self,
        index: str,
        vector: Sequence[float],
        top_k: int = 10,
        filter: FilterInput | None = None,
        include_vectors: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> list[QueryResult]:
        """The ``top_k`` best records matching ``filter``, from :meth:`nearest`; no options are known."""
        opened = await self.open_index(index)
        args = check_query(self, opened.dimension, vector, top_k, filter, options)
        return await search_matching(
            lambda limit: self.nearest(opened, args.vector, limit), top_k, args.filter, include_vectors
        )

    async def delete(
        self, index: str, ids: Sequence[str] | None = None, filter: FilterInput | None = None
    ) -> None:
        """Delete ``ids``, or the records matching ``filter``, or the ids among them that match."""
        opened = await self.open_index(index)
        doomed = await ids_to_delete(self, ids, filter, lambda: self.records(opened))
        if doomed:
            await self.remove(opened, doomed)

    async def count(self, index: str, filter: FilterInput | None = None) -> int:
        """How many records ``index`` holds, or how many match ``filter``."""
        opened = await self.open_index(index)
        where = check_filter(self, filter)
        if where is None:
            return await self.size(opened)
        return len(matching_ids(await self.records(opened), where))

    async def aclose(self) -> None:
        """Close the connection, if one was opened; the store is unusable afterwards."""
        await self._connection.aclose()
