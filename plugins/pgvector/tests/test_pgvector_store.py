"""The pgvector store against a real Postgres: the kernel's conformance kit plus pgvector specifics."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import psycopg
import pytest

from toolkernel.errors import ConfigError
from toolkernel.testing.services import PostgresService
from toolkernel.testing.stores import VectorStoreContract
from toolkernel.vectors import IndexNotFoundError, VectorInputError, VectorStoreError
from toolkernel_pgvector import create_store
from toolkernel_pgvector import store as store_module
from toolkernel_pgvector.store import PgVectorStore


class TestPgVectorConformance(VectorStoreContract):
    """HNSW (the default index type) must meet the kit exactly: ef_search is sized to top_k."""

    @pytest.fixture
    async def vector_store(self, postgres: PostgresService) -> AsyncIterator[PgVectorStore]:
        store = create_store(dsn=postgres.uri, schema="kit")
        yield store
        await store.aclose()


class TestIvfflatConformance(VectorStoreContract):
    """The IVFFlat code path (iterative scan, re-sorting, filters) probing every list, so search is exact."""

    @pytest.fixture
    async def vector_store(self, postgres: PostgresService) -> AsyncIterator[PgVectorStore]:
        store = create_store(
            dsn=postgres.uri, schema="kit_ivfflat", index_type="ivfflat", ivfflat_lists=4, ivfflat_probes=4
        )
        yield store
        await store.aclose()

    # One 10k batch per plugin is enough to time bulk loading; the HNSW class runs it.
    batch_size = 2_000


DIM = 8


def _vectors(n: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, DIM)).astype(np.float32).tolist()


@pytest.fixture
async def hnsw_store(postgres: PostgresService) -> AsyncIterator[PgVectorStore]:
    store = create_store(dsn=postgres.uri, schema="specific")
    yield store
    await store.aclose()


async def _index_defs(postgres: PostgresService, schema: str) -> list[str]:
    """The CREATE INDEX statements of ``schema``'s tables, to see which ANN index a store built."""
    async with await psycopg.AsyncConnection.connect(postgres.uri) as conn:
        cur = await conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = %s", [schema])
        return [row[0] for row in await cur.fetchall()]


@pytest.mark.anyio
@pytest.mark.parametrize(("index_type", "using"), [("hnsw", "USING hnsw"), ("ivfflat", "USING ivfflat")])
async def test_index_type_builds_that_ann_index(
    postgres: PostgresService, index_type: str, using: str
) -> None:
    schema = f"types_{index_type}"
    store = create_store(dsn=postgres.uri, schema=schema, index_type=index_type, hnsw_m=8, ivfflat_lists=2)
    try:
        await store.create_index("docs", DIM, "cosine")
        defs = await _index_defs(postgres, schema)
        assert any(using in d and "vector_cosine_ops" in d for d in defs), "\n".join(defs)
        # A bulk load into the empty index rebuilds the ANN index after the rows are in.
        data = _vectors(1_000, seed=1)
        await store.upsert("docs", [f"d{i}" for i in range(1_000)], data)
        assert any(using in d for d in await _index_defs(postgres, schema))
        hits = await store.query("docs", data[10], top_k=1)
        assert hits[0].id == "d10"
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_exact_index_type_builds_no_ann_index(postgres: PostgresService) -> None:
    store = create_store(dsn=postgres.uri, schema="types_exact", index_type="exact")
    try:
        await store.create_index("docs", DIM, "dot")
        defs = await _index_defs(postgres, "types_exact")
        assert not any("hnsw" in d or "ivfflat" in d for d in defs), defs
        await store.upsert("docs", ["a", "b"], _vectors(2, seed=2))
        assert len(await store.query("docs", _vectors(1, seed=3)[0], top_k=5)) == 2
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_query_options_ef_probes_min_score(hnsw_store: PgVectorStore) -> None:
    store = hnsw_store
    await store.create_index("opts", DIM, "cosine")
    try:
        data = _vectors(200, seed=4)
        await store.upsert("opts", [f"o{i}" for i in range(200)], data)
        plain = await store.query("opts", data[0], top_k=20)
        wide = await store.query("opts", data[0], top_k=20, options={"ef": 400})
        assert wide[0].id == "o0"
        assert len(plain) == len(wide) == 20
        # min_score keeps only hits at least that good; the query vector itself scores 1.
        strict = await store.query("opts", data[0], top_k=20, options={"min_score": 0.999})
        assert [h.id for h in strict] == ["o0"]
        assert all(
            h.score >= 0.5 for h in await store.query("opts", data[0], top_k=20, options={"min_score": 0.5})
        )
        # probes is accepted on any index type (it only affects IVFFlat tables).
        assert len(await store.query("opts", data[0], top_k=3, options={"probes": 3})) == 3
        for bad in ({"ef": 0}, {"ef": 1001}, {"ef": "40"}, {"probes": True}, {"min_score": float("nan")}):
            with pytest.raises(VectorInputError):
                await store.query("opts", data[0], options=bad)
    finally:
        await store.delete_index("opts")


@pytest.mark.anyio
async def test_ivfflat_probes_trade_recall(postgres: PostgresService) -> None:
    store = create_store(dsn=postgres.uri, schema="probes", index_type="ivfflat", ivfflat_lists=20)
    try:
        await store.create_index("p", DIM, "euclidean")
        data = _vectors(2_000, seed=5)
        await store.upsert("p", [f"p{i}" for i in range(2_000)], data)
        queries = _vectors(20, seed=6)

        async def found(probes: int) -> int:
            total = 0
            for q in queries:
                total += len(await store.query("p", q, top_k=10, options={"probes": probes}))
            return total

        # Probing every list is exact: the 10 nearest come back for every query.
        all_lists = [h.id for h in await store.query("p", queries[0], top_k=10, options={"probes": 20})]
        exact = np.argsort(np.linalg.norm(np.asarray(data) - np.asarray(queries[0]), axis=1))[:10]
        assert all_lists == [f"p{i}" for i in exact]
        assert await found(20) == 200
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_reindex_relearns_ivfflat_lists_from_the_data(postgres: PostgresService) -> None:
    store = create_store(dsn=postgres.uri, schema="reindex", index_type="ivfflat", ivfflat_lists=10)
    try:
        await store.create_index("grown", DIM, "cosine")
        data = _vectors(500, seed=9)
        for start in range(0, 500, 100):  # small batches: the lists stay those learned from an empty table
            await store.upsert(
                "grown", [f"g{i}" for i in range(start, start + 100)], data[start : start + 100]
            )
        await store.reindex("grown")
        assert any("USING ivfflat" in d for d in await _index_defs(postgres, "reindex"))
        hits = await store.query("grown", data[123], top_k=1)
        assert hits[0].id == "g123"
        with pytest.raises(IndexNotFoundError):
            await store.reindex("missing")
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_tenant_schemas_are_isolated(postgres: PostgresService) -> None:
    alice = create_store(dsn=postgres.uri, schema="tenant_alice")
    bob = create_store(dsn=postgres.uri, schema="tenant_bob")
    try:
        await alice.create_index("shared-name", DIM, "cosine")
        await bob.create_index("shared-name", 4, "dot")
        await alice.upsert("shared-name", ["a1"], _vectors(1, seed=7), metadata=[{"owner": "alice"}])
        assert await bob.count("shared-name") == 0
        assert (await bob.describe_index("shared-name")).dimension == 4
        hits = await alice.query("shared-name", _vectors(1, seed=7)[0], top_k=5)
        assert [h.metadata for h in hits] == [{"owner": "alice"}]
        await bob.delete_index("shared-name")
        assert await bob.list_indexes() == []
        assert await alice.list_indexes() == ["shared-name"]
        await alice.delete_index("shared-name")
    finally:
        await alice.aclose()
        await bob.aclose()


@pytest.mark.anyio
async def test_a_role_without_create_privilege_uses_a_prepared_schema(postgres: PostgresService) -> None:
    admin = create_store(dsn=postgres.uri, schema="prepared")
    await admin.create_index("shared", DIM, "cosine")
    await admin.aclose()
    async with await psycopg.AsyncConnection.connect(postgres.uri, autocommit=True) as conn:
        await conn.execute("DROP ROLE IF EXISTS tenant_rw; CREATE ROLE tenant_rw LOGIN")
        await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        await conn.execute(
            "GRANT USAGE ON SCHEMA prepared TO tenant_rw;"
            " GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA prepared TO tenant_rw"
        )
    tenant = create_store(dsn=postgres.uri.replace("postgres:@", "tenant_rw:@", 1), schema="prepared")
    try:
        await tenant.upsert("shared", ["t1"], _vectors(1, seed=10), metadata=[{"by": "tenant"}])
        hits = await tenant.query("shared", _vectors(1, seed=10)[0], top_k=1)
        assert [(h.id, h.metadata) for h in hits] == [("t1", {"by": "tenant"})]
        with pytest.raises(VectorStoreError, match="permission denied"):
            await tenant.create_index("mine", DIM, "cosine")
    finally:
        await tenant.aclose()


@pytest.mark.anyio
async def test_filter_values_and_keys_are_bound_not_interpolated(hnsw_store: PgVectorStore) -> None:
    store = hnsw_store
    await store.create_index("inject", DIM, "cosine")
    try:
        hostile = "x'); DROP TABLE specific.toolkernel_indexes; --"
        await store.upsert(
            "inject", ["a", "b"], _vectors(2, seed=8), metadata=[{hostile: hostile}, {"k": "$v"}]
        )
        assert await store.count("inject", filter={hostile: hostile}) == 1
        assert await store.count("inject", filter={hostile: {"$regex": "DROP"}}) == 1
        assert await store.count("inject", filter={"k": "$v"}) == 1
        assert await store.list_indexes() == ["inject"]
    finally:
        await store.delete_index("inject")


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match="index_type"):
        create_store(dsn="postgresql:///x", index_type="annoy")
    with pytest.raises(ConfigError, match="dsn: Field required"):
        create_store()
    with pytest.raises(ConfigError, match="pool_min_size"):
        create_store(dsn="postgresql:///x", pool_min_size=5, pool_max_size=2)
    for bad in ("lots", "0MB", "1 GiB", "1GB; DROP TABLE x"):
        with pytest.raises(ConfigError, match="build_memory"):
            create_store(dsn="postgresql:///x", build_memory=bad)


@pytest.mark.anyio
async def test_unreachable_database_says_so() -> None:
    store = create_store(dsn="postgresql://nobody@127.0.0.1:1/none", connect_timeout=2)
    with pytest.raises(VectorStoreError, match="cannot connect"):
        await store.list_indexes()
    await store.aclose()


def test_plugin_registers_the_store_without_importing_psycopg() -> None:
    code = (
        "import sys, toolkernel_pgvector.plugin as p\n"
        "from toolkernel.registries import VectorStoreRegistry\n"
        "r = VectorStoreRegistry(); p.register_vector_stores(registry=r)\n"
        "assert 'pgvector' in r, list(r)\n"
        "assert 'psycopg' not in sys.modules and 'pgvector' not in sys.modules, 'backend imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.anyio
async def test_query_survives_another_store_dropping_and_recreating_the_index(
    postgres: PostgresService,
) -> None:
    """Queries remember an index's catalog entry; a stale entry is refreshed once, never trusted."""
    reader = create_store(dsn=postgres.uri, schema="stale")
    writer = create_store(dsn=postgres.uri, schema="stale")  # stands for another process
    try:
        await writer.create_index("docs", DIM, "cosine")
        await writer.upsert("docs", ["a"], _vectors(1, seed=5))
        assert [h.id for h in await reader.query("docs", _vectors(1, seed=5)[0], top_k=1)] == ["a"]
        await writer.delete_index("docs")
        with pytest.raises(IndexNotFoundError):
            await reader.query("docs", _vectors(1, seed=5)[0])
        # Recreated with another dimension: the reader checks vectors against the new one.
        await writer.create_index("docs", DIM + 1, "euclidean")
        await writer.upsert("docs", ["b"], [[0.0] * (DIM + 1)])
        with pytest.raises(VectorInputError, match=f"expects {DIM + 1}"):
            await reader.query("docs", _vectors(1, seed=5)[0])
        hits = await reader.query("docs", [0.0] * (DIM + 1), top_k=1)
        assert [(h.id, h.score) for h in hits] == [("b", 0.0)]
    finally:
        await reader.aclose()
        await writer.aclose()


@pytest.mark.anyio
async def test_query_is_one_statement_once_the_connection_holds_its_settings(
    postgres: PostgresService,
) -> None:
    store = create_store(dsn=postgres.uri, schema="roundtrips", pool_min_size=1, pool_max_size=1)
    try:
        await store.create_index("docs", DIM, "cosine")
        data = _vectors(50, seed=6)
        await store.upsert("docs", [f"r{i}" for i in range(50)], data)
        await store.query("docs", data[0], top_k=5)
        # The pool holds one connection, which the store keeps between calls: record what it sends.
        conn = await store._acquire()
        statements: list[str] = []
        real_execute = conn.execute

        async def spy(query, params=None, **kw):  # type: ignore[no-untyped-def]
            statements.append(str(query))
            return await real_execute(query, params, **kw)

        conn.execute = spy  # type: ignore[method-assign]
        await store._release(conn)
        await store.query("docs", data[1], top_k=5)
        assert len(statements) == 1, statements
        # Another ef changes the session setting once, in the same connection, before the search.
        await store.query("docs", data[1], top_k=5, options={"ef": 77})
        assert len(statements) == 3, statements
        conn = await store._acquire()
        conn.execute = real_execute  # type: ignore[method-assign]
        cur = await conn.execute("SHOW hnsw.ef_search")
        assert (await cur.fetchone()) == ("77",)
        await store._release(conn)
    finally:
        await store.delete_index("docs")
        await store.aclose()


@pytest.mark.anyio
async def test_kept_connections_never_starve_a_call_waiting_on_the_pool(postgres: PostgresService) -> None:
    """With one pooled connection, concurrent queries and writes all get it: a connection the store
    would keep goes back to the pool whenever one of its calls waits there. A starved call fails
    with the pool's timeout error (5 s); the 120 s limit only guards against a hang."""
    store = create_store(dsn=postgres.uri, schema="keep", pool_min_size=1, pool_max_size=1, pool_timeout=5)
    try:
        await store.create_index("docs", DIM, "cosine")
        data = _vectors(40, seed=8)
        await store.upsert("docs", [f"k{i}" for i in range(40)], data)
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(store.query, "docs", data[i])
                    tg.start_soon(store.upsert, "docs", [f"k{i}"], [data[i]])
                    tg.start_soon(store.count, "docs")
        assert len(store._idle) == 1
        assert store._waiting == 0
    finally:
        await store.delete_index("docs")
        await store.aclose()


@pytest.mark.anyio
async def test_kept_connections_go_back_to_the_pool(
    postgres: PostgresService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept connection returns to the pool once KEEP_SECONDS pass, used or not, and a broken
    one is never kept."""
    store = create_store(dsn=postgres.uri, schema="keep2", pool_min_size=1, pool_max_size=2)
    try:
        await store.create_index("docs", DIM, "cosine")
        await store.count("docs")
        assert len(store._idle) == 1
        pool = await store._get_pool()
        assert pool.get_stats()["pool_available"] == 0  # the store holds it
        monkeypatch.setattr(store_module, "KEEP_SECONDS", 0.0)
        await store.count("docs")
        assert store._idle == []
        assert pool.get_stats()["pool_available"] == 1
        monkeypatch.setattr(store_module, "KEEP_SECONDS", 60.0)
        await store.count("docs")
        (kept,) = store._idle
        # Kept unused for two minutes, and past the pool's max_lifetime: the next call hands it
        # back before using it, the pool retires it, and the call runs on a fresh connection.
        store._taken[kept] -= 120
        kept._expire_at = 0.0  # type: ignore[attr-defined]  # psycopg_pool's per-connection deadline
        await store.count("docs")
        assert kept.closed
        assert len(store._idle) == 1
        assert store._idle[0] is not kept
        conn = await store._acquire()
        await conn.close()  # as when the server goes away
        await store._release(conn)
        assert store._idle == []
        assert not store._taken
        assert await store.count("docs") == 0  # the pool replaces it
    finally:
        await store.delete_index("docs")
        await store.aclose()
    assert store._idle == []
    assert not store._taken


@pytest.mark.anyio
async def test_build_memory_applies_to_the_bulk_build_transaction_only(postgres: PostgresService) -> None:
    store = create_store(dsn=postgres.uri, schema="buildmem", build_memory="96MB", pool_max_size=1)
    try:
        await store.create_index("docs", DIM, "cosine")
        data = _vectors(1_000, seed=7)
        await store.upsert("docs", [f"m{i}" for i in range(1_000)], data)  # bulk: rebuilds the index
        await store.reindex("docs")
        assert (await store.query("docs", data[3], top_k=1))[0].id == "m3"
        async with store._connection(transaction=False) as conn:  # set_config(..., true): no leak
            cur = await conn.execute("SHOW maintenance_work_mem")
            assert (await cur.fetchone()) != ("96MB",)
    finally:
        await store.delete_index("docs")
        await store.aclose()


@pytest.mark.anyio
async def test_unfiltered_query_iterates_when_a_plain_scan_comes_up_short(hnsw_store: PgVectorStore) -> None:
    """Without a filter a plain HNSW scan runs first; if it yields under top_k rows, the query iterates."""
    store = hnsw_store
    await store.create_index("short", DIM, "cosine")
    scans: list[tuple[str, int]] = []
    search = store._search

    async def spy(statement: Any, args: list[Any], settings: dict[str, str]) -> list[Any]:
        rows = await search(statement, args, settings)
        scans.append((settings["hnsw.iterative_scan"], len(rows)))
        return rows

    store._search = spy  # type: ignore[method-assign]
    try:
        data = _vectors(400, seed=8)
        await store.upsert("short", [f"s{i}" for i in range(400)], data)
        assert len(await store.query("short", data[0], top_k=15)) == 15
        assert scans == [("off", 15)]  # ef_search 40 >= 15: one plain scan
        scans.clear()
        # ef 5 < top_k: the plain scan stops at 5 rows, so the query runs again iterating.
        hits = await store.query("short", data[0], top_k=15, options={"ef": 5})
        assert scans == [("off", 5), ("strict_order", 15)]
        assert len(hits) == 15
        assert hits[0].id == "s0"
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    finally:
        await store.delete_index("short")


def test_the_kernel_builds_the_store_from_its_settings(tmp_path: Any) -> None:
    from toolkernel import ConfigError, Kernel
    from toolkernel_pgvector import plugin

    config = tmp_path / "toolkernel.toml"
    config.write_text('[plugins.pgvector]\ndsn = "postgresql:///kb"\nschema = "tenant_a"\n')
    kernel = Kernel.from_config(config, load_entry_points=False, plugins=[plugin])
    store = kernel.vector_store("pgvector")  # nothing connects until the first call
    assert isinstance(store, PgVectorStore)
    assert (store.options.dsn, store.options.schema_) == ("postgresql:///kb", "tenant_a")
    assert kernel.vector_store("pgvector", schema="tenant_b").options.schema_ == "tenant_b"  # options win
    with pytest.raises(ConfigError, match=r"\[plugins\.pgvector\] index_type from the call's options"):
        kernel.vector_store("pgvector", index_type="annoy")
