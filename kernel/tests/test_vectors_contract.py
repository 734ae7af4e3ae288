"""The conformance kit passes on a correct in-memory store and fails on broken ones."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from toolkernel.filters import ALL_OPERATORS, Filter, coerce_filter, matches, require_supported
from toolkernel.testing.stores import VectorStoreContract
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
    VectorStore,
    check_index_args,
    check_options,
    check_top_k,
    check_upsert,
    check_vector,
)


@dataclass
class _Index:
    dimension: int
    metric: Metric
    records: dict[str, tuple[list[float], Metadata, str | None]] = field(default_factory=dict)


def _score(metric: Metric, a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if metric == "dot":
        return dot
    if metric == "cosine":
        norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
        return dot / norms if norms else 0.0  # a zero vector has no direction: the contract says 0
    return -math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))


class MemoryStore:
    """A correct, exact, pure-Python store: the kit's own reference."""

    name = "memory"

    def __init__(self, supported: frozenset[str] = ALL_OPERATORS) -> None:
        self.supported_filter_operators = supported
        self._indexes: dict[str, _Index] = {}

    def _index(self, name: str) -> _Index:
        try:
            return self._indexes[name]
        except KeyError:
            raise IndexNotFoundError(name) from None

    def _filter(self, flt: FilterInput | None) -> Filter | None:
        parsed = coerce_filter(flt)
        if parsed is not None:
            require_supported(self.name, self.supported_filter_operators, parsed)
        return parsed

    def _selected(self, idx: _Index, flt: Filter | None) -> list[str]:
        return [rid for rid, (_, meta, _) in idx.records.items() if flt is None or matches(flt, meta)]

    async def create_index(self, name: str, dimension: int, metric: Metric = "cosine") -> None:
        check_index_args(name, dimension, metric)
        existing = self._indexes.get(name)
        if existing is None:
            self._indexes[name] = _Index(dimension, metric)
        elif (existing.dimension, existing.metric) != (dimension, metric):
            raise IndexExistsError(name, await self.describe_index(name))

    async def describe_index(self, name: str) -> IndexInfo:
        idx = self._index(name)
        return IndexInfo(name=name, dimension=idx.dimension, metric=idx.metric, count=len(idx.records))

    async def list_indexes(self) -> list[str]:
        return sorted(self._indexes)

    async def delete_index(self, name: str) -> None:
        self._index(name)
        del self._indexes[name]

    async def upsert(
        self,
        index: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, MetadataValue]] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> None:
        idx = self._index(index)
        checked = check_upsert(idx.dimension, ids, vectors, metadata, documents)
        for rid, vec, meta, doc in zip(*checked, strict=True):
            idx.records[rid] = (vec, meta, doc)

    async def query(
        self,
        index: str,
        vector: Sequence[float],
        top_k: int = 10,
        filter: FilterInput | None = None,
        include_vectors: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> list[QueryResult]:
        idx = self._index(index)
        q = check_vector(vector, idx.dimension)
        check_top_k(top_k)
        check_options(self.name, options, ())
        flt = self._filter(filter)
        scored = sorted(
            ((_score(idx.metric, idx.records[rid][0], q), rid) for rid in self._selected(idx, flt)),
            key=lambda pair: -pair[0],
        )[:top_k]
        return [
            QueryResult(
                id=rid,
                score=score,
                metadata=idx.records[rid][1],
                document=idx.records[rid][2],
                vector=idx.records[rid][0] if include_vectors else None,
            )
            for score, rid in scored
        ]

    async def delete(
        self, index: str, ids: Sequence[str] | None = None, filter: FilterInput | None = None
    ) -> None:
        idx = self._index(index)
        if ids is None and filter is None:
            raise VectorInputError("delete: pass ids, a filter, or both")
        flt = self._filter(filter)
        chosen = set(self._selected(idx, flt))
        if ids is not None:
            chosen &= set(ids)
        for rid in chosen:
            del idx.records[rid]

    async def count(self, index: str, filter: FilterInput | None = None) -> int:
        idx = self._index(index)
        return len(self._selected(idx, self._filter(filter)))

    async def aclose(self) -> None:
        self._indexes.clear()


class TestMemoryStore(VectorStoreContract):
    batch_size = 2_000  # pure-Python scoring: keeps the kernel suite fast

    @pytest.fixture
    async def vector_store(self) -> AsyncIterator[VectorStore]:
        store = MemoryStore()
        yield store
        await store.aclose()


class TestMemoryStoreWithFewOperators(VectorStoreContract):
    """A store claiming a subset: the kit checks every other operator is refused."""

    batch_size = 100

    @pytest.fixture
    async def vector_store(self) -> AsyncIterator[VectorStore]:
        store = MemoryStore(frozenset({"$eq", "$in", "$and", "$or"}))
        yield store
        await store.aclose()


def test_reference_store_satisfies_the_protocol() -> None:
    assert isinstance(MemoryStore(), VectorStore)


# --- broken stores: each must make one kit test fail ---------------------------------


class DropsFilters(MemoryStore):
    """Ignores filters in query: the silent drop the contract forbids."""

    def _filter(self, flt: FilterInput | None) -> Filter | None:
        return None


class DistanceScores(MemoryStore):
    """Reports euclidean distance (lower-is-better) instead of its negation."""

    async def query(self, *args: Any, **kwargs: Any) -> list[QueryResult]:
        hits = await super().query(*args, **kwargs)
        return [h.model_copy(update={"score": abs(h.score)}) for h in hits]


class SkipsDimensionCheck(MemoryStore):
    """Accepts vectors of any length."""

    async def upsert(
        self, index: str, ids: Sequence[str], vectors: Sequence[Sequence[float]], **_: Any
    ) -> None:
        idx = self._index(index)
        for rid, vec in zip(ids, vectors, strict=False):
            idx.records[rid] = (list(vec), {}, None)


class LosesConcurrentWrites(MemoryStore):
    """Read-copy-write with an await in between: concurrent upserts overwrite each other."""

    async def upsert(
        self, index: str, ids: Sequence[str], vectors: Sequence[Sequence[float]], **_: Any
    ) -> None:
        idx = self._index(index)
        checked = check_upsert(idx.dimension, ids, vectors)
        records = dict(idx.records)
        await anyio.sleep(0.001)
        for rid, vec, meta, doc in zip(*checked, strict=True):
            records[rid] = (vec, meta, doc)
        idx.records = records


class IgnoresUnclaimedOperators(MemoryStore):
    """Claims only $eq but evaluates no filter it does not understand, without an error."""

    def __init__(self) -> None:
        super().__init__(frozenset({"$eq"}))

    def _filter(self, flt: FilterInput | None) -> Filter | None:
        parsed = coerce_filter(flt)
        return parsed if parsed is not None and parsed.operators() <= {"$eq"} else None


class WritesPartialBatches(MemoryStore):
    """Writes the valid rows of a batch before failing on a bad one."""

    async def upsert(
        self, index: str, ids: Sequence[str], vectors: Sequence[Sequence[float]], **kw: Any
    ) -> None:
        idx = self._index(index)
        for i, (rid, vec) in enumerate(zip(ids, vectors, strict=False)):
            if len(vec) == idx.dimension:
                idx.records[rid] = (list(vec), {}, None)
            else:
                raise VectorInputError(f"vectors[{i}]: wrong dimension")
        check_upsert(idx.dimension, ids, vectors, kw.get("metadata"), kw.get("documents"))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("broken", "test", "args"),
    [
        (DropsFilters, "test_filter_operator", ("$eq",)),
        (DistanceScores, "test_metric_matches_exact_search", ("euclidean",)),
        (SkipsDimensionCheck, "test_bad_input_is_rejected_and_writes_nothing", ()),
        (LosesConcurrentWrites, "test_concurrent_writers_and_readers", ()),
        (IgnoresUnclaimedOperators, "test_filter_operator", ("$gt",)),
        (WritesPartialBatches, "test_bad_input_is_rejected_and_writes_nothing", ()),
    ],
)
async def test_kit_catches_broken_store(broken: type[MemoryStore], test: str, args: tuple[Any, ...]) -> None:
    kit = VectorStoreContract()
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        await getattr(kit, test)(broken(), *args)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
