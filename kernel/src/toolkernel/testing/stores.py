"""The vector store conformance kit: a pytest class a store plugin subclasses.

Usage, in a plugin's test module (unique file name, e.g. ``tests/test_mystore_store.py``)::

    import pytest
    from toolkernel.testing.stores import VectorStoreContract

    class TestMyStore(VectorStoreContract):
        @pytest.fixture
        async def vector_store(self):
            store = MyStore(...)          # a fresh store; may be shared with earlier tests' indexes
            yield store
            await store.aclose()

Every test uses fresh, uniquely named indexes and deletes them afterwards, so a store backed
by a shared server works. The kit checks behaviour, not class names: CRUD, every metric
against exact numpy search, every filter operator the store claims (expected results from
:func:`toolkernel.filters.matches`, on fixed records and on records and filters hypothesis
generates: list, missing and mixed-type fields, and always int beside fractional numbers),
a zero vector's cosine (``0.0``, never NaN), and that every other operator raises
:class:`~toolkernel.vectors.UnsupportedFilterError`, a 10k-vector batch, concurrent writers
and readers, unicode, empty results and bad input.

Tests run on anyio's pytest plugin (``@pytest.mark.anyio``) with the asyncio backend. This
module imports numpy and hypothesis (``pip install 'toolkernel[test]'``); only test code
imports it, never the kernel.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import anyio
import pytest

try:
    import numpy as np
    from hypothesis import HealthCheck, Phase, example, given, settings
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"toolkernel.testing.stores needs {exc.name}: pip install 'toolkernel[test]'", name=exc.name
    ) from exc

from toolkernel.filters import ALL_OPERATORS, Condition, Node, matches, parse_filter
from toolkernel.vectors import (
    METRICS,
    IndexExistsError,
    IndexNotFoundError,
    InvalidFilterError,
    Metric,
    QueryResult,
    UnsupportedFilterError,
    VectorInputError,
    VectorStore,
)

__all__ = [
    "FILTER_CASES",
    "FILTER_RECORDS",
    "NUMBER_CASES",
    "NUMBER_RECORDS",
    "SOLE_OPERATOR_FILTERS",
    "VectorStoreContract",
    "exact_scores",
]

# Records the filter tests search: scalar, list, boolean, unicode and missing fields.
# ``scores`` holds lists of numbers: a range holds if *any* element satisfies it.
FILTER_RECORDS: list[dict[str, Any]] = [
    {
        "color": "red",
        "price": 1.5,
        "qty": 1,
        "tags": ["a", "b"],
        "active": True,
        "name": "alpha",
        "scores": [1, 9],
    },
    {"color": "red", "price": 2.5, "qty": 2, "tags": ["b"], "active": False, "name": "Älpha", "scores": [5]},
    {"color": "blue", "price": 3.5, "qty": 3, "tags": ["a", "c"], "active": True, "name": "beta"},
    {"color": "blue", "price": 10.0, "qty": 4, "tags": ["c"], "name": "gamma", "scores": [3, 4, 12]},
    {"color": "green", "price": 0.25, "qty": 5, "active": False, "name": "alphabet"},
    {
        "color": "green",
        "qty": 6,
        "tags": ["a", "b", "c"],
        "active": True,
        "name": "δέλτα",
        "scores": [0.5, 7],
    },
    {"color": "紫", "price": 7.75, "qty": 7, "tags": ["z"], "active": True},
    {"price": 5.0, "qty": 8, "tags": ["b", "z"], "active": False, "name": "epsilon", "scores": [6.5]},
    {"color": "red", "price": 5.0, "qty": 9, "active": True, "name": "al"},
    {"color": "blue", "price": 12.0, "tags": ["a"], "active": False, "name": "zeta"},
    {},
    {"color": "green", "price": -3.0, "qty": 0, "tags": ["b", "c"], "name": "eta", "scores": [2, 2]},
]

# Filters per operator; a case is run only if the store claims every operator it uses.
FILTER_CASES: dict[str, list[dict[str, Any]]] = {
    "$eq": [
        {"color": "red"},
        {"color": {"$eq": "紫"}},
        {"qty": {"$eq": 3}},
        {"active": True},
        {"tags": "c"},
        {"price": {"$eq": 5.0}},
        {"color": "none-such"},
    ],
    "$ne": [{"color": {"$ne": "red"}}, {"active": {"$ne": True}}, {"tags": {"$ne": "a"}}],
    "$gt": [
        {"price": {"$gt": 5.0}},
        {"qty": {"$gt": 4}},
        {"scores": {"$gt": 8}},
        {"name": {"$gt": "epsilon"}},
    ],
    "$gte": [
        {"price": {"$gte": 5.0}},
        {"qty": {"$gte": 7}},
        {"scores": {"$gte": 7}},
        {"name": {"$gte": "eta"}},
    ],
    "$lt": [{"price": {"$lt": 2.5}}, {"qty": {"$lt": 1}}, {"scores": {"$lt": 2}}, {"name": {"$lt": "b"}}],
    "$lte": [
        {"price": {"$lte": 2.5}},
        {"qty": {"$lte": 2}, "price": {"$lte": 100.0}},
        {"scores": {"$lte": 3}},
        {"name": {"$lte": "al"}},
    ],
    "$in": [
        {"color": {"$in": ["red", "green"]}},
        {"color": ["blue", "紫"]},
        {"tags": {"$in": ["z", "q"]}},
        {"qty": {"$in": [1, 5, 9]}},
    ],
    "$nin": [{"color": {"$nin": ["red", "green"]}}, {"tags": {"$nin": ["a"]}}],
    "$all": [{"tags": {"$all": ["a", "b"]}}, {"tags": {"$all": ["c"]}}],
    "$exists": [{"price": {"$exists": True}}, {"tags": {"$exists": False}}, {"name": {"$exists": False}}],
    "$regex": [{"name": {"$regex": "^al"}}, {"name": {"$regex": "(?i)^äl"}}, {"name": {"$regex": "ta$"}}],
    "$and": [
        {"$and": [{"color": "red"}, {"active": True}]},
        {"$and": [{"color": "blue"}, {"qty": {"$gte": 3}}, {"price": {"$lt": 11.0}}]},
    ],
    "$or": [
        {"$or": [{"color": "green"}, {"active": False}]},
        {"$or": [{"qty": {"$lt": 2}}, {"price": {"$gt": 9.0}}]},
    ],
    "$not": [
        {"$not": {"color": "red"}},
        {"price": {"$not": {"$gt": 4.0}}},
        {"$not": {"$or": [{"color": "red"}, {"color": "blue"}]}},
    ],
    "$nor": [{"$nor": [{"color": "red"}, {"active": True}]}],
}

# Whole and fractional numbers side by side: a backend that keeps ints and floats apart may
# compare an int with a fractional operand wrongly (truncating 0.5 to 0, say). Every store
# must return exactly the records ``matches`` does, for every operator it claims.
NUMBER_RECORDS: list[dict[str, Any]] = [
    {"a": 0},
    {"a": 1},
    {"a": -1},
    {"a": 2},
    {"a": 0.0},
    {"a": 0.5},
    {"a": -0.5},
    {"a": 1.0},
    {"a": 1.5},
    {"a": [0, 3]},
    {"a": [0.5, 4.0]},
    {"a": [-1, 2.5]},
    {"b": 0},
]

_NUMBER_OPERANDS: tuple[float, ...] = (0.5, -0.5, 1.5, 2.5, 0, 1, 1.0, -1, 0.0)
"""Each range and equality operator is tried with each of these against :data:`NUMBER_RECORDS`."""

NUMBER_CASES: list[dict[str, Any]] = [
    *({"a": {op: v}} for op in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte") for v in _NUMBER_OPERANDS),
    {"a": {"$in": [0.5, 2]}},
    {"a": {"$in": [-0.5, 1.5, 3]}},
    {"a": {"$nin": [0.5, 1]}},
    {"a": {"$all": [0.5]}},
    {"a": {"$all": [0, 3.0]}},
    {"$or": [{"a": 0.5}, {"a": {"$gt": 2.5}}]},
    {"$and": [{"a": {"$gte": -0.5}}, {"a": {"$lt": 0.5}}]},
    {"$not": {"a": {"$eq": 0.5}}},
    {"$nor": [{"a": {"$lte": -0.5}}]},
]
"""Filters mixing int and float operands and values; run when the store claims every operator used."""

# One filter per operator that uses nothing else, for the "unclaimed operator" check.
SOLE_OPERATOR_FILTERS: dict[str, dict[str, Any]] = {
    "$eq": {"color": {"$eq": "red"}},
    "$ne": {"color": {"$ne": "red"}},
    "$gt": {"price": {"$gt": 1.0}},
    "$gte": {"price": {"$gte": 1.0}},
    "$lt": {"price": {"$lt": 1.0}},
    "$lte": {"price": {"$lte": 1.0}},
    "$in": {"color": {"$in": ["red"]}},
    "$nin": {"color": {"$nin": ["red"]}},
    "$all": {"tags": {"$all": ["a"]}},
    "$exists": {"price": {"$exists": True}},
    "$regex": {"name": {"$regex": "^a"}},
    "$and": {"$and": [{"color": "red"}, {"qty": 1}]},
    "$or": {"$or": [{"color": "red"}, {"qty": 1}]},
    "$not": {"$not": {"color": "red"}},
    "$nor": {"$nor": [{"color": "red"}]},
}


def exact_scores(metric: Metric, data: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The score the contract defines for ``query`` against every row of ``data`` (float64)."""
    d = data.astype(np.float64)
    q = query.astype(np.float64)
    scores: np.ndarray
    if metric == "dot":
        scores = d @ q
    elif metric == "cosine":
        norms = np.linalg.norm(d, axis=1) * np.linalg.norm(q)
        scores = np.divide(d @ q, norms, out=np.zeros(len(d)), where=norms > 0)  # zero vector: 0
    else:
        scores = -np.linalg.norm(d - q, axis=1)
    return scores


_RANGE_OPERATORS = frozenset({"$gt", "$gte", "$lt", "$lte"})

# What generated records and filters are made of: few keys, so filters hit; halves, so
# numbers are exact in every store; a small alphabet with an accent and a CJK character,
# so string order is by code point and every backend can store it.
_KEYS = ("a", "b", "c")
_numbers = st.integers(-8, 8).map(lambda i: i / 2 if i % 3 else i // 2)
_texts = st.text(alphabet="abAB é中", max_size=3)
_scalars = st.one_of(_numbers, st.booleans(), _texts)
_values = st.one_of(_scalars, st.lists(_scalars, min_size=1, max_size=3))
_records = st.lists(st.dictionaries(st.sampled_from(_KEYS), _values, max_size=3), min_size=1, max_size=8)
_operands: dict[str, st.SearchStrategy[Any]] = {
    "$eq": _scalars,
    "$ne": _scalars,
    "$gt": st.one_of(_numbers, _texts),
    "$gte": st.one_of(_numbers, _texts),
    "$lt": st.one_of(_numbers, _texts),
    "$lte": st.one_of(_numbers, _texts),
    "$in": st.lists(_scalars, min_size=1, max_size=3),
    "$nin": st.lists(_scalars, min_size=1, max_size=3),
    "$all": st.lists(_scalars, min_size=1, max_size=2),
    "$exists": st.booleans(),
    "$regex": st.sampled_from(["^a", "b$", "(?i)a", "é", "^$", "中"]),
}


def _condition(op: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda key, operand: {key: {op: operand}}, st.sampled_from(_KEYS), _operands[op])


def _filter_using(op: str) -> st.SearchStrategy[dict[str, Any]]:
    """A filter whose outermost operator is ``op`` (logical ones around field conditions)."""
    if op in _operands:
        return _condition(op)
    inner = st.sampled_from(sorted(_operands)).flatmap(_condition)
    if op == "$not":
        return inner.map(lambda condition: {"$not": condition})
    return st.lists(inner, min_size=1, max_size=2).map(lambda conditions: {op: conditions})


# One filter per operator, drawn up front: a test cannot draw while a store call is pending.
_filters = st.fixed_dictionaries({op: _filter_using(op) for op in sorted(ALL_OPERATORS)})


def _kind(value: Any) -> type:
    return bool if isinstance(value, bool) else str if isinstance(value, str) else float


def _one_type_lists(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` with each list cut to the elements of its first element's type."""
    return [
        {
            key: [v for v in value if _kind(v) is _kind(value[0])] if isinstance(value, list) else value
            for key, value in record.items()
        }
        for record in records
    ]


def _string_range(node: Node) -> bool:
    """Whether ``node`` holds a range operator with a string operand."""
    if isinstance(node, Condition):
        return node.op in _RANGE_OPERATORS and isinstance(node.value, str)
    children = [node.item] if hasattr(node, "item") else list(getattr(node, "items", ()))
    return any(_string_range(child) for child in children)


def _close(a: float, b: float, tol: float) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


class VectorStoreContract:
    """The behaviour every :class:`~toolkernel.vectors.VectorStore` must show; subclass it in a plugin.

    The subclass provides an async fixture ``vector_store`` yielding a ready store and may
    tune the class attributes below (say why in a comment when you lower ``min_recall``).
    """

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    min_recall: ClassVar[float] = 1.0
    """Recall@10 the metric tests require against exact search (lower it only for approximate indexes)."""

    score_tolerance: ClassVar[float] = 1e-3
    """Relative/absolute tolerance when comparing scores with float64 numpy (stores keep float32)."""

    batch_size: ClassVar[int] = 10_000
    """Vectors written in one ``upsert`` call by :meth:`test_large_batch`."""

    string_ranges: ClassVar[bool] = True
    """Whether the store evaluates ``$gt``/``$gte``/``$lt``/``$lte`` with string operands.

    A store that cannot sets it to ``False``; the kit then checks that such filters raise
    :class:`~toolkernel.vectors.UnsupportedFilterError` rather than return a wrong answer.
    """

    mixed_type_lists: ClassVar[bool] = True
    """Whether the store keeps lists whose elements differ in type (``[1, "a", True]``).

    A store that cannot sets it to ``False``; the kit then checks that such a list raises
    :class:`~toolkernel.vectors.VectorInputError` at upsert, and generates no more of them.
    """

    @pytest.fixture
    def anyio_backend(self) -> str:
        """Run the kit on asyncio (the backend every toolkernel host uses)."""
        return "asyncio"

    # -- helpers -----------------------------------------------------------

    @asynccontextmanager
    async def fresh_index(
        self, store: VectorStore, dimension: int, metric: Metric = "cosine"
    ) -> AsyncIterator[str]:
        """Create a uniquely named index and delete it afterwards, so a shared server stays clean."""
        name = f"kit-{uuid.uuid4().hex[:12]}"
        await store.create_index(name, dimension, metric)
        try:
            yield name
        finally:
            if name in await store.list_indexes():
                await store.delete_index(name)

    @staticmethod
    def random_vectors(n: int, dimension: int, seed: int, *, varied_norms: bool = False) -> np.ndarray:
        """``n`` seeded random float32 vectors; ``varied_norms`` scales them so dot and cosine disagree."""
        rng = np.random.default_rng(seed)
        data = rng.standard_normal((n, dimension)).astype(np.float32)
        data /= np.linalg.norm(data, axis=1, keepdims=True)
        if varied_norms:
            data *= rng.uniform(0.2, 3.0, size=(n, 1)).astype(np.float32)
        return data

    @staticmethod
    def ids_of(results: Sequence[QueryResult]) -> list[str]:
        """The ids of ``results``, in order."""
        return [r.id for r in results]

    async def filtered_ids(self, store: VectorStore, index: str, flt: Mapping[str, Any]) -> set[str]:
        """Every id ``query`` returns for ``flt`` with ``top_k`` covering the whole index."""
        results = await store.query(index, [1.0, 0.0, 0.0, 0.0], top_k=len(FILTER_RECORDS) + 5, filter=flt)
        return set(self.ids_of(results))

    async def load_filter_records(self, store: VectorStore, index: str) -> dict[str, dict[str, Any]]:
        """Write :data:`FILTER_RECORDS` into ``index`` (dimension 4) and return them by id."""
        vectors = self.random_vectors(len(FILTER_RECORDS), 4, seed=7)
        ids = [f"r{i}" for i in range(len(FILTER_RECORDS))]
        await store.upsert(index, ids, vectors.tolist(), metadata=FILTER_RECORDS)
        return dict(zip(ids, FILTER_RECORDS, strict=True))

    # -- declaration ---------------------------------------------------------

    async def test_declares_supported_operators(self, vector_store: VectorStore) -> None:
        ops = vector_store.supported_filter_operators
        assert isinstance(ops, frozenset), "supported_filter_operators must be a frozenset"
        assert ops <= ALL_OPERATORS, f"unknown operators declared: {sorted(ops - ALL_OPERATORS)}"
        assert isinstance(vector_store.name, str)
        assert vector_store.name, "a store needs a name for its error messages"

    # -- index lifecycle ---------------------------------------------------

    async def test_index_lifecycle(self, vector_store: VectorStore) -> None:
        store = vector_store
        async with self.fresh_index(store, 3, "dot") as name:
            info = await store.describe_index(name)
            assert (info.name, info.dimension, info.metric, info.count) == (name, 3, "dot", 0)
            listed = await store.list_indexes()
            assert name in listed
            assert listed == sorted(listed), "list_indexes must be sorted"
            await store.create_index(name, 3, "dot")  # same settings: a no-op
            with pytest.raises(IndexExistsError):
                await store.create_index(name, 4, "dot")
            with pytest.raises(IndexExistsError):
                await store.create_index(name, 3, "cosine")
            await store.delete_index(name)
            assert name not in await store.list_indexes()
            with pytest.raises(IndexNotFoundError):
                await store.describe_index(name)
            with pytest.raises(IndexNotFoundError):
                await store.delete_index(name)

    async def test_create_index_rejects_bad_arguments(self, vector_store: VectorStore) -> None:
        with pytest.raises(VectorInputError):
            await vector_store.create_index(f"kit-{uuid.uuid4().hex[:12]}", 0, "cosine")
        bad_metric: Any = "manhattan"  # deliberately outside Metric
        with pytest.raises(VectorInputError):
            await vector_store.create_index(f"kit-{uuid.uuid4().hex[:12]}", 3, bad_metric)

    # -- records -------------------------------------------------------------

    async def test_an_empty_upsert_changes_nothing(self, vector_store: VectorStore) -> None:
        store = vector_store
        async with self.fresh_index(store, 3, "cosine") as index:
            await store.upsert(index, ["a"], [[1.0, 0.0, 0.0]])
            await store.upsert(index, [], [], metadata=[], documents=[])
            await store.upsert(index, [], [])
            assert await store.count(index) == 1

    async def test_upsert_query_replace_delete(self, vector_store: VectorStore) -> None:
        store = vector_store
        async with self.fresh_index(store, 3, "cosine") as index:
            await store.upsert(
                index,
                ["a", "b", "c"],
                [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]],
                metadata=[{"k": 1}, {"k": 2, "tags": ["x", "y"]}, {}],
                documents=["doc a", None, "doc c"],
            )
            assert await store.count(index) == 3
            assert (await store.describe_index(index)).count == 3

            hits = await store.query(index, [0.0, 0.0, 5.0], top_k=1)
            assert self.ids_of(hits) == ["c"]
            assert _close(hits[0].score, 1.0, self.score_tolerance)
            assert hits[0].document == "doc c"
            assert hits[0].metadata == {}
            assert hits[0].vector is None, "vectors are returned only with include_vectors=True"

            hits = await store.query(index, [0.0, 1.0, 0.0], top_k=3, include_vectors=True)
            assert self.ids_of(hits)[0] == "b"
            assert hits[0].metadata == {"k": 2, "tags": ["x", "y"]}
            assert hits[0].document is None
            assert hits[0].vector is not None
            assert np.allclose(hits[0].vector, [0.0, 1.0, 0.0], atol=1e-5)
            by_id = {h.id: h for h in hits}
            c_vec = by_id["c"].vector
            assert c_vec is not None
            # cosine indexes may return unit-normalized vectors: compare directions
            assert np.allclose(np.asarray(c_vec) / np.linalg.norm(c_vec), [0.0, 0.0, 1.0], atol=1e-5)

            # Replacing an id replaces its vector, metadata and document.
            await store.upsert(index, ["a"], [[0.0, 0.0, 1.0]], metadata=[{"k": 9}])
            assert await store.count(index) == 3
            hits = await store.query(index, [1.0, 0.0, 0.0], top_k=3)
            replaced = next(h for h in hits if h.id == "a")
            assert replaced.metadata == {"k": 9}
            assert replaced.document is None
            assert _close(replaced.score, 0.0, self.score_tolerance)

            await store.delete(index, ids=["a", "never-written"])
            assert await store.count(index) == 2
            assert "a" not in self.ids_of(await store.query(index, [1.0, 0.0, 0.0], top_k=10))

    async def test_delete_by_filter_and_by_ids_and_filter(self, vector_store: VectorStore) -> None:
        store = vector_store
        if "$eq" not in store.supported_filter_operators:
            pytest.skip("the store does not claim $eq")
        async with self.fresh_index(store, 2, "euclidean") as index:
            ids = [f"p{i}" for i in range(6)]
            meta: list[Mapping[str, Any]] = [{"group": "odd" if i % 2 else "even"} for i in range(6)]
            await store.upsert(index, ids, [[float(i), 1.0] for i in range(6)], metadata=meta)
            await store.delete(index, filter={"group": "odd"})
            assert await store.count(index) == 3
            # ids and filter together: only ids that match are deleted
            await store.delete(index, ids=["p0", "p2", "p3"], filter={"group": {"$eq": "even"}})
            remaining = self.ids_of(await store.query(index, [0.0, 0.0], top_k=10))
            assert sorted(remaining) == ["p4"]
            # Neither ids nor a filter is a mistake, never "delete everything".
            with pytest.raises(VectorInputError):
                await store.delete(index)
            await store.delete(index, ids=[])  # an empty list of ids deletes nothing
            assert await store.count(index) == 1

    # -- metrics -------------------------------------------------------------

    @pytest.mark.parametrize("metric", METRICS)
    async def test_metric_matches_exact_search(self, vector_store: VectorStore, metric: Metric) -> None:
        store = vector_store
        dim, n = 16, 300
        data = self.random_vectors(n, dim, seed=1, varied_norms=True)
        queries = self.random_vectors(20, dim, seed=2, varied_norms=True)
        ids = [f"v{i}" for i in range(n)]
        async with self.fresh_index(store, dim, metric) as index:
            await store.upsert(index, ids, data.tolist())
            recalls = []
            for q in queries:
                exact = exact_scores(metric, data, q)
                expected = [ids[i] for i in np.argsort(-exact, kind="stable")[:10]]
                hits = await store.query(index, q.tolist(), top_k=10)
                assert len(hits) == 10
                scores = [h.score for h in hits]
                assert scores == sorted(scores, reverse=True), f"{metric}: results are not best-first"
                for hit in hits:
                    want = float(exact[ids.index(hit.id)])
                    assert _close(hit.score, want, self.score_tolerance), (
                        f"{metric}: score of {hit.id} is {hit.score}, the contract defines {want}"
                    )
                recalls.append(len(set(self.ids_of(hits)) & set(expected)) / 10)
            recall = sum(recalls) / len(recalls)
            assert recall >= self.min_recall, f"{metric}: recall@10 {recall:.3f} < {self.min_recall}"

    async def test_cosine_with_a_zero_vector_scores_zero(self, vector_store: VectorStore) -> None:
        """A zero vector has no direction: the contract gives it cosine ``0.0``, never NaN."""
        store = vector_store
        async with self.fresh_index(store, 3, "cosine") as index:
            await store.upsert(
                index, ["zero", "x", "minus-x"], [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [-2.0, 0.0, 0.0]]
            )
            hits = await store.query(index, [3.0, 0.0, 0.0], top_k=3)
            assert self.ids_of(hits) == ["x", "zero", "minus-x"], [(h.id, h.score) for h in hits]
            scores = {h.id: h.score for h in hits}
            assert _close(scores["zero"], 0.0, self.score_tolerance), (
                f"a stored zero vector scored {scores['zero']}"
            )
            hits = await store.query(index, [0.0, 0.0, 0.0], top_k=3)
            assert sorted(self.ids_of(hits)) == ["minus-x", "x", "zero"]
            bad = [(h.id, h.score) for h in hits if not _close(h.score, 0.0, self.score_tolerance)]
            assert not bad, f"a zero query vector must score 0.0 against every vector, got {bad}"

    # -- filters -------------------------------------------------------------

    @pytest.mark.parametrize("operator", sorted(ALL_OPERATORS))
    async def test_filter_operator(self, vector_store: VectorStore, operator: str) -> None:
        store = vector_store
        claimed = store.supported_filter_operators
        async with self.fresh_index(store, 4, "cosine") as index:
            records = await self.load_filter_records(store, index)
            if operator not in claimed:
                flt = SOLE_OPERATOR_FILTERS[operator]
                with pytest.raises(UnsupportedFilterError) as caught:
                    await store.query(index, [1.0, 0.0, 0.0, 0.0], filter=flt)
                assert caught.value.store == store.name
                if parse_filter(flt).operators() - {operator} <= claimed:
                    assert caught.value.operator == operator
                with pytest.raises(UnsupportedFilterError):
                    await store.count(index, filter=flt)
                with pytest.raises(UnsupportedFilterError):
                    await store.delete(index, filter=flt)
                assert await store.count(index) == len(records), "a refused delete must delete nothing"
                return
            ran = 0
            for flt in FILTER_CASES[operator]:
                if not parse_filter(flt).operators() <= claimed:
                    continue
                if not self.string_ranges and _string_range(parse_filter(flt).root):
                    with pytest.raises(UnsupportedFilterError):
                        await self.filtered_ids(store, index, flt)
                    continue
                ran += 1
                expected = {rid for rid, meta in records.items() if matches(flt, meta)}
                got = await self.filtered_ids(store, index, flt)
                assert got == expected, (
                    f"filter {flt}: missing {sorted(expected - got)}, unexpected {sorted(got - expected)}"
                )
                assert await store.count(index, filter=flt) == len(expected), f"count with filter {flt}"
                assert await store.count(index, filter=parse_filter(flt)) == len(expected)
            assert ran, f"no case for {operator} uses only operators the store claims"

    async def test_ints_and_floats_compare_as_numbers(self, vector_store: VectorStore) -> None:
        """Fractional operands against whole values and back: ``{"a": {"$eq": 0.5}}`` never finds ``a: 0``."""
        store = vector_store
        claimed = store.supported_filter_operators
        cases = [flt for flt in NUMBER_CASES if parse_filter(flt).operators() <= claimed]
        if not cases:
            pytest.skip("the store claims none of the comparison operators")
        async with self.fresh_index(store, 2, "dot") as index:
            ids = [f"n{i}" for i in range(len(NUMBER_RECORDS))]
            vectors = [[1.0, float(i)] for i in range(len(ids))]
            await store.upsert(index, ids, vectors, metadata=NUMBER_RECORDS)
            wrong = []
            for flt in cases:
                expected = {rid for rid, meta in zip(ids, NUMBER_RECORDS, strict=True) if matches(flt, meta)}
                got = set(self.ids_of(await store.query(index, [1.0, 0.0], top_k=len(ids), filter=flt)))
                if got != expected:
                    show = dict(zip(ids, NUMBER_RECORDS, strict=True))
                    wrong.append(
                        f"filter {flt}: missing {[show[i] for i in sorted(expected - got)]}, "
                        f"unexpected {[show[i] for i in sorted(got - expected)]}"
                    )
                elif await store.count(index, filter=flt) != len(expected):
                    wrong.append(f"count with filter {flt}")
            assert not wrong, f"{len(wrong)} of {len(cases)} filters disagree with matches():\n" + "\n".join(
                wrong
            )

    async def test_filtered_delete_matches_reference(self, vector_store: VectorStore) -> None:
        store = vector_store
        flt: dict[str, Any] = {"tags": "b"} if "$eq" in store.supported_filter_operators else {}
        if not flt:
            pytest.skip("the store does not claim $eq")
        async with self.fresh_index(store, 4, "cosine") as index:
            records = await self.load_filter_records(store, index)
            await store.delete(index, filter=flt)
            survivors = {rid for rid, meta in records.items() if not matches(flt, meta)}
            assert await self.filtered_ids(store, index, {}) == survivors

    @settings(
        max_examples=30,  # one fresh index each
        derandomize=True,  # the same cases on every run: a plugin's CI never flickers
        database=None,
        deadline=None,
        # No shrinking: each step costs a fresh index on the store, and the failure message
        # already shows the (small) records and the filter.
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(records=_records, candidates=_filters)
    # Always tried, whatever hypothesis generates: an int beside a fractional operand.
    @example(
        records=[{"a": 0, "c": True, "b": -4.0}, {"a": 0.5}, {"a": [1, 2.5]}],
        candidates={
            "$eq": {"a": {"$eq": 0.5}},
            "$ne": {"a": {"$ne": 0.5}},
            "$gt": {"a": {"$gt": -0.5}},
            "$gte": {"a": {"$gte": 0.5}},
            "$lt": {"a": {"$lt": 0.5}},
            "$lte": {"a": {"$lte": -0.5}},
            "$in": {"a": {"$in": [0.5, 2]}},
            "$nin": {"b": {"$nin": [-4]}},
        },
    )
    async def test_filters_match_the_reference_on_generated_records(
        self, vector_store: VectorStore, records: list[dict[str, Any]], candidates: dict[str, dict[str, Any]]
    ) -> None:
        """Every claimed operator, on generated records with list, missing and mixed-type fields."""
        store = vector_store
        claimed = store.supported_filter_operators
        filters = [flt for flt in candidates.values() if parse_filter(flt).operators() <= claimed]
        async with self.fresh_index(store, 2, "dot") as index:
            ids = [f"g{i}" for i in range(len(records))]
            vectors = [[1.0, float(i)] for i in range(len(records))]
            if not self.mixed_type_lists and records != _one_type_lists(records):
                with pytest.raises(VectorInputError):
                    await store.upsert(index, ids, vectors, metadata=records)
                records = _one_type_lists(records)
            await store.upsert(index, ids, vectors, metadata=records)
            for flt in filters:
                if not self.string_ranges and _string_range(parse_filter(flt).root):
                    with pytest.raises(UnsupportedFilterError):
                        await store.count(index, filter=flt)
                    continue
                expected = {rid for rid, meta in zip(ids, records, strict=True) if matches(flt, meta)}
                hits = await store.query(index, [1.0, 0.0], top_k=len(ids), filter=flt)
                got = set(self.ids_of(hits))
                assert got == expected, (
                    f"filter {flt} on {dict(zip(ids, records, strict=True))}: "
                    f"missing {sorted(expected - got)}, unexpected {sorted(got - expected)}"
                )
                assert await store.count(index, filter=flt) == len(expected), f"count with filter {flt}"

    async def test_invalid_filter_is_rejected(self, vector_store: VectorStore) -> None:
        async with self.fresh_index(vector_store, 4) as index:
            await self.load_filter_records(vector_store, index)
            with pytest.raises(InvalidFilterError):
                await vector_store.query(index, [1.0, 0.0, 0.0, 0.0], filter={"price": {"$gt": [1]}})
            with pytest.raises(InvalidFilterError):
                await vector_store.count(index, filter={"$bogus": 1})

    # -- scale and concurrency -------------------------------------------------

    async def test_large_batch(self, vector_store: VectorStore) -> None:
        n, dim = self.batch_size, 32
        data = self.random_vectors(n, dim, seed=3)
        ids = [f"item-{i}" for i in range(n)]
        meta = [{"i": i, "bucket": i % 10} for i in range(n)]
        async with self.fresh_index(vector_store, dim, "cosine") as index:
            await vector_store.upsert(index, ids, data.tolist(), metadata=meta)
            assert await vector_store.count(index) == n
            probe = n // 3
            hits = await vector_store.query(index, data[probe].tolist(), top_k=5)
            assert hits[0].id == ids[probe]
            assert hits[0].metadata == meta[probe]
            if "$eq" in vector_store.supported_filter_operators:
                assert await vector_store.count(index, filter={"bucket": 3}) == n // 10

    async def test_concurrent_writers_and_readers(self, vector_store: VectorStore) -> None:
        store = vector_store
        writers, batches, per_batch, dim = 6, 5, 20, 8
        data = self.random_vectors(writers * batches * per_batch, dim, seed=4)
        failures: list[str] = []
        async with self.fresh_index(store, dim, "dot") as index:

            async def write(w: int) -> None:
                for b in range(batches):
                    start = (w * batches + b) * per_batch
                    ids = [f"w{w}-{start + j}" for j in range(per_batch)]
                    await store.upsert(index, ids, data[start : start + per_batch].tolist())

            async def read() -> None:
                for i in range(batches * 2):
                    hits = await store.query(index, data[i].tolist(), top_k=5)
                    scores = [h.score for h in hits]
                    if scores != sorted(scores, reverse=True):
                        failures.append(f"unordered results while writing: {scores}")
                    await store.count(index)

            async with anyio.create_task_group() as tg:
                for w in range(writers):
                    tg.start_soon(write, w)
                for _ in range(writers):
                    tg.start_soon(read)
            assert not failures, failures[0]
            total = writers * batches * per_batch
            assert await store.count(index) == total
            hits = await store.query(index, data[total - 1].tolist(), top_k=1)
            assert hits[0].id.endswith(f"-{total - 1}")

    # -- unicode and emptiness -------------------------------------------------

    async def test_unicode_ids_metadata_documents(self, vector_store: VectorStore) -> None:
        store = vector_store
        ids = ["ключ-1", "键/2", "🙂 smile", "naïve café"]
        meta: list[Mapping[str, Any]] = [
            {"langue": "français", "标签": ["猫", "狗"]},
            {"langue": "中文"},
            {"emoji": "🙂🙃"},
            {"langue": "ελληνικά", "n": 4},
        ]
        docs = ["Привет, мир", "你好 世界", "emoji 🙂 text", "Ünïcödé ✓"]
        async with self.fresh_index(store, 4, "cosine") as index:
            await store.upsert(index, ids, np.eye(4).tolist(), metadata=meta, documents=docs)
            hits = await store.query(index, [0.0, 1.0, 0.0, 0.0], top_k=4)
            assert hits[0].id == "键/2"
            by_id = {h.id: h for h in hits}
            assert set(by_id) == set(ids)
            for id_, m, d in zip(ids, meta, docs, strict=True):
                assert by_id[id_].metadata == m
                assert by_id[id_].document == d
            if "$eq" in store.supported_filter_operators:
                assert await self.filtered_ids(store, index, {"langue": "中文"}) == {"键/2"}
                assert await self.filtered_ids(store, index, {"标签": "狗"}) == {"ключ-1"}
            await store.delete(index, ids=["🙂 smile"])
            assert await store.count(index) == 3

    async def test_empty_results(self, vector_store: VectorStore) -> None:
        store = vector_store
        async with self.fresh_index(store, 4, "euclidean") as index:
            assert await store.query(index, [0.0, 0.0, 0.0, 1.0]) == []
            assert await store.count(index) == 0
            await store.delete(index, ids=["nobody"])
            await store.upsert(index, ["x"], [[0.0, 0.0, 0.0, 1.0]], metadata=[{"color": "red"}])
            if "$eq" in store.supported_filter_operators:
                assert await store.query(index, [0.0, 0.0, 0.0, 1.0], filter={"color": "blue"}) == []
                assert await store.count(index, filter={"color": "blue"}) == 0
            hits = await store.query(index, [0.0, 0.0, 0.0, 1.0], top_k=50)
            assert self.ids_of(hits) == ["x"]
            assert _close(hits[0].score, 0.0, self.score_tolerance)

    # -- bad input ---------------------------------------------------------------

    async def test_bad_input_is_rejected_and_writes_nothing(self, vector_store: VectorStore) -> None:
        store = vector_store
        async with self.fresh_index(store, 3, "cosine") as index:
            ok = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
            with pytest.raises(VectorInputError, match=r"vectors\[1\]"):
                await store.upsert(index, ["a", "b"], [[1.0, 0.0, 0.0], [1.0, 0.0]])
            with pytest.raises(VectorInputError):
                await store.upsert(index, ["a", "b", "c"], ok)
            with pytest.raises(VectorInputError):
                await store.upsert(index, ["a", "b"], ok, metadata=[{}])
            with pytest.raises(VectorInputError):
                await store.upsert(index, ["a", "b"], ok, documents=["only one"])
            with pytest.raises(VectorInputError, match=r"ids\[1\]"):
                await store.upsert(index, ["a", "a"], ok)
            nested: list[Any] = [{"k": {"nested": 1}}, {}]  # deliberately not flat
            with pytest.raises(VectorInputError, match=r"metadata\[0\]"):
                await store.upsert(index, ["a", "b"], ok, metadata=nested)
            null: list[Any] = [{}, {"k": None}]  # None is not a value: absent keys say "missing"
            with pytest.raises(VectorInputError, match=r"metadata\[1\]\.k"):
                await store.upsert(index, ["a", "b"], ok, metadata=null)
            with pytest.raises(VectorInputError):
                await store.upsert(index, ["a", "b"], [[1.0, 0.0, float("nan")], [0.0, 1.0, 0.0]])
            assert await store.count(index) == 0, "a rejected batch must write nothing"

            await store.upsert(index, ["a", "b"], ok)
            with pytest.raises(VectorInputError):
                await store.query(index, [1.0, 0.0])
            with pytest.raises(VectorInputError):
                await store.query(index, [1.0, 0.0, 0.0], top_k=0)
            with pytest.raises(VectorInputError, match="no_such_option"):
                await store.query(index, [1.0, 0.0, 0.0], options={"no_such_option": 1})

    async def test_unknown_index(self, vector_store: VectorStore) -> None:
        store = vector_store
        missing = f"kit-missing-{uuid.uuid4().hex[:8]}"
        with pytest.raises(IndexNotFoundError):
            await store.upsert(missing, ["a"], [[1.0]])
        with pytest.raises(IndexNotFoundError):
            await store.query(missing, [1.0])
        with pytest.raises(IndexNotFoundError):
            await store.count(missing)
        with pytest.raises(IndexNotFoundError):
            await store.delete(missing, ids=["a"])
        with pytest.raises(IndexNotFoundError):
            await store.delete(missing)  # the index is checked before the arguments
        with pytest.raises(IndexNotFoundError):
            await store.describe_index(missing)
