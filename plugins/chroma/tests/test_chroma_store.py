"""The Chroma store against a real ``chroma run`` server and an embedded database: the kit plus specifics."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolkernel.errors import ConfigError
from toolkernel.filters import matches
from toolkernel.testing.services import ChromaService, ServiceStartError, chroma_server, free_port
from toolkernel.testing.stores import VectorStoreContract
from toolkernel.vectors import IndexNotFoundError, UnsupportedFilterError, VectorInputError, VectorStoreError
from toolkernel_chroma import create_store
from toolkernel_chroma.store import ChromaStore


class TestChromaServerConformance(VectorStoreContract):
    """The HTTP client against the server started by the ``chroma`` fixture."""

    string_ranges = False  # range filters with string operands raise UnsupportedFilterError
    mixed_type_lists = False  # Chroma lists hold one type; others raise VectorInputError
    # The server's HNSW searches with Chroma's default ef of 10 and builds on several threads, so
    # which neighbour of 300 it misses varies from run to run: one miss in 200 hits was seen once.
    min_recall = 0.99

    @pytest.fixture
    async def vector_store(self, chroma: ChromaService) -> AsyncIterator[ChromaStore]:
        store = create_store(host=chroma.host, port=chroma.port)
        yield store
        await store.aclose()


@pytest.fixture(scope="class")
def database_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One database directory per test class (a class-scoped fixture outside the class, as pytest wants)."""
    return tmp_path_factory.mktemp("chroma-embedded")


class TestChromaPersistentConformance(VectorStoreContract):
    """The embedded persistent client, one database directory for the whole class."""

    string_ranges = False  # range filters with string operands raise UnsupportedFilterError
    mixed_type_lists = False  # Chroma lists hold one type; others raise VectorInputError

    @pytest.fixture
    async def vector_store(self, database_dir: Path) -> AsyncIterator[ChromaStore]:
        store = create_store(path=str(database_dir))
        yield store
        await store.aclose()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ChromaStore]:
    """An embedded store in a fresh directory (the specific behaviours are the same over HTTP)."""
    store = create_store(path=str(tmp_path / "db"))
    yield store
    await store.aclose()


def _raw_client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


@pytest.mark.anyio
async def test_where_document_option(store: ChromaStore) -> None:
    await store.create_index("docs", 2, "cosine")
    await store.upsert(
        "docs",
        ["a", "b", "c"],
        [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]],
        documents=["red apple", "green pear", None],
    )
    hits = await store.query("docs", [1.0, 0.0], options={"where_document": {"$contains": "pear"}})
    assert [h.id for h in hits] == ["b"]
    hits = await store.query("docs", [1.0, 0.0], options={"where_document": {"$regex": "^red"}})
    assert [h.id for h in hits] == ["a"]
    both = {"where_document": {"$contains": "a"}}
    hits = await store.query("docs", [1.0, 0.0], filter={"k": {"$ne": 1}}, options=both)
    assert sorted(h.id for h in hits) == ["a", "b"]
    with pytest.raises(VectorInputError, match="where_document"):
        await store.query("docs", [1.0, 0.0], options={"where_document": "pear"})


@pytest.mark.anyio
async def test_string_ranges_are_refused_numbers_work_on_lists(store: ChromaStore) -> None:
    await store.create_index("ranges", 2, "euclidean")
    meta: list[dict[str, Any]] = [{"n": [1, 5]}, {"n": [2.5, 3.0]}, {"n": 4}, {"name": "x"}]
    await store.upsert("ranges", ["a", "b", "c", "d"], [[0.0, 1.0]] * 4, metadata=meta)
    records = dict(zip("abcd", meta, strict=True))
    for flt in ({"n": {"$gt": 4}}, {"n": {"$gte": 4}}, {"n": {"$lt": 2}}, {"n": {"$lte": 2.5}}):
        expected = {rid for rid, m in records.items() if matches(flt, m)}
        assert {h.id for h in await store.query("ranges", [0.0, 1.0], filter=flt)} == expected, flt
    with pytest.raises(UnsupportedFilterError, match="numbers only"):
        await store.count("ranges", filter={"name": {"$gt": "a"}})
    # Hidden bound keys never show in results, and user keys may not use their prefix.
    hits = await store.query("ranges", [0.0, 1.0], top_k=4)
    assert {h.id: h.metadata for h in hits} == records
    with pytest.raises(VectorInputError, match="reserved"):
        await store.upsert("ranges", ["e"], [[0.0, 1.0]], metadata=[{"toolkernel:max:n": 1}])
    with pytest.raises(UnsupportedFilterError, match="reserved"):
        await store.count("ranges", filter={"toolkernel:max:n": 5})


@pytest.mark.anyio
async def test_list_metadata_must_share_one_type(store: ChromaStore) -> None:
    await store.create_index("lists", 2, "dot")
    with pytest.raises(VectorInputError, match=r"metadata\[1\]\.mixed"):
        await store.upsert("lists", ["a", "b"], [[1.0, 0.0], [0.0, 1.0]], metadata=[{}, {"mixed": [1, "a"]}])
    assert await store.count("lists") == 0
    await store.upsert("lists", ["a"], [[1.0, 0.0]], metadata=[{"nums": [1, 2.5]}])
    hits = await store.query("lists", [1.0, 0.0])
    assert hits[0].metadata == {"nums": [1.0, 2.5]}
    assert await store.count("lists", filter={"nums": 1}) == 1


@pytest.mark.anyio
async def test_names_chroma_rejects_are_encoded(store: ChromaStore, tmp_path: Path) -> None:
    names = ["a", "ab_", "tkx-6162", "Z-9"]
    for i, name in enumerate(names):
        await store.create_index(name, i + 1, "cosine")
    assert await store.list_indexes() == sorted(names)
    for i, name in enumerate(names):
        assert (await store.describe_index(name)).dimension == i + 1
    collections = {c.name for c in _raw_client(tmp_path / "db").list_collections()}
    assert "a" not in collections
    assert "tkx-6162" not in collections
    assert "Z-9" in collections


@pytest.mark.anyio
async def test_foreign_collections_are_not_indexes(store: ChromaStore, tmp_path: Path) -> None:
    await store.create_index("mine", 2, "cosine")
    _raw_client(tmp_path / "db").create_collection("theirs", embedding_function=None)
    assert await store.list_indexes() == ["mine"]
    with pytest.raises(IndexNotFoundError):
        await store.describe_index("theirs")


@pytest.mark.anyio
async def test_dropped_index_leaves_no_list_metadata_behind(store: ChromaStore) -> None:
    await store.create_index("first", 2, "cosine")
    await store.upsert("first", ["x"], [[1.0, 0.0]], metadata=[{"tags": ["a", "b"]}])
    await store.delete_index("first")
    await store.create_index("second", 2, "cosine")
    await store.upsert("second", ["y"], [[1.0, 0.0]], metadata=[{"k": 1}])
    assert (await store.query("second", [1.0, 0.0]))[0].metadata == {"k": 1}


@pytest.mark.anyio
async def test_hnsw_options_and_metric_reach_the_collection(tmp_path: Path) -> None:
    store = create_store(path=str(tmp_path / "db"), hnsw_m=8, hnsw_construction_ef=50, hnsw_search_ef=60)
    try:
        await store.create_index("tuned", 2, "dot")
        collection = _raw_client(tmp_path / "db").get_collection("tuned", embedding_function=None)
        hnsw = collection.configuration_json["hnsw"]
        assert (hnsw["space"], hnsw["max_neighbors"], hnsw["ef_construction"], hnsw["ef_search"]) == (
            "ip",
            8,
            50,
            60,
        )
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_embedded_data_survives_reopening(tmp_path: Path) -> None:
    first = create_store(path=str(tmp_path / "db"))
    await first.create_index("kept", 2, "cosine")
    await first.upsert("kept", ["a"], [[1.0, 0.0]], metadata=[{"k": "v"}], documents=["text"])
    await first.aclose()
    second = create_store(path=str(tmp_path / "db"))
    try:
        hits = await second.query("kept", [1.0, 0.0])
        assert [(h.id, h.metadata, h.document) for h in hits] == [("a", {"k": "v"}, "text")]
    finally:
        await second.aclose()


def test_options_need_exactly_one_of_host_and_path() -> None:
    with pytest.raises(ConfigError, match="either host"):
        create_store()
    with pytest.raises(ConfigError, match="either host"):
        create_store(host="localhost", path="/tmp/x")
    with pytest.raises(ConfigError, match="unknown_option"):
        create_store(path="/tmp/x", unknown_option=1)


@pytest.mark.anyio
async def test_unreachable_server_says_where() -> None:
    store = create_store(host="127.0.0.1", port=free_port())
    with pytest.raises(VectorStoreError, match=r"cannot reach Chroma at 127\.0\.0\.1"):
        await store.list_indexes()
    await store.aclose()


def test_plugin_registers_the_store_without_importing_chromadb() -> None:
    code = (
        "import sys, toolkernel_chroma.plugin as p\n"
        "from toolkernel.registries import VectorStoreRegistry\n"
        "r = VectorStoreRegistry(); p.register_vector_stores(registry=r)\n"
        "assert 'chroma' in r, list(r)\n"
        "assert 'chromadb' not in sys.modules, 'chromadb was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_server_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        failed = pytest.raises(ServiceStartError, match=r"(?s)chroma run exited with code .*log tail:\n.+")
        with failed, chroma_server(tmp_path, port=port, timeout=60):
            pytest.fail("chroma run started on a port that is taken")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["server", "embedded"])
async def test_query_survives_another_client_dropping_and_recreating_the_index(
    mode: str, chroma: ChromaService, tmp_path: Path
) -> None:
    """Queries and counts reuse the collection handle; a stale one is looked up again, never trusted."""
    options: dict[str, Any] = (
        {"host": chroma.host, "port": chroma.port} if mode == "server" else {"path": str(tmp_path / "db")}
    )
    reader, writer = create_store(**options), create_store(**options)  # writer stands for another client
    try:
        await writer.create_index("stale", 3, "cosine")
        await writer.upsert("stale", ["a"], [[1.0, 0.0, 0.0]])
        assert [h.id for h in await reader.query("stale", [1.0, 0.0, 0.0], top_k=1)] == ["a"]
        assert await reader.count("stale") == 1
        await writer.delete_index("stale")
        with pytest.raises(IndexNotFoundError):
            await reader.query("stale", [1.0, 0.0, 0.0])
        await writer.create_index("stale", 2, "euclidean")
        await writer.upsert("stale", ["b", "c"], [[0.0, 0.0], [3.0, 4.0]])
        assert await reader.count("stale") == 2
        with pytest.raises(VectorInputError, match="expects 2"):
            await reader.query("stale", [1.0, 0.0, 0.0])
        hits = await reader.query("stale", [0.0, 0.0], top_k=2)
        assert [(h.id, round(h.score, 3)) for h in hits] == [("b", 0.0), ("c", -5.0)]
    finally:
        await writer.delete_index("stale")
        await reader.aclose()
        await writer.aclose()


def test_the_kernel_builds_the_store_from_its_settings(tmp_path: Path) -> None:
    from toolkernel import ConfigError, Kernel
    from toolkernel_chroma import plugin

    config = tmp_path / "toolkernel.toml"
    config.write_text(f'[plugins.chroma]\npath = "{tmp_path / "db"}"\nhnsw_m = 8\n')
    kernel = Kernel.from_config(config, load_entry_points=False, plugins=[plugin])
    store = kernel.vector_store("chroma")
    assert isinstance(store, ChromaStore)
    assert (store.options.path, store.options.hnsw_m) == (str(tmp_path / "db"), 8)
    assert kernel.vector_store("chroma", hnsw_m=16).options.hnsw_m == 16  # call options win
    with pytest.raises(ConfigError, match=r"\[plugins\.chroma\]: Value error, give either host"):
        kernel.vector_store("chroma", host="localhost")
