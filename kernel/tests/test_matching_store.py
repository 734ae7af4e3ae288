"""MatchingStore: a store of backend primitives meets the contract; the backend sees only real work."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from toolkernel.matching_store import MatchingStore, OpenIndex
from toolkernel.testing.stores import VectorStoreContract
from toolkernel.vectors import IndexNotFoundError, Metric, UpsertBatch, VectorStoreError

# Records keep their metadata as JSON text, as a backend with a fixed schema would.
Rows = dict[str, tuple[list[float], str, str | None]]


class JsonRowsStore(MatchingStore[dict[str, OpenIndex[Rows]], Rows]):
    """Exact search over a dict per index; every call to a primitive is logged in ``calls``."""

    name = "json-rows"

    def __init__(self) -> None:
        super().__init__(timeout=5)
        self.calls: list[str] = []

    async def connect(self) -> dict[str, OpenIndex[Rows]]:
        self.calls.append("connect")
        await anyio.sleep(0.01)  # a slow connect, so concurrent first calls overlap
        return {}

    async def disconnect(self, connection: dict[str, OpenIndex[Rows]]) -> None:
        self.calls.append(f"disconnect {len(connection)}")

    async def open_index(self, name: str) -> OpenIndex[Rows]:
        indexes = await self.connection()
        if name not in indexes:
            raise IndexNotFoundError(name)
        return indexes[name]

    async def make_index(self, name: str, dimension: int, metric: Metric) -> None:
        indexes = await self.connection()
        if name in indexes:
            raise FileExistsError(name)
        indexes[name] = OpenIndex({}, dimension, metric)

    async def index_names(self) -> Iterable[str]:
        return list(await self.connection())

    async def drop_index(self, name: str) -> None:
        del (await self.connection())[name]

    async def write(self, index: OpenIndex[Rows], batch: UpsertBatch) -> None:
        self.calls.append("write")
        for id_, vector, meta, doc in zip(*batch, strict=True):
            index.handle[id_] = (vector, json.dumps(meta), doc)

    async def nearest(
        self, index: OpenIndex[Rows], vector: list[float], limit: int
    ) -> Sequence[Mapping[str, Any]]:
        self.calls.append(f"nearest {limit}")
        hits = [
            {"id": i, "score": score(index.metric, vector, v), "metadata": m, "document": d, "vector": v}
            for i, (v, m, d) in index.handle.items()
        ]
        return sorted(hits, key=lambda hit: hit["score"], reverse=True)[:limit]

    async def records(self, index: OpenIndex[Rows]) -> Iterable[Mapping[str, Any]]:
        self.calls.append("records")
        return [{"id": id_, "metadata": meta} for id_, (_, meta, _) in index.handle.items()]

    async def remove(self, index: OpenIndex[Rows], ids: list[str]) -> None:
        self.calls.append(f"remove {sorted(ids)}")
        for id_ in ids:
            index.handle.pop(id_, None)

    async def size(self, index: OpenIndex[Rows]) -> int:
        self.calls.append("size")
        return len(index.handle)


def score(metric: str, a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if metric == "dot":
        return dot
    if metric == "euclidean":
        return -math.dist(a, b)
    return dot / ((math.hypot(*a) * math.hypot(*b)) or 1.0)


class TestJsonRowsStore(VectorStoreContract):
    batch_size = 2_000  # pure-Python scoring: keeps the kernel suite fast

    @pytest.fixture
    async def vector_store(self) -> AsyncIterator[JsonRowsStore]:
        store = JsonRowsStore()
        yield store
        await store.aclose()


def test_a_store_missing_backend_methods_cannot_be_built() -> None:
    class OnlyConnects(MatchingStore[None, None]):
        name = "half"

        async def connect(self) -> None:
            return None

    # The error names every method still to write, not only the first.
    with pytest.raises(TypeError, match=r"abstract methods.*drop_index.*nearest.*write"):
        OnlyConnects()  # type: ignore[abstract]


@pytest.mark.anyio
async def test_connects_once_for_racing_first_calls_and_disconnects_on_aclose() -> None:
    store = JsonRowsStore()
    assert store.calls == []  # building the store does no I/O
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(store.list_indexes)
    await store.create_index("a", 2)
    await store.aclose()
    await store.aclose()
    assert store.calls == ["connect", "disconnect 1"]
    with pytest.raises(VectorStoreError, match="closed"):
        await store.list_indexes()


@pytest.mark.anyio
async def test_the_backend_is_asked_only_for_work_to_do() -> None:
    store = JsonRowsStore()
    await store.create_index("a", 2)
    store.calls.clear()
    await store.upsert("a", [], [])
    assert store.calls == []  # an empty batch writes nothing
    await store.upsert("a", ["x", "y"], [[1, 0], [0, 1]], [{"k": 1}, {"k": 2}])
    assert await store.count("a") == 2
    assert store.calls == ["write", "size"]  # no filter: counted by the backend, no records read
    store.calls.clear()
    await store.delete("a", ids=["y", "gone"])
    await store.delete("a", filter={"k": 5})
    await store.delete("a", ids=[])
    assert store.calls == ["remove ['gone', 'y']", "records"]  # ids alone: no records read
    store.calls.clear()
    assert [hit.id for hit in await store.query("a", [1, 0], top_k=1)] == ["x"]
    assert store.calls == ["nearest 1"]  # no filter: one search of top_k
