"""The Qdrant store passes the vector store contract embedded (Edge) and in qdrant-client's local mode."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import numpy as np
import pluggy
import pytest

import toolkernel.hookspecs
from toolkernel.errors import ConfigError
from toolkernel.registries import VectorStoreRegistry
from toolkernel.testing.stores import VectorStoreContract
from toolkernel.vectors import IndexExistsError, UnsupportedFilterError, VectorInputError, VectorStore
from toolkernel_qdrant import QdrantSettings, create_store
from toolkernel_qdrant import plugin as qdrant_plugin
from toolkernel_qdrant._base import _ID_NAMESPACE, point_id
from toolkernel_qdrant.client_store import QdrantClientStore
from toolkernel_qdrant.edge_store import QdrantEdgeStore
from toolkernel_qdrant.settings import store_from_settings


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class TestQdrantEdgeStore(VectorStoreContract):
    string_ranges = False  # range filters with string operands raise UnsupportedFilterError

    @pytest.fixture
    async def vector_store(self) -> AsyncIterator[VectorStore]:
        store = create_store()
        yield store
        await store.aclose()


class TestQdrantEdgeStoreOnDisk(VectorStoreContract):
    string_ranges = False  # range filters with string operands raise UnsupportedFilterError

    @pytest.fixture
    async def vector_store(self, tmp_path: Path) -> AsyncIterator[VectorStore]:
        store = create_store(path=tmp_path / "qdrant")
        yield store
        await store.aclose()


class TestQdrantLocalStore(VectorStoreContract):
    string_ranges = False  # range filters with string operands raise UnsupportedFilterError

    @pytest.fixture
    async def vector_store(self) -> AsyncIterator[VectorStore]:
        store = create_store(mode="local")
        yield store
        await store.aclose()


def test_plugin_registers_the_store() -> None:
    pm = pluggy.PluginManager("toolkernel")
    pm.add_hookspecs(toolkernel.hookspecs)
    pm.register(qdrant_plugin)
    registry = VectorStoreRegistry()
    pm.hook.register_vector_stores(registry=registry)
    assert registry.get("qdrant") is store_from_settings
    assert registry.settings_of("qdrant") == "qdrant"


def test_modes_resolve_from_settings(tmp_path: Path) -> None:
    assert QdrantSettings().resolved_mode == "edge"
    assert QdrantSettings(url="http://localhost:6333").resolved_mode == "server"
    assert QdrantSettings(mode="local", path=tmp_path).resolved_mode == "local"
    assert isinstance(create_store(url="https://example.cloud.qdrant.io", api_key="k"), QdrantClientStore)
    assert isinstance(create_store(path=tmp_path), QdrantEdgeStore)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": "http://x:6333", "path": "/tmp/q"}, "path applies to the embedded modes only"),
        ({"mode": "edge", "url": "http://x:6333"}, "url and api_key apply to mode 'server'"),
        ({"mode": "server"}, "mode 'server' needs a url"),
        ({"collection_prefix": "a/b"}, "collection_prefix"),
        ({"tiemout": 3}, "tiemout"),
    ],
)
def test_bad_settings_name_the_field(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="vector store 'qdrant'") as caught:
        create_store(**options)
    assert message in str(caught.value)


@pytest.mark.anyio
async def test_edge_data_survives_a_restart(tmp_path: Path) -> None:
    store = create_store(path=tmp_path)
    await store.create_index("docs", 3, "dot")
    await store.upsert("docs", ["a", "b"], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], metadata=[{"k": 1}, {"k": 2}])
    await store.aclose()
    reopened = create_store(path=tmp_path)
    try:
        assert await reopened.list_indexes() == ["docs"]
        info = await reopened.describe_index("docs")
        assert (info.dimension, info.metric, info.count) == (3, "dot", 2)
        hits = await reopened.query("docs", [0.0, 1.0, 0.0], top_k=1)
        assert (hits[0].id, hits[0].metadata) == ("b", {"k": 2})
    finally:
        await reopened.aclose()


def _resident_kib_under(directory: Path) -> int:
    """KiB of this process's resident pages mapped from files under ``directory`` (``/proc/self/smaps``)."""
    prefix, total, inside = str(directory.resolve()) + "/", 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and fields[0][0] in "0123456789abcdef":
                inside = len(fields) >= 6 and fields[5].startswith(prefix)
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.anyio
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
async def test_an_edge_writer_keeps_none_of_the_shards_pages_resident(tmp_path: Path) -> None:
    # 4,000 points of 256 dimensions are 4 MB of vectors in Edge's memory-mapped segment; each
    # write's pages used to stay resident in the writer (about 1.7 KB a point).
    rng = np.random.default_rng(3)
    vectors = rng.random((4000, 256), dtype=np.float32)
    store = create_store(path=tmp_path)
    try:
        await store.create_index("docs", 256, "cosine")
        for first in range(0, 4000, 500):
            ids = [f"p{i}" for i in range(first, first + 500)]
            meta = [{"n": i, "path": f"d/note-{i}.md"} for i in range(first, first + 500)]
            await store.upsert("docs", ids, vectors[first : first + 500].tolist(), metadata=meta)
        await store.delete("docs", ids=["p0"])
        assert _resident_kib_under(tmp_path) < 1024
        # The released pages come back on use, with the data they held.
        hits = await store.query("docs", vectors[1234].tolist(), top_k=3)
        assert hits[0].id == "p1234"
        assert hits[0].metadata == {"n": 1234, "path": "d/note-1234.md"}
        assert (await store.describe_index("docs")).count == 3999
    finally:
        await store.aclose()
    reopened = create_store(path=tmp_path)
    try:
        hits = await reopened.query("docs", vectors[3999].tolist(), top_k=1)
        assert hits[0].id == "p3999"
        assert (await reopened.describe_index("docs")).count == 3999
    finally:
        await reopened.aclose()


_HOLDER = """
import sys, time, anyio
from toolkernel_qdrant import create_store

async def main():
    store = create_store(path=sys.argv[1])
    await store.query("docs", [1.0, 0.0, 0.0], top_k=1)
    print("holding", flush=True)
    time.sleep(60)

anyio.run(main)
"""


@pytest.mark.anyio
async def test_a_shard_held_by_another_process_is_a_clear_error(tmp_path: Path) -> None:
    import sys

    from toolkernel.vectors import VectorStoreError

    store = create_store(path=tmp_path)
    await store.create_index("docs", 3, "dot")
    await store.upsert("docs", ["a"], [[1.0, 0.0, 0.0]])
    await store.aclose()
    async with await anyio.open_process([sys.executable, "-c", _HOLDER, str(tmp_path)]) as holder:
        try:
            assert holder.stdout is not None
            with anyio.fail_after(60):
                line = await holder.stdout.receive()
            assert line.strip() == b"holding"
            second = create_store(path=tmp_path)
            with pytest.raises(VectorStoreError, match="in use by another process"):
                await second.query("docs", [1.0, 0.0, 0.0], top_k=1)
            await second.aclose()
        finally:
            holder.kill()


@pytest.mark.anyio
async def test_collection_prefix_isolates_indexes(tmp_path: Path) -> None:
    mine = create_store(path=tmp_path, collection_prefix="tk_")
    await mine.create_index("docs", 2)
    await mine.aclose()
    other = create_store(path=tmp_path)
    try:
        assert await other.list_indexes() == ["tk_docs"]
    finally:
        await other.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("flt", "operator", "detail"),
    [
        ({"name": {"$regex": "^a"}}, "$regex", "filter operator"),
        ({"name": {"$gt": "m"}}, "$gt", "numbers only"),
        ({"a.b": 1}, "$eq", "as a path"),
    ],
)
async def test_untranslatable_filters_are_refused(flt: dict[str, object], operator: str, detail: str) -> None:
    store = create_store()
    try:
        await store.create_index("f", 2)
        with pytest.raises(UnsupportedFilterError, match=detail) as caught:
            await store.query("f", [1.0, 0.0], filter=flt)
        assert (caught.value.store, caught.value.operator) == ("qdrant", operator)
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_query_options() -> None:
    store = create_store()
    try:
        await store.create_index("o", 2)
        await store.upsert("o", ["a"], [[1.0, 0.0]])
        hits = await store.query("o", [1.0, 0.0], options={"hnsw_ef": 256, "exact": True})
        assert [h.id for h in hits] == ["a"]
        with pytest.raises(VectorInputError, match="hnsw_ef"):
            await store.query("o", [1.0, 0.0], options={"hnsw_ef": "wide"})
        with pytest.raises(VectorInputError, match="exact"):
            await store.query("o", [1.0, 0.0], options={"exact": "yes"})
    finally:
        await store.aclose()


def test_point_ids_are_uuid5_of_the_record_id() -> None:
    for record_id in ["a", "ключ-1", "🙂 smile", "x" * 1000]:
        assert point_id(record_id) == str(uuid.uuid5(_ID_NAMESPACE, record_id))


@pytest.mark.anyio
async def test_edge_booleans_and_marker_strings_round_trip() -> None:
    store = create_store()
    try:
        await store.create_index("b", 2)
        meta = [{"flag": True, "s": "\x1fT"}, {"flag": False, "s": "\x1f\x1fx"}]
        await store.upsert("b", ["t", "f"], [[1.0, 0.0], [0.0, 1.0]], metadata=meta)
        hits = {h.id: h.metadata for h in await store.query("b", [1.0, 0.0])}
        assert hits == {"t": meta[0], "f": meta[1]}
        assert await store.count("b", filter={"flag": True}) == 1
        assert await store.count("b", filter={"s": "\x1fT"}) == 1
        assert await store.count("b", filter={"flag": {"$in": [False, "\x1fT"]}}) == 1
    finally:
        await store.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["edge", "local"])
async def test_racing_create_index_keeps_one_setting(mode: str) -> None:
    store = create_store(mode=mode)
    outcomes: list[str] = []

    async def create(dimension: int) -> None:
        try:
            await store.create_index("race", dimension)
            outcomes.append(f"created {dimension}")
        except IndexExistsError:
            outcomes.append("refused")

    try:
        async with anyio.create_task_group() as tg:
            for dimension in (3, 4, 3, 4):
                tg.start_soon(create, dimension)
        info = await store.describe_index("race")
        assert sorted(outcomes) == sorted([f"created {info.dimension}"] * 2 + ["refused"] * 2)
    finally:
        await store.aclose()


def test_the_kernel_builds_the_store_from_its_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLKERNEL_QDRANT_URL", raising=False)
    config = tmp_path / "toolkernel.toml"
    config.write_text('[plugins.qdrant]\nmode = "local"\ncollection_prefix = "kb_"\n')
    kernel = toolkernel.Kernel.from_config(config, load_entry_points=False, plugins=[qdrant_plugin])
    store = kernel.vector_store("qdrant")
    assert isinstance(store, QdrantClientStore)
    assert isinstance(kernel.vector_store("qdrant", mode="edge"), QdrantEdgeStore)  # call options win
    with pytest.raises(
        toolkernel.ConfigError, match=r"\[plugins\.qdrant\]: Value error, mode 'server' needs a url"
    ):
        kernel.vector_store("qdrant", mode="server")
