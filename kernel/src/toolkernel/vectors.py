"""The vector store contract: async indexes of id → vector + metadata + document.

Every store a plugin registers through ``register_vector_stores`` implements
:class:`VectorStore`. The contract fixes what scores mean, how input is checked and which
errors are raised, so a tool written against one store runs on any other; the conformance
kit in :mod:`toolkernel.testing.stores` checks a store against it.

Scores are *higher-is-better* for every metric:

* ``cosine`` — cosine similarity, ``dot(a, b) / (|a| |b|)``, in ``[-1, 1]``; ``0.0`` when either
  vector is all zeros (it has no direction), never NaN;
* ``dot`` — the dot product ``dot(a, b)``;
* ``euclidean`` — the *negative* euclidean distance ``-|a - b|`` (``0`` is an exact match).

Metadata filters use the Mongo-style language of :mod:`toolkernel.filters`. A store
declares the operators it can evaluate in ``supported_filter_operators``; any other
operator raises :class:`UnsupportedFilterError` — a store never drops a condition.

This module imports neither numpy nor any store library.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from toolkernel.errors import ToolkernelError

if TYPE_CHECKING:
    from toolkernel.filters import Filter

__all__ = [
    "FilterInput",
    "IndexExistsError",
    "IndexInfo",
    "IndexNotFoundError",
    "InvalidFilterError",
    "METRICS",
    "Metadata",
    "MetadataValue",
    "Metric",
    "QueryResult",
    "Scalar",
    "UnsupportedFilterError",
    "UpsertBatch",
    "VectorInputError",
    "VectorStore",
    "VectorStoreError",
    "VectorStoreFactory",
    "check_index_args",
    "check_index_name",
    "check_metadata",
    "check_options",
    "check_top_k",
    "check_upsert",
    "check_vector",
    "query_results",
]

Metric: TypeAlias = Literal["cosine", "euclidean", "dot"]
"""How vectors are compared; see the module docstring for the score each one yields."""

METRICS: tuple[Metric, ...] = ("cosine", "euclidean", "dot")
"""Every metric a store must support."""

Scalar: TypeAlias = str | int | float | bool
"""A metadata value that is not a list."""

MetadataValue: TypeAlias = Scalar | list[Scalar]
"""A metadata value: a scalar or a non-empty list of scalars (no ``None``, no nesting)."""

Metadata: TypeAlias = dict[str, MetadataValue]
"""The metadata stored with one vector."""

FilterInput: TypeAlias = "Mapping[str, Any] | Filter"
"""A filter as stores accept it: a Mongo-style mapping or a parsed :class:`~toolkernel.filters.Filter`."""


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


class VectorStoreError(ToolkernelError):
    """A vector store operation failed; the message names the store, index or input at fault."""


class IndexNotFoundError(VectorStoreError, LookupError):
    """The named index does not exist."""

    def __init__(self, index: str) -> None:
        super().__init__(f"vector index {index!r} does not exist; create it with create_index()")
        self.index = index


class IndexExistsError(VectorStoreError):
    """``create_index`` was asked for a name that is taken with another dimension or metric."""

    def __init__(self, index: str, existing: IndexInfo) -> None:
        super().__init__(
            f"vector index {index!r} already exists with dimension {existing.dimension} and metric "
            f"{existing.metric!r}; delete it first or use another name"
        )
        self.index = index
        self.existing = existing


class VectorInputError(VectorStoreError, ValueError):
    """Arguments to a store method are malformed (wrong dimension, mismatched lengths, bad metadata)."""


class InvalidFilterError(VectorStoreError, ValueError):
    """A metadata filter is not valid; the message names the path inside the filter."""


class UnsupportedFilterError(VectorStoreError):
    """A store was given a filter operator (or operand) it cannot evaluate."""

    def __init__(self, store: str, operator: str, detail: str = "") -> None:
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"vector store {store!r} does not support the filter operator {operator}{why}; "
            "rewrite the filter or use a store that supports it (see docs/vector-stores.md)"
        )
        self.store = store
        self.operator = operator


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


class IndexInfo(BaseModel):
    """What an index is: its name, vector length, metric and how many vectors it holds."""

    model_config = ConfigDict(frozen=True)

    name: str
    dimension: int = Field(gt=0)
    metric: Metric
    count: int = Field(ge=0)


class QueryResult(BaseModel):
    """One hit of :meth:`VectorStore.query`; ``score`` is higher-is-better (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    id: str
    score: float
    metadata: Metadata = Field(default_factory=dict)
    document: str | None = None
    vector: list[float] | None = Field(
        None, description="Only with include_vectors=True; cosine indexes may return it unit-normalized."
    )


@functools.cache
def _results_adapter() -> TypeAdapter[list[QueryResult]]:
    return TypeAdapter(list[QueryResult])


def query_results(hits: Sequence[Mapping[str, Any]]) -> list[QueryResult]:
    """A query's hits (mappings of :class:`QueryResult` fields) as validated results, in one call.

    Validating the whole list at once costs about half as much as one constructor call per
    hit, which shows next to a millisecond query; stores build their results with it.
    """
    return _results_adapter().validate_python(hits)


# ---------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------


@runtime_checkable
class VectorStore(Protocol):
    """An async vector store holding named indexes; every method may be awaited concurrently.

    Methods that take an ``index`` raise :class:`IndexNotFoundError` for a missing index
    before looking at their other arguments.
    """

    name: str
    """The name the store is registered under; error messages use it."""

    supported_filter_operators: frozenset[str]
    """The filter operators (``"$eq"``, ``"$and"``, …) this store evaluates natively."""

    async def create_index(self, name: str, dimension: int, metric: Metric = "cosine") -> None:
        """Create index ``name``; a no-op if it exists with the same dimension and metric.

        :raises IndexExistsError: it exists with another dimension or metric.
        :raises VectorInputError: the name, dimension or metric is invalid (:func:`check_index_args`).
        """

    async def describe_index(self, name: str) -> IndexInfo:
        """Dimension, metric and vector count of ``name``; :class:`IndexNotFoundError` if absent."""

    async def list_indexes(self) -> list[str]:
        """The names of every index, sorted."""

    async def delete_index(self, name: str) -> None:
        """Drop ``name`` and everything in it; :class:`IndexNotFoundError` if absent."""

    async def upsert(
        self,
        index: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, MetadataValue]] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> None:
        """Insert or replace vectors by id (a replaced id loses its old metadata and document).

        Check input with :func:`check_upsert` before writing anything, so a bad batch writes nothing.
        """

    async def query(
        self,
        index: str,
        vector: Sequence[float],
        top_k: int = 10,
        filter: FilterInput | None = None,
        include_vectors: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> list[QueryResult]:
        """The ``top_k`` nearest vectors matching ``filter``, best score first.

        ``options`` holds store-specific search settings (e.g. HNSW ``ef``); an option the store
        does not know raises :class:`VectorInputError` naming it.
        """

    async def delete(
        self, index: str, ids: Sequence[str] | None = None, filter: FilterInput | None = None
    ) -> None:
        """Delete the given ids, or every vector matching ``filter``, or (both given) ids that match.

        Passing neither raises :class:`VectorInputError`, so a forgotten argument never empties
        an index (:meth:`delete_index` drops one); ``ids=[]`` deletes nothing; unknown ids are
        ignored. A missing index raises :class:`IndexNotFoundError` first.
        """

    async def count(self, index: str, filter: FilterInput | None = None) -> int:
        """How many vectors ``index`` holds, or how many match ``filter``."""

    async def aclose(self) -> None:
        """Release connections and files; the store is unusable afterwards."""


VectorStoreFactory = Callable[..., VectorStore]
"""``factory(**options) -> VectorStore``: what ``register_vector_stores`` registries hold."""


# ---------------------------------------------------------------------------
# Input checks every store shares
# ---------------------------------------------------------------------------


_INDEX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


def check_index_name(name: str) -> None:
    """Reject index names that would not be a valid table, collection or directory name in every store."""
    if not isinstance(name, str) or not _INDEX_NAME.match(name):
        raise VectorInputError(
            f"index name {name!r} is not valid: 1-63 characters from A-Z a-z 0-9 '_' '-', "
            "starting with a letter or digit"
        )


def check_index_args(name: str, dimension: int, metric: str) -> None:
    """Reject a bad name, a non-positive dimension or an unknown metric, worded the same by every store."""
    check_index_name(name)
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0:
        raise VectorInputError(f"dimension must be a positive integer, got {dimension!r}")
    if metric not in METRICS:
        raise VectorInputError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}")


def check_vector(vector: Sequence[float], dimension: int, where: str = "vector") -> list[float]:
    """``vector`` as a list of finite numbers of length ``dimension``, or a :class:`VectorInputError`.

    A ``list`` is returned as is (no copy: this check runs once per vector on the write path);
    any other sequence, such as a numpy array, is converted to a list of floats.
    """
    if isinstance(vector, str | bytes) or not hasattr(vector, "__len__"):
        raise VectorInputError(f"{where}: expected a sequence of floats, got {type(vector).__name__}")
    if len(vector) != dimension:
        raise VectorInputError(f"{where}: has dimension {len(vector)}, the index expects {dimension}")
    try:
        out = vector if type(vector) is list else list(map(float, vector))
        total = sum(out)  # also rejects non-numeric components in a list
    except (TypeError, ValueError):
        raise VectorInputError(f"{where}: every component must be a number") from None
    # A finite sum proves every component finite (NaN and infinity propagate); only a
    # non-finite sum, which may be mere overflow, needs the per-component check.
    if not math.isfinite(total) and not all(math.isfinite(x) for x in out):
        raise VectorInputError(f"{where}: contains NaN or infinity")
    return out


def check_metadata(metadata: Mapping[str, Any], where: str) -> Metadata:
    """Copy ``metadata``, rejecting keys and values outside :data:`MetadataValue`, naming the path."""
    if not isinstance(metadata, Mapping):
        raise VectorInputError(f"{where}: expected a mapping, got {type(metadata).__name__}")
    out: Metadata = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            raise VectorInputError(f"{where}: key {key!r} must be a non-empty string not starting with '$'")
        if isinstance(value, list | tuple):
            if not value:
                raise VectorInputError(f"{where}.{key}: lists must not be empty")
            for i, item in enumerate(value):
                _check_scalar(item, f"{where}.{key}[{i}]")
            out[key] = list(value)
        else:
            _check_scalar(value, f"{where}.{key}")
            out[key] = value
    return out


def _check_scalar(value: Any, where: str) -> None:
    if not isinstance(value, str | int | float | bool):
        raise VectorInputError(
            f"{where}: metadata values must be str, int, float, bool or a list of them; got {value!r}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise VectorInputError(f"{where}: NaN and infinity are not valid metadata values")


class UpsertBatch(NamedTuple):
    """An upsert batch as :func:`check_upsert` returns it: four lists of one length, every value checked."""

    ids: list[str]
    """The records' ids, unique within the batch."""
    vectors: list[list[float]]
    """Lists of floats of the index's dimension."""
    metadata: list[Metadata]
    """A copy of each record's metadata (``{}`` when none was given), lists as lists."""
    documents: list[str | None]
    """Each record's document, ``None`` when none was given."""


def check_upsert(
    dimension: int,
    ids: Sequence[str],
    vectors: Sequence[Sequence[float]],
    metadata: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[str | None] | None = None,
) -> UpsertBatch:
    """Validate an upsert batch and return it normalized: lengths agree, ids unique, vectors sized.

    Every error names the position at fault (``vectors[3]: has dimension 5, …``).
    """
    if isinstance(ids, str):
        raise VectorInputError("ids: expected a sequence of strings, got a single string")
    n = len(ids)
    if len(vectors) != n:
        raise VectorInputError(f"ids has {n} items but vectors has {len(vectors)}")
    if metadata is not None and len(metadata) != n:
        raise VectorInputError(f"ids has {n} items but metadata has {len(metadata)}")
    if documents is not None and len(documents) != n:
        raise VectorInputError(f"ids has {n} items but documents has {len(documents)}")
    seen: dict[str, int] = {}
    for i, id_ in enumerate(ids):
        if not isinstance(id_, str) or not id_:
            raise VectorInputError(f"ids[{i}]: must be a non-empty string, got {id_!r}")
        if id_ in seen:
            raise VectorInputError(f"ids[{i}]: {id_!r} repeats ids[{seen[id_]}]")
        seen[id_] = i
    out_vectors = [check_vector(v, dimension, f"vectors[{i}]") for i, v in enumerate(vectors)]
    out_meta = (
        [check_metadata(m, f"metadata[{i}]") for i, m in enumerate(metadata)]
        if metadata is not None
        else [{} for _ in range(n)]
    )
    out_docs: list[str | None] = []
    for i, doc in enumerate(documents if documents is not None else [None] * n):
        if doc is not None and not isinstance(doc, str):
            raise VectorInputError(f"documents[{i}]: must be a string or None, got {type(doc).__name__}")
        out_docs.append(doc)
    return UpsertBatch(list(ids), out_vectors, out_meta, out_docs)


def check_top_k(top_k: int) -> None:
    """Reject a ``top_k`` that is not a positive integer."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise VectorInputError(f"top_k must be a positive integer, got {top_k!r}")


def check_options(store: str, options: Mapping[str, Any] | None, known: Sequence[str]) -> dict[str, Any]:
    """``options`` as a dict, rejecting names the store does not know (never silently ignored)."""
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise VectorInputError(f"vector store {store!r}: unknown query option(s) {unknown}; known: {allowed}")
    return opts
