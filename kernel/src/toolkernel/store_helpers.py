"""What every vector store writes the same way, written once: checks, conversions and fallbacks.

The checks of :mod:`toolkernel.vectors` test one argument each; these combine them the
way each store method needs (:func:`check_query`, :func:`check_delete`,
:func:`check_filter`), settle ``create_index`` against an existing index or a concurrent
creator (:func:`create_index_once`), turn a backend's distance into the contract's score
(:func:`score_from_distance`), open a backend connection once on first use
(:class:`LazyResource`), and give a store whose backend cannot express the filter
language a correct path through :func:`toolkernel.filters.matches`: a best-first search
that fetches more until ``top_k`` records match (:func:`search_matching`), and the ids a
filtered ``delete`` or ``count`` covers (:func:`ids_to_delete`, :func:`matching_ids`).

Stores use as many of them as fit; none is required, and the conformance kit judges the
result the same either way. :class:`toolkernel.matching_store.MatchingStore` puts them all
together for a backend without a filter language.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

import anyio

from toolkernel.filters import Filter, coerce_filter, matches, require_supported
from toolkernel.vectors import (
    IndexExistsError,
    IndexInfo,
    IndexNotFoundError,
    Metric,
    QueryResult,
    VectorInputError,
    VectorStoreError,
    check_index_args,
    check_options,
    check_top_k,
    check_vector,
    query_results,
)

if TYPE_CHECKING:
    from toolkernel.vectors import FilterInput

__all__ = [
    "LazyResource",
    "QueryArgs",
    "check_delete",
    "check_filter",
    "check_query",
    "create_index_once",
    "ids_to_delete",
    "matching_ids",
    "score_from_distance",
    "search_matching",
]

T = TypeVar("T")


class _Store(Protocol):
    """What the checks read from a store: its name and the operators it evaluates."""

    @property
    def name(self) -> str: ...

    @property
    def supported_filter_operators(self) -> frozenset[str]: ...


class _Describes(Protocol):
    async def describe_index(self, name: str) -> IndexInfo: ...


class QueryArgs(NamedTuple):
    """The arguments of ``query`` once checked: what the store searches with."""

    vector: list[float]
    """The query vector as a list of floats of the index's dimension."""
    filter: Filter | None
    """The parsed filter, or ``None`` when nothing is filtered (``None`` or ``{}``)."""
    options: dict[str, Any]
    """The store-specific options, only names the store knows."""


def check_filter(store: _Store, filter: FilterInput | None) -> Filter | None:
    """``filter`` parsed, or ``None`` when it tests nothing; an operator ``store`` lacks is refused.

    :raises InvalidFilterError: the filter is malformed (the message names the path).
    :raises UnsupportedFilterError: it uses an operator outside ``store.supported_filter_operators``.
    """
    parsed = coerce_filter(filter)
    if parsed is not None:
        require_supported(store.name, store.supported_filter_operators, parsed)
    return parsed


def check_query(
    store: _Store,
    dimension: int,
    vector: Sequence[float],
    top_k: int,
    filter: FilterInput | None = None,
    options: Mapping[str, Any] | None = None,
    known: Sequence[str] = (),
) -> QueryArgs:
    """Every check ``query`` makes, in the contract's order: vector, ``top_k``, options, filter.

    ``known`` names the query options the store accepts (none by default). Call it after
    looking the index up, so a missing index is reported first.
    """
    checked = check_vector(vector, dimension)
    check_top_k(top_k)
    opts = check_options(store.name, options, known)
    return QueryArgs(checked, check_filter(store, filter), opts)


def check_delete(
    store: _Store, ids: Sequence[str] | None, filter: FilterInput | None
) -> tuple[list[str] | None, Filter | None]:
    """``delete``'s arguments checked: ``(ids, parsed filter)``, either ``None`` when not restricting.

    Passing neither raises :class:`VectorInputError` (a forgotten argument never empties an
    index), as does a single string for ``ids``. ``(None, None)`` is returned for
    ``filter={}``: every record. ``ids=[]`` comes back as ``[]``: nothing to delete.
    """
    if ids is None and filter is None:
        raise VectorInputError("delete: pass ids, a filter or both; delete_index() drops an index")
    if isinstance(ids, str):
        raise VectorInputError("delete: ids must be a sequence of strings, got a single string")
    return (None if ids is None else list(ids)), check_filter(store, filter)


async def create_index_once(
    store: _Describes,
    name: str,
    dimension: int,
    metric: str,
    create: Callable[[], Awaitable[object]],
) -> None:
    """``create_index`` for any backend: check the arguments, create the index unless it exists.

    ``create()`` makes the index in the backend; it must fail (raise anything) when the
    index exists already, so that when two callers race, the loser compares its dimension
    and metric with the winner's. An existing index with the same dimension and metric
    makes this a no-op; with others, :class:`IndexExistsError`. ``store.describe_index``
    must raise :class:`IndexNotFoundError` for an index that does not exist.
    """
    check_index_args(name, dimension, metric)
    try:
        existing = await store.describe_index(name)
    except IndexNotFoundError:
        try:
            await create()
            return
        except Exception as failed:
            try:  # a concurrent create_index may have won the race: compare with what it made
                existing = await store.describe_index(name)
            except IndexNotFoundError:
                raise failed from None
    if (existing.dimension, existing.metric) != (dimension, metric):
        raise IndexExistsError(name, existing)


def score_from_distance(
    metric: Metric, distance: float, *, squared_l2: bool = True, negated_dot: bool = False
) -> float:
    """The contract's higher-is-better score for a backend's *distance* (lower-is-better).

    For ``cosine`` the distance is ``1 - cos`` (every backend seen); for ``euclidean`` it is
    the squared L2 distance (LanceDB ``l2``, Chroma ``l2``, FAISS) unless
    ``squared_l2=False`` (pgvector ``<->``); for ``dot`` it is ``1 - a·b`` (LanceDB ``dot``,
    Chroma ``ip``) unless ``negated_dot=True`` (pgvector ``<#>``: ``-a·b``).
    """
    if metric == "cosine":
        return 1.0 - distance
    if metric == "euclidean":
        return -(max(distance, 0.0) ** 0.5) if squared_l2 else -distance
    return -distance if negated_dot else 1.0 - distance


async def search_matching(
    search: Callable[[int], Awaitable[Sequence[Mapping[str, Any]]]],
    top_k: int,
    where: Filter | None,
    include_vectors: bool = False,
) -> list[QueryResult]:
    """``query``'s results for a backend that cannot filter: its best hits that match ``where``.

    ``search(limit)`` returns the index's ``limit`` best hits, best first (every hit when
    the index holds fewer), each a mapping of :class:`~toolkernel.vectors.QueryResult`
    fields: ``id``, ``score``, ``metadata`` (tested against ``where``; a mapping, or a JSON
    object as text for a store that keeps metadata in a JSON column), optionally
    ``document`` and ``vector``; other keys are ignored. Without a filter, one search of
    ``top_k``. With one, hits are filtered with :func:`~toolkernel.filters.matches` and,
    while fewer than ``top_k`` match and the search returned all it was asked for,
    searched again for four times as many: asking the backend for ``top_k`` and dropping
    misses would return fewer records than match. Vectors are kept only with ``include_vectors``.
    """
    limit = top_k if where is None else max(4 * top_k, 64)
    while True:
        found = [{**hit, "metadata": _metadata(hit)} for hit in await search(limit)]
        kept = found if where is None else [hit for hit in found if matches(where, hit["metadata"])]
        if len(kept) >= top_k or len(found) < limit:
            break
        limit *= 4
    return query_results(
        [hit | {"vector": hit.get("vector") if include_vectors else None} for hit in kept[:top_k]]
    )


def matching_ids(
    records: Iterable[Mapping[str, Any]], where: Filter | None, ids: Sequence[str] | None = None
) -> list[str]:
    """The ids of ``records`` that match ``where`` and, if given, are among ``ids``.

    Each record is a mapping with an ``id`` and its ``metadata`` (a mapping, or a JSON
    object as text). What a store that filters with :func:`~toolkernel.filters.matches`
    deletes for ``delete(ids, filter)`` and counts for ``count(filter)``; ``where=None``
    matches every record.
    """
    wanted = None if ids is None else set(ids)
    return [
        record["id"]
        for record in records
        if (wanted is None or record["id"] in wanted) and (where is None or matches(where, _metadata(record)))
    ]


async def ids_to_delete(
    store: _Store,
    ids: Sequence[str] | None,
    filter: FilterInput | None,
    records: Callable[[], Awaitable[Iterable[Mapping[str, Any]]]],
) -> list[str]:
    """The ids ``delete(ids, filter)`` removes, for a store that filters with :func:`matches`.

    The arguments are checked as :func:`check_delete` does. ``ids`` alone come back as
    given (unknown ids are the backend's to ignore), ``ids=[]`` as ``[]``; with a filter,
    or ``filter={}`` (every record), ``await records()`` is read, mappings with ``id`` and
    ``metadata`` as for :func:`matching_ids`, and the ids that match (and are among
    ``ids``, if given) come back.
    """
    wanted, where = check_delete(store, ids, filter)
    if wanted == [] or (wanted is not None and where is None):
        return wanted
    return matching_ids(await records(), where, wanted)


def _metadata(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A record's metadata, decoded when the store keeps it as JSON text."""
    meta: Mapping[str, Any] = record["metadata"]
    if isinstance(meta, str):
        meta = json.loads(meta)
    return meta


class LazyResource(Generic[T]):
    """A connection (client, pool, file) opened on first use, once, however many calls race for it.

    A store's factory runs outside any event loop and must not do I/O, so the store keeps a
    ``LazyResource(open, close)`` and awaits :meth:`get` in every method. ``open`` is an
    async function; ``close``, given the resource, may be sync or async. After
    :meth:`aclose`, :meth:`get` raises :class:`VectorStoreError`.
    """

    def __init__(
        self,
        open: Callable[[], Awaitable[T]],
        close: Callable[[T], object] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Remember how to open and close; nothing opens yet. ``timeout`` bounds the opening, in seconds."""
        self._open = open
        self._close = close
        self._timeout = timeout
        self._value: T | None = None
        self._lock = anyio.Lock()
        self._closed = False

    async def get(self) -> T:
        """The resource, opened by the first caller (concurrent first callers wait for that one)."""
        if self._value is None:
            async with self._lock:
                if self._closed:
                    raise VectorStoreError("the store is closed; aclose() was called")
                if self._value is None:
                    with anyio.fail_after(self._timeout):
                        self._value = await self._open()
        return self._value

    async def aclose(self) -> None:
        """Close the resource if it was opened; later :meth:`get` calls raise."""
        async with self._lock:
            self._closed = True
            value, self._value = self._value, None
            if value is not None and self._close is not None:
                result = self._close(value)
                if inspect.isawaitable(result):
                    await result
