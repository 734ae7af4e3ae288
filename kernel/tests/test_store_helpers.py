"""The shared store helpers: each check, conversion and fallback against the contract it stands for."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import anyio
import pytest

from toolkernel.filters import matches, parse_filter
from toolkernel.store_helpers import (
    LazyResource,
    check_delete,
    check_filter,
    check_query,
    create_index_once,
    ids_to_delete,
    matching_ids,
    score_from_distance,
    search_matching,
)
from toolkernel.vectors import (
    IndexExistsError,
    IndexInfo,
    IndexNotFoundError,
    InvalidFilterError,
    UnsupportedFilterError,
    VectorInputError,
    VectorStoreError,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Named:
    name = "probe"
    supported_filter_operators = frozenset({"$eq", "$and"})


STORE = _Named()


def test_check_filter_parses_and_refuses_unclaimed_operators():
    assert check_filter(STORE, None) is None
    assert check_filter(STORE, {}) is None  # {} tests nothing
    assert check_filter(STORE, {"a": 1, "b": "x"}) == parse_filter({"a": 1, "b": "x"})
    with pytest.raises(UnsupportedFilterError, match=r"'probe' does not support the filter operator \$gt"):
        check_filter(STORE, {"a": {"$gt": 1}})
    with pytest.raises(InvalidFilterError, match=r"filter\.a"):
        check_filter(STORE, {"a": {"$gt": None}})


def test_check_query_checks_in_the_contract_order():
    args = check_query(STORE, 2, (1, 2), 3, {"a": 1}, {"ef": 4}, known=("ef",))
    assert args.vector == [1.0, 2.0]
    assert args.filter == parse_filter({"a": 1})
    assert args.options == {"ef": 4}
    # Every argument bad: the vector is reported first, then top_k, then options, then the filter.
    with pytest.raises(VectorInputError, match="vector: has dimension 3"):
        check_query(STORE, 2, [1, 2, 3], 0, {"a": {"$gt": 1}}, {"nope": 1})
    with pytest.raises(VectorInputError, match="top_k"):
        check_query(STORE, 2, [1, 2], 0, {"a": {"$gt": 1}}, {"nope": 1})
    with pytest.raises(VectorInputError, match=r"unknown query option\(s\) \['nope'\]"):
        check_query(STORE, 2, [1, 2], 1, {"a": {"$gt": 1}}, {"nope": 1})
    with pytest.raises(UnsupportedFilterError):
        check_query(STORE, 2, [1, 2], 1, {"a": {"$gt": 1}})
    assert check_query(STORE, 2, [1, 2], 1).filter is None


def test_check_delete():
    with pytest.raises(VectorInputError, match="pass ids, a filter or both"):
        check_delete(STORE, None, None)
    with pytest.raises(VectorInputError, match="single string"):
        check_delete(STORE, "abc", None)
    with pytest.raises(UnsupportedFilterError):
        check_delete(STORE, None, {"a": {"$ne": 1}})
    assert check_delete(STORE, None, {}) == (None, None)  # every record
    assert check_delete(STORE, [], None) == ([], None)  # nothing
    assert check_delete(STORE, ("a", "b"), {"a": 1}) == (["a", "b"], parse_filter({"a": 1}))


class _Backend:
    """Just enough of a store for create_index_once: indexes that another caller may create first."""

    def __init__(self) -> None:
        self.indexes: dict[str, tuple[int, str]] = {}
        self.creates = 0

    async def describe_index(self, name: str) -> IndexInfo:
        if name not in self.indexes:
            raise IndexNotFoundError(name)
        dimension, metric = self.indexes[name]
        return IndexInfo(name=name, dimension=dimension, metric=metric, count=0)  # type: ignore[arg-type]

    def creator(self, name: str, dimension: int, metric: str, *, racer: tuple[int, str] | None = None):
        async def create() -> None:
            self.creates += 1
            if racer is not None:  # another caller creates it between our describe and our create
                self.indexes[name] = racer
            if name in self.indexes:
                raise RuntimeError(f"backend: {name} exists")
            self.indexes[name] = (dimension, metric)

        return create


async def test_create_index_once_creates_compares_and_settles_races():
    backend = _Backend()
    await create_index_once(backend, "a", 3, "dot", backend.creator("a", 3, "dot"))
    assert backend.indexes == {"a": (3, "dot")}
    assert backend.creates == 1
    await create_index_once(backend, "a", 3, "dot", backend.creator("a", 3, "dot"))
    assert backend.creates == 1  # same settings: a no-op that does not call create
    with pytest.raises(IndexExistsError, match="dimension 3 and metric 'dot'"):
        await create_index_once(backend, "a", 4, "dot", backend.creator("a", 4, "dot"))
    with pytest.raises(VectorInputError, match="dimension must be a positive integer"):
        await create_index_once(backend, "b", 0, "dot", backend.creator("b", 0, "dot"))
    assert backend.creates == 1  # bad arguments never reach the backend

    # Lost races: the winner made the same index (fine) or another one (IndexExistsError).
    same = backend.creator("r1", 2, "cosine", racer=(2, "cosine"))
    await create_index_once(backend, "r1", 2, "cosine", same)
    other = backend.creator("r2", 2, "cosine", racer=(5, "dot"))
    with pytest.raises(IndexExistsError):
        await create_index_once(backend, "r2", 2, "cosine", other)


async def test_create_index_once_reraises_a_backend_failure():
    backend = _Backend()

    async def broken() -> None:
        raise ConnectionError("backend down")

    with pytest.raises(ConnectionError, match="backend down"):
        await create_index_once(backend, "a", 3, "dot", broken)


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_score_from_distance_matches_the_contract_for_each_backend_convention():
    rng = random.Random(7)
    for _ in range(50):
        a = [rng.uniform(-1, 1) for _ in range(5)]
        b = [rng.uniform(-1, 1) for _ in range(5)]
        cos = _dot(a, b) / math.sqrt(_dot(a, a) * _dot(b, b))
        l2 = math.dist(a, b)
        assert score_from_distance("cosine", 1 - cos) == pytest.approx(cos)
        assert score_from_distance("euclidean", l2**2) == pytest.approx(-l2)  # LanceDB, Chroma
        assert score_from_distance("euclidean", l2, squared_l2=False) == pytest.approx(-l2)  # pgvector
        assert score_from_distance("dot", 1 - _dot(a, b)) == pytest.approx(_dot(a, b))  # LanceDB, Chroma
        assert score_from_distance("dot", -_dot(a, b), negated_dot=True) == pytest.approx(_dot(a, b))
    assert score_from_distance("euclidean", -1e-9) == 0.0  # float noise below zero is an exact match


def _records(n: int) -> list[dict[str, Any]]:
    """Hits best first; only every tenth one has colour red."""
    return [
        {"id": f"r{i}", "score": -i, "metadata": {"colour": "red" if i % 10 == 9 else "blue"}, "vector": [i]}
        for i in range(n)
    ]


async def test_search_matching_fetches_more_until_top_k_match():
    records = _records(1000)
    asked: list[int] = []

    async def search(limit: int) -> list[dict[str, Any]]:
        asked.append(limit)
        return [{**r, "_distance": i} for i, r in enumerate(records[:limit])]  # extra keys are ignored

    where = parse_filter({"colour": "red"})
    got = await search_matching(search, 20, where)
    expected = [r for r in records if matches(where, r["metadata"])][:20]
    assert [hit.id for hit in got] == [r["id"] for r in expected]
    assert [hit.score for hit in got] == [r["score"] for r in expected]
    assert all(hit.vector is None and hit.document is None for hit in got)
    assert asked == [80, 320]  # 80 best hold only 8 red ones; 320 hold 32

    asked.clear()
    got = await search_matching(search, 5, None, include_vectors=True)
    assert [(hit.id, hit.vector) for hit in got] == [(r["id"], r["vector"]) for r in records[:5]]
    assert asked == [5]  # no filter: one search of top_k

    asked.clear()
    assert await search_matching(search, 5, parse_filter({"colour": "green"})) == []
    assert asked == [64, 256, 1024]  # stops once the search returns fewer than it was asked for


def test_matching_ids():
    records = _records(30)
    red = parse_filter({"colour": "red"})
    assert matching_ids(records, red) == ["r9", "r19", "r29"]
    assert matching_ids(records, red, ["r19", "r20", "missing"]) == ["r19"]
    assert matching_ids(records, None, ["r3", "missing"]) == ["r3"]
    assert len(matching_ids(records, None)) == 30
    assert matching_ids(records, None, []) == []


async def test_ids_to_delete_reads_records_only_for_a_filter():
    reads: list[int] = []

    async def records() -> list[dict[str, Any]]:
        reads.append(1)
        return _records(30)

    assert await ids_to_delete(STORE, ["r1", "nope"], None, records) == ["r1", "nope"]
    assert reads == []  # ids alone: nothing to read
    assert await ids_to_delete(STORE, None, {"colour": "red"}, records) == ["r9", "r19", "r29"]
    assert await ids_to_delete(STORE, ["r9", "r10"], {"colour": "red"}, records) == ["r9"]
    assert len(await ids_to_delete(STORE, None, {}, records)) == 30  # {}: every record
    assert await ids_to_delete(STORE, [], {"colour": "red"}, records) == []
    assert len(reads) == 3  # ids=[]: nothing to delete, nothing read
    with pytest.raises(VectorInputError, match="pass ids, a filter or both"):
        await ids_to_delete(STORE, None, None, records)
    with pytest.raises(UnsupportedFilterError):
        await ids_to_delete(STORE, None, {"colour": {"$ne": "red"}}, records)
    assert len(reads) == 3  # bad arguments are refused before anything is read


async def test_metadata_kept_as_json_text_is_decoded():
    """A store with a JSON metadata column hands rows over as they come from the backend."""
    rows = [{"id": r["id"], "score": r["score"], "metadata": json.dumps(r["metadata"])} for r in _records(30)]

    async def search(limit: int) -> list[dict[str, Any]]:
        return rows[:limit]

    red = parse_filter({"colour": "red"})
    assert matching_ids(rows, red) == ["r9", "r19", "r29"]
    got = await search_matching(search, 2, red)
    assert [(hit.id, hit.metadata) for hit in got] == [("r9", {"colour": "red"}), ("r19", {"colour": "red"})]
    assert (await search_matching(search, 1, None))[0].metadata == {"colour": "blue"}


async def test_lazy_resource_opens_once_and_closes():
    opened: list[object] = []
    closed: list[object] = []

    async def open_() -> object:
        await anyio.sleep(0.01)  # concurrent first callers all arrive while this one connects
        opened.append(object())
        return opened[-1]

    resource = LazyResource(open_, closed.append)
    got: list[object] = []

    async def use() -> None:
        got.append(await resource.get())

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(use)
    assert len(opened) == 1
    assert got == opened * 8
    await resource.aclose()
    assert closed == opened
    with pytest.raises(VectorStoreError, match="closed"):
        await resource.get()
    await resource.aclose()  # closing twice is harmless
    assert closed == opened


async def test_lazy_resource_awaits_an_async_close_and_bounds_opening():
    closed: list[str] = []

    async def close(value: str) -> None:
        await anyio.lowlevel.checkpoint()
        closed.append(value)

    async def open_() -> str:
        return "conn"

    resource = LazyResource(open_, close)
    await resource.aclose()  # never opened: nothing to close
    assert closed == []
    resource = LazyResource(open_, close)
    assert await resource.get() == "conn"
    await resource.aclose()
    assert closed == ["conn"]

    async def hang() -> str:
        await anyio.sleep(60)
        return "never"

    slow = LazyResource(hang, timeout=0.05)
    with pytest.raises(TimeoutError):
        await slow.get()
