"""The PostgreSQL backend, on a real Postgres with pgvector: the same knowledge base as the
embedded default, BM25 scored the same, many writers, servers on other hosts and on a hot
standby, and outages of the database under a running server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolkernel import Kernel
from toolkernel.cli import main
from toolkernel.testing.services import PostgresService, postgres_standby, start_postgres, stop_postgres
from toolkernel_rag import KnowledgeBase, ingest

from .conftest import EMBEDDER, make_kernel, write_records

pytestmark = pytest.mark.anyio

TOOLKERNEL = str(Path(sys.executable).with_name("toolkernel"))
WORDS = ["river", "stone", "cloud", "maple", "orbit", "lantern", "copper", "meadow", "signal", "harbor"]
CHUNKER = {"name": "recursive", "size": 300, "overlap": 0, "length": "characters"}


def _records(n: int, changed: frozenset[int] = frozenset()) -> list[dict[str, object]]:
    """``n`` documents of two or three chunks; those in ``changed`` carry a marker word."""
    out: list[dict[str, object]] = []
    for i in range(n):
        words = [f"{WORDS[(i * 7 + j) % len(WORDS)]}{(i + j) % 9}" for j in range(90 + i % 7 * 10)]
        if i in changed:
            words.insert(5, f"quokka{i}")
        out.append({"id": f"doc-{i}", "title": f"Record {i}", "text": " ".join(words)})
    return out


async def _new_kb(url: str, name: str, kernel: Kernel) -> KnowledgeBase:
    """A new knowledge base ``name`` on the database at ``url``, with the tests' embedder and chunker."""
    return await KnowledgeBase.open(
        name, kernel=kernel, create=True, embedder=EMBEDDER, chunker=CHUNKER, home=url
    )


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKERNEL_")}
    return {**env, "TOOLKERNEL_KB_HOME": url, **extra}


def _counts(url: str, name: str) -> dict[str, Any]:
    """What the knowledge base holds, read straight from its tables (and whether stats agree)."""
    import psycopg

    schema = f"kb_{name}"
    with psycopg.connect(url, autocommit=True) as conn:

        def one(query: str) -> Any:
            row = conn.execute(query.replace("{s}", schema)).fetchone()
            assert row is not None
            return row[0]

        return {
            "documents": one("SELECT count(*) FROM {s}.documents WHERE state = 'done'"),
            "pending": one("SELECT count(*) FROM {s}.documents WHERE state = 'pending'"),
            "chunks": one("SELECT count(*) FROM {s}.chunks"),
            "distinct_chunks": one("SELECT count(DISTINCT (document_id, seq)) FROM {s}.chunks"),
            "postings": one("SELECT count(*) FROM {s}.chunk_postings"),
            "vector_index": one(
                "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = '{s}.chunks'::regclass "
                "AND a.amname = 'hnsw' AND i.indisvalid"
            ),
            "stats_match": one(
                "SELECT (SELECT chunks FROM {s}.stats) = (SELECT count(*) FROM {s}.chunks) "
                "AND (SELECT chunk_length FROM {s}.stats) = "
                "(SELECT COALESCE(sum(length), 0) FROM {s}.chunks) "
                "AND (SELECT documents FROM {s}.stats) = "
                "(SELECT count(DISTINCT document) FROM {s}.document_postings)"
            ),
            "term_counts_match": one(_TERM_COUNTS_MATCH),
        }


_TERM_COUNTS_MATCH = (
    "SELECT count(*) = 0 FROM (SELECT postings, term, sum(n) AS n FROM {s}.term_counts "
    "GROUP BY postings, term HAVING sum(n) <> 0) AS f FULL JOIN "
    "(SELECT 'chunk' AS postings, term, count(*) AS n FROM {s}.chunk_postings GROUP BY term UNION ALL "
    "SELECT 'document', term, count(*) FROM {s}.document_postings GROUP BY term) AS p USING (postings, term) "
    "WHERE f.n IS DISTINCT FROM p.n"
)
"""Whether every term's rows in ``term_counts`` sum to the number of its postings, at both levels."""


async def test_bm25_scores_equal_the_embedded_index(postgres: PostgresService, tmp_path: Path) -> None:
    corpus = write_records(tmp_path / "corpus.jsonl", _records(40))
    kernel = make_kernel()
    embedded = await KnowledgeBase.open(
        str(tmp_path / "embedded"), kernel=kernel, create=True, embedder=EMBEDDER, chunker=CHUNKER
    )
    database = await _new_kb(postgres.uri, "scores", kernel)
    async with embedded, database:
        await ingest(embedded, [str(corpus)])
        await ingest(database, [str(corpus)])
        assert database.catalog.counts() == embedded.catalog.counts()
        embedded.sparse.refresh(embedded.catalog)
        for query in ("river3 stone4", "maple maple1 copper8", "prism0 velvet harbor2 signal", "nothing"):
            want = embedded.sparse.search(query, 100)  # every match: no tie cut at the boundary
            got = database.sparse.search(query, 100)
            assert [c.score for _, c in got] == pytest.approx([c.score for _, c in want], rel=1e-5), query
            # Equal scores may come in another order; each score's documents and chunks are the same.
            assert _by_score(got) == _by_score(want), query
        # A filter is applied on chunks, as the embedded index does.
        chosen = {f"corpus.jsonl/doc-{i}" for i in (3, 17, 30)}
        hits = await database.search(
            "river3 stone4", mode="hybrid", filter={"document_id": {"$in": sorted(chosen)}}, top_k=5
        )
        assert {h.chunk.document_id for h in hits} == chosen


async def test_bm25_from_a_servers_cached_postings_equals_the_sql_statement_and_follows_writes(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """A reader scores documents from the term postings it caches: the same rankings and the same
    floats as the single SQL statement, and a removed or changed document is seen by the very
    next search, never a stale posting. The cache is moved on by the changed documents: the
    terms it held stay cached through the writes."""
    corpus = write_records(tmp_path / "corpus.jsonl", _records(40))
    kernel = make_kernel()
    writer = await _new_kb(postgres.uri, "cached", kernel)
    async with writer:
        await ingest(writer, [str(corpus)])
    queries = ("stone3 river3", "maple maple1 copper8", "prism0 velvet harbor2 signal", "quokka7 stone3")
    reader = await KnowledgeBase.open("cached", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        sparse = reader.sparse

        def same_as_sql() -> None:
            for query in queries:
                for k in (1, 5, 100):
                    assert sparse.search(query, k) == sparse.search_in_sql(query, k), (query, k)
            chosen = {f"corpus.jsonl/doc-{i}" for i in (3, 17, 30)}

            def allowed(metadata: dict[str, Any]) -> bool:
                return metadata.get("document_id") in chosen

            filtered = sparse.search("stone3 river3", 2, allowed)
            assert filtered == sparse.search_in_sql("stone3 river3", 2, allowed)

        same_as_sql()
        first = sparse.cache.generation
        assert set(sparse.cache.cached(["stone3", "river3"])[1]) == {"stone3", "river3"}
        same_as_sql()  # now from the cache
        assert "corpus.jsonl/doc-3" in [d for d, _ in sparse.search("stone3 river3", 100)]
        again = await KnowledgeBase.open("cached", kernel=kernel, home=postgres.uri, writable=True)
        async with again:
            assert await again.remove(["corpus.jsonl/doc-3"]) == 1
            assert "corpus.jsonl/doc-3" not in [d for d, _ in sparse.search("stone3 river3", 100)]
            write_records(corpus, _records(40, changed=frozenset({7})))
            await ingest(again, [str(corpus)])
            assert [d for d, _ in sparse.search("quokka7", 5)] == ["corpus.jsonl/doc-7"]
            # Moved on, not dropped: terms no search asked for since the writes are still held.
            assert set(sparse.cache.cached(["maple1", "copper8", "harbor2"])[1]) == {
                "maple1",
                "copper8",
                "harbor2",
            }
        same_as_sql()
        assert sparse.cache.generation is not None
        assert first is not None
        assert sparse.cache.generation > first


async def test_a_warmed_cache_holds_the_most_frequent_terms_and_scores_as_sql(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """A server warms its cache with the most frequent terms, within its share of the budget,
    and what it scores from them equals the SQL statement, before and after writes."""
    from toolkernel_rag.postgres.postings_cache import PostingsCache
    from toolkernel_rag.postgres.search import WARM_SHARE, PgSparse

    corpus = write_records(tmp_path / "corpus.jsonl", _records(40))
    kernel = make_kernel()
    writer = await _new_kb(postgres.uri, "warmed", kernel)
    async with writer:
        await ingest(writer, [str(corpus)])
    import psycopg

    with psycopg.connect(postgres.uri, autocommit=True) as conn:
        frequencies = dict(
            conn.execute("SELECT term, count(*) FROM kb_warmed.document_postings GROUP BY term").fetchall()
        )
    reader = await KnowledgeBase.open("warmed", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        assert isinstance(reader.sparse, PgSparse)
        sparse = PgSparse(reader.sparse.catalog, reader.sparse.spec, PostingsCache(limit=200))
        reports: list[str] = []
        sparse.warm(reports.append)
        assert sparse._warmer is not None
        sparse._warmer.join(timeout=60)
        assert len(reports) == 1
        assert "most frequent terms cached" in reports[0], reports
        held = sparse.cache.terms()
        by_frequency = sorted(frequencies, key=lambda t: (-frequencies[t], t))
        # The most frequent terms, in order, as many as fit in the warming's share of the budget.
        assert sorted(held) == sorted(by_frequency[: len(held)])
        assert sum(frequencies[t] for t in held) <= 200 * WARM_SHARE
        assert sum(frequencies[t] for t in by_frequency[: len(held) + 1]) > 200 * WARM_SHARE
        for query in ("stone3 river3", "maple maple1 copper8 " + " ".join(held[:3])):
            assert sparse.search(query, 100) == sparse.search_in_sql(query, 100), query
        again = await KnowledgeBase.open("warmed", kernel=kernel, home=postgres.uri, writable=True)
        async with again:
            write_records(corpus, _records(40, changed=frozenset({7, 8})))
            await ingest(again, [str(corpus)])
        query = " ".join(held[:4]) + " quokka8"
        assert sparse.search(query, 100) == sparse.search_in_sql(query, 100)
        assert set(held) <= set(sparse.cache.terms())  # moved on, not started over
        sparse.close()


def _wait_until(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    """Poll ``condition`` until it holds; fail saying ``what`` did not happen within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


async def test_closing_a_server_cancels_its_warming_and_ends_the_thread(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """Warming runs in a background thread: a server closed while it runs cancels the statement
    and waits for the thread, so neither a query nor a connection of the closed server goes on
    in the database (warming is held here by a lock another session keeps on the postings)."""
    import psycopg

    kernel = make_kernel()
    writer = await KnowledgeBase.open(
        "closed", kernel=kernel, create=True, embedder=EMBEDDER, chunker=CHUNKER, home=postgres.uri
    )
    async with writer:
        await ingest(writer, [str(write_records(tmp_path / "corpus.jsonl", _records(20)))])
    reader = await KnowledgeBase.open("closed", kernel=kernel, home=postgres.uri, writable=False)
    reports: list[str] = []
    # On the old code the lock is let go by the session's own timeout, half a minute on.
    options = "-c idle_in_transaction_session_timeout=30000"
    with (
        psycopg.connect(postgres.uri, options=options) as locker,
        psycopg.connect(postgres.uri, autocommit=True) as watcher,
    ):
        locker.execute(
            "LOCK TABLE kb_closed.term_counts, kb_closed.document_postings IN ACCESS EXCLUSIVE MODE"
        )

        def waiting() -> list[int]:
            rows = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> %s",
                (locker.info.backend_pid,),
            ).fetchall()
            return [int(r[0]) for r in rows]

        reader.sparse.warm(reports.append)
        _wait_until(lambda: bool(waiting()), "the warming query waits for the lock")
        (pid,) = waiting()
        await reader.aclose()
        warmer = reader.sparse._warmer  # type: ignore[attr-defined]
        assert warmer is not None
        assert not warmer.is_alive()
        _wait_until(  # the pool's connections closed: the backend exits
            lambda: (
                watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None
            ),
            "the warming connection's backend exits",
        )
        locker.rollback()
    assert reports == []  # a cancel asked for by close is no failure to report


async def test_warming_started_over_midway_warms_the_most_frequent_terms_again(
    postgres: PostgresService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the cache cannot follow (a generation with no logged changes) lands between two
    batches of a warming: the warming's own catch-up starts the cache over, dropping the terms
    already warmed, and the warming starts again from the most frequent term rather than going
    on with the rest (the test runs the write from the warming's sequence of batches)."""
    import psycopg

    from toolkernel_rag.postgres import search as pg_search
    from toolkernel_rag.postgres.postings_cache import PostingsCache
    from toolkernel_rag.postgres.search import WARM_SHARE, PgSparse

    kernel = make_kernel()
    writer = await KnowledgeBase.open(
        "rewarmed", kernel=kernel, create=True, embedder=EMBEDDER, chunker=CHUNKER, home=postgres.uri
    )
    async with writer:
        await ingest(writer, [str(write_records(tmp_path / "corpus.jsonl", _records(40)))])
    with psycopg.connect(postgres.uri, autocommit=True) as conn:
        frequencies = dict(
            conn.execute("SELECT term, count(*) FROM kb_rewarmed.document_postings GROUP BY term").fetchall()
        )
    batches = pg_search._batches
    written: list[bool] = []

    def write_after_the_first_batch(frequent: Any, size: int) -> Any:
        for number, batch in enumerate(batches(frequent, size)):
            if number == 1 and not written:
                with psycopg.connect(postgres.uri, autocommit=True) as conn:  # a writer that logs nothing
                    conn.execute("UPDATE kb_rewarmed.stats SET generation = generation + 1")
                written.append(True)
            yield batch

    monkeypatch.setattr(pg_search, "_batches", write_after_the_first_batch)
    monkeypatch.setattr(pg_search, "WARM_BATCH", 30)
    reader = await KnowledgeBase.open("rewarmed", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        assert isinstance(reader.sparse, PgSparse)
        sparse = PgSparse(reader.sparse.catalog, reader.sparse.spec, PostingsCache(limit=200))
        assert sparse.search("river3", 5) == sparse.search_in_sql("river3", 5)  # the cache holds a generation
        reports: list[str] = []
        sparse.warm(reports.append)
        assert sparse._warmer is not None
        sparse._warmer.join(timeout=60)
        assert written == [True]
        assert len(reports) == 1
        assert "most frequent terms cached" in reports[0], reports
        by_frequency = sorted(frequencies, key=lambda t: (-frequencies[t], t))
        held = [t for t in sparse.cache.terms() if t != "river3"]
        assert sorted(held) == sorted(by_frequency[: len(held)])
        assert sum(frequencies[t] for t in by_frequency[: len(held) + 1]) > 200 * WARM_SHARE
        sparse.close()


async def test_warming_that_fails_says_why_and_searches_go_on(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """Warming runs in a background thread: a failure there (here the database refuses the
    statement: its table is gone) is reported in one line, never a thread's traceback, and
    the server keeps serving."""
    import psycopg

    corpus = write_records(tmp_path / "corpus.jsonl", _records(12))
    kernel = make_kernel()
    kb = await _new_kb(postgres.uri, "unwarmed", kernel)
    async with kb:
        await ingest(kb, [str(corpus)])
    reader = await KnowledgeBase.open("unwarmed", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            conn.execute("ALTER TABLE kb_unwarmed.document_postings RENAME TO postings_elsewhere")
        reports: list[str] = []
        reader.sparse.warm(reports.append)
        warmer = reader.sparse._warmer  # type: ignore[attr-defined]
        warmer.join(timeout=60)
        assert len(reports) == 1
        assert reports[0].startswith("BM25 postings not warmed: UndefinedTable"), reports
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            conn.execute("ALTER TABLE kb_unwarmed.postings_elsewhere RENAME TO document_postings")
        assert reader.sparse.search("river3", 5)


async def test_a_knowledge_base_created_again_under_its_name_starts_a_servers_cache_over(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """A knowledge base deleted and created again under the same name counts its generations
    from the start: once they pass the one a running server holds, the changes logged since then
    are not what separates the two histories. The server's cache starts over (the ``stats``
    table is another), never keeping the old documents in its cached terms."""
    import psycopg

    kernel = make_kernel()

    async def create(corpus: Path) -> None:
        kb = await KnowledgeBase.open(
            "reborn", kernel=kernel, create=True, embedder=EMBEDDER, chunker=CHUNKER, home=postgres.uri
        )
        async with kb:
            await ingest(kb, [str(corpus)])

    def generation() -> int:
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            row = conn.execute("SELECT generation FROM kb_reborn.stats").fetchone()
            assert row is not None
            return int(row[0])

    await create(write_records(tmp_path / "old.jsonl", _records(30)))
    query = "river3 stone4 maple1"
    reader = await KnowledgeBase.open("reborn", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        sparse = reader.sparse
        assert sparse.search(query, 100) == sparse.search_in_sql(query, 100)
        held = sparse.cache.generation
        assert held is not None
        assert set(sparse.cache.cached(query.split())[1]) == set(query.split())
        with psycopg.connect(postgres.uri, autocommit=True) as conn:  # what ``kb delete`` drops
            conn.execute("DROP SCHEMA kb_reborn CASCADE")
        await create(write_records(tmp_path / "new.jsonl", _records(30)))
        writer = await KnowledgeBase.open("reborn", kernel=kernel, home=postgres.uri, writable=True)
        async with writer:
            number = 0
            while generation() <= held + 1:  # each removal a logged generation past the one held
                assert await writer.remove([f"new.jsonl/doc-{number}"]) == 1
                number += 1
        found = sparse.search(query, 100)
        assert found == sparse.search_in_sql(query, 100)
        assert found
        assert all(d.startswith("new.jsonl/") for d, _ in found)
    fresh = await KnowledgeBase.open("reborn", kernel=kernel, home=postgres.uri, writable=False)
    async with fresh:
        assert fresh.sparse.search(query, 100) == found


async def test_a_knowledge_base_without_a_changes_log_starts_the_cache_over_then_gets_one(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """A knowledge base made before ``changes`` existed (or written by a writer that does not log):
    a server cannot know what changed, so its cache starts over; the next writer makes the table,
    and from then on the cache moves on. Scores equal the SQL statement's throughout."""
    import psycopg

    corpus = write_records(tmp_path / "corpus.jsonl", _records(30))
    kernel = make_kernel()
    kb = await _new_kb(postgres.uri, "unlogged", kernel)
    async with kb:
        await ingest(kb, [str(corpus)])
    with psycopg.connect(postgres.uri, autocommit=True) as conn:
        conn.execute("DROP TABLE kb_unlogged.changes")
    reader = await KnowledgeBase.open("unlogged", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        sparse = reader.sparse
        assert sparse.search("river3 stone4", 100) == sparse.search_in_sql("river3 stone4", 100)
        with psycopg.connect(postgres.uri, autocommit=True) as conn:  # a writer that logs nothing
            conn.execute("UPDATE kb_unlogged.stats SET generation = generation + 1")
        assert sparse.search("maple1", 100) == sparse.search_in_sql("maple1", 100)
        assert "river3" not in sparse.cache.cached(["river3"])[1]  # started over
        assert sparse.search("river3 stone4", 100) == sparse.search_in_sql("river3 stone4", 100)
        writer = await KnowledgeBase.open("unlogged", kernel=kernel, home=postgres.uri, writable=True)
        async with writer:
            assert await writer.remove(["corpus.jsonl/doc-4"]) == 1  # makes the table, logs doc-4
        assert sparse.search("maple1", 100) == sparse.search_in_sql("maple1", 100)
        assert "river3" in sparse.cache.cached(["river3"])[1]  # moved on this time
        assert "corpus.jsonl/doc-4" not in [d for d, _ in sparse.search("river3 stone4", 100)]
        assert sparse.search("river3 stone4", 100) == sparse.search_in_sql("river3 stone4", 100)
        with psycopg.connect(postgres.uri, autocommit=True) as conn:  # unlogged beside logged ones
            conn.execute("UPDATE kb_unlogged.stats SET generation = generation + 1")
        assert sparse.search("maple1", 100) == sparse.search_in_sql("maple1", 100)
        assert "river3" not in sparse.cache.cached(["river3"])[1]  # a generation without rows


async def test_a_document_id_holding_a_newline_is_scored_in_sql(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """Cached postings arrive with their ids joined by newlines; an id that holds one cannot be
    split back, so that search is scored by the SQL statement, with the same results."""
    records = [*_records(6), {"id": "two\nlines", "text": "stone3 river3 quokka1"}]
    corpus = write_records(tmp_path / "corpus.jsonl", records)
    kernel = make_kernel()
    kb = await _new_kb(postgres.uri, "newline", kernel)
    async with kb:
        await ingest(kb, [str(corpus)])
        found = kb.sparse.search("quokka1 stone3", 10)
        assert found[0][0] == "corpus.jsonl/two\nlines"
        assert found == kb.sparse.search_in_sql("quokka1 stone3", 10)
        assert kb.sparse.cache.cached(["quokka1"])[1] == {}  # nothing was cached from that fetch


async def test_the_totals_a_search_reads_from_the_stats_row_match_the_tables(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """A search's over-fetch estimate read the stats row instead of counting every chunk when the
    generation moved (every batch of an ingest): the row must stay equal to the tables' counts,
    and to the embedded backend's, through ingests, changed documents and removals."""
    first = write_records(tmp_path / "a.jsonl", _records(12))
    second = tmp_path / "b.jsonl"
    write_records(second, _records(5))
    kernel = make_kernel()
    embedded = await KnowledgeBase.open(
        str(tmp_path / "embedded"), kernel=kernel, create=True, embedder=EMBEDDER, chunker=CHUNKER
    )
    database = await _new_kb(postgres.uri, "totals", kernel)

    def check(expected_documents: int) -> None:
        tables = _counts(postgres.uri, "totals")
        assert database.catalog.chunk_totals() == (tables["documents"], tables["chunks"])
        assert database.catalog.chunk_totals() == embedded.catalog.chunk_totals()
        assert tables["documents"] == expected_documents
        assert tables["stats_match"]
        assert tables["term_counts_match"]

    async with embedded, database:
        for kb in (embedded, database):
            await ingest(kb, [str(first), str(second)])
        check(17)
        before = database.catalog.chunk_totals()[1]
        longer = _records(12)
        for i in (2, 5, 9):  # changed documents, each now one more chunk or more
            longer[i]["text"] = f"{longer[i]['text']} " + " ".join(f"extra{i}word{j}" for j in range(80))
        write_records(first, longer)
        for kb in (embedded, database):
            await ingest(kb, [str(first), str(second)])
        check(17)
        assert database.catalog.chunk_totals()[1] > before
        for kb in (embedded, database):
            assert await kb.remove(["a.jsonl/doc-2", "a.jsonl/doc-7"]) == 2
        check(15)
        for kb in (embedded, database):
            assert await kb.remove_source("b.jsonl") == 5
        check(10)


async def test_a_first_ingest_builds_the_vector_index_at_its_end(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """The HNSW index is built once over a first ingest's chunks; without it (an ingest stopped
    before its end) dense search is exact, and the next ingest builds it."""
    import psycopg

    corpus = write_records(tmp_path / "corpus.jsonl", _records(40))
    kb = await _new_kb(postgres.uri, "bulk", make_kernel())
    dense_query = (
        "SELECT id FROM kb_bulk.chunks "
        "ORDER BY embedding <=> (SELECT embedding FROM kb_bulk.chunks LIMIT 1) LIMIT 5"
    )
    async with kb:
        await ingest(kb, [str(corpus)])
        assert _counts(postgres.uri, "bulk")["vector_index"] == 1
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            conn.execute("SET enable_seqscan = off")  # a table this small is cheaper to scan
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + dense_query))
            assert "chunks_embedding_idx" in plan
        want = [
            (h.chunk.id, round(h.score, 5)) for h in await kb.search("river3 stone4", mode="dense", top_k=5)
        ]
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            conn.execute("DROP INDEX kb_bulk.chunks_embedding_idx")
        got = [
            (h.chunk.id, round(h.score, 5)) for h in await kb.search("river3 stone4", mode="dense", top_k=5)
        ]
        assert got == want
        report = await ingest(kb, [str(corpus)])
        assert report.unchanged == 40
        assert _counts(postgres.uri, "bulk")["vector_index"] == 1


async def test_a_first_ingest_leaves_the_searched_tables_vacuumed_and_analyzed(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """Autovacuum lags a bulk load: until it gets there the newest postings are heap fetches in
    every index-only scan and the planner has no statistics. A first ingest vacuums and
    analyzes the tables searches read before it returns."""
    import psycopg

    corpus = write_records(tmp_path / "corpus.jsonl", _records(40))
    kb = await _new_kb(postgres.uri, "vacuumed", make_kernel())
    async with kb:
        await ingest(kb, [str(corpus)])
    tables = ("chunk_postings", "document_postings", "chunks", "documents", "term_counts")
    with psycopg.connect(postgres.uri, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relpages, c.relallvisible, s.last_vacuum IS NOT NULL OR s.last_autovacuum "
            "IS NOT NULL, s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL FROM pg_class c "
            "JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE s.schemaname = 'kb_vacuumed' "
            "AND c.relname = ANY(%s) ORDER BY c.relname",
            (list(tables),),
        ).fetchall()
    assert sorted(r[0] for r in rows) == sorted(tables)
    for name, pages, visible, vacuumed, analyzed in rows:
        assert pages > 0, name
        assert visible == pages, (name, pages, visible)  # every page all-visible
        assert vacuumed, name
        assert analyzed, name


def _postings_index(url: str, schema: str) -> tuple[list[tuple[str, bool]], int | None, int]:
    """The indexes of ``schema``'s document postings ``(name, valid)``, the postings count its last
    rebuild recorded, and the index's file number (a rebuild gives it a new one)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        indexes = conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            f"WHERE i.indrelid = '{schema}.document_postings'::regclass ORDER BY c.relname"
        ).fetchall()
        upkeep = conn.execute(f"SELECT postings FROM {schema}.upkeep WHERE task = 'document_postings_pkey'")
        built = upkeep.fetchone()
        node = conn.execute(f"SELECT pg_relation_filenode('{schema}.document_postings_pkey')").fetchone()
    assert node is not None
    return [(r[0], bool(r[1])) for r in indexes], None if built is None else int(built[0]), int(node[0])


async def test_the_document_postings_index_is_rebuilt_in_term_order_as_it_grows(
    postgres: PostgresService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built by inserts, a term's entries in the postings index are scattered over the file, and a
    server fetching them from disk made hundreds of random reads. The ingest that makes the
    postings grow by a quarter since the index's last build rebuilds it (concurrently, one
    writer at a time), dropping first what a killed rebuild left; searches score the same."""
    import psycopg

    from toolkernel_rag.postgres import catalog as pg_catalog

    monkeypatch.setattr(pg_catalog, "REBUILD_MIN_POSTINGS", 100)
    corpus = write_records(tmp_path / "corpus.jsonl", _records(40))
    kernel = make_kernel()
    kb = await _new_kb(postgres.uri, "rebuilt", kernel)
    async with kb:
        await ingest(kb, [str(corpus)])
        indexes, built, node = _postings_index(postgres.uri, "kb_rebuilt")
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            count = conn.execute("SELECT count(*) FROM kb_rebuilt.document_postings").fetchone()
        assert count is not None
        assert built == count[0]  # rebuilt at the end of the first ingest, all postings counted
        assert ("document_postings_pkey", True) in indexes
        want = kb.sparse.search_in_sql("river3 stone4 maple", 100)
        assert kb.sparse.search("river3 stone4 maple", 100) == want
        # Grown by less than a quarter: left alone.
        write_records(tmp_path / "more.jsonl", _records(3))
        await ingest(kb, [str(tmp_path / "more.jsonl")])
        assert _postings_index(postgres.uri, "kb_rebuilt")[1:] == (built, node)
        # A rebuild killed midway leaves an invalid index; the next rebuild drops it first.
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute(
                    "CREATE UNIQUE INDEX CONCURRENTLY document_postings_pkey_ccnew "
                    "ON kb_rebuilt.document_postings (term)"
                )
            conn.execute("UPDATE kb_rebuilt.upkeep SET postings = 1")  # as if it had grown
        assert ("document_postings_pkey_ccnew", False) in _postings_index(postgres.uri, "kb_rebuilt")[0]
        results = await anyio.to_thread.run_sync(
            lambda: [kb.catalog.rebuild_postings_index(), kb.catalog.rebuild_postings_index()]
        )
        assert results == [True, False]
        with kb.catalog.db.connection() as conn:  # the pooled connection the rebuild used, reset
            memory = conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()
        assert memory is not None
        assert memory[0] != f"{pg_catalog.REBUILD_MEMORY_MB}MB"
        indexes, built, rebuilt_node = _postings_index(postgres.uri, "kb_rebuilt")
        assert indexes == [("document_postings_document_idx", True), ("document_postings_pkey", True)]
        assert rebuilt_node != node
        assert built is not None
        assert built > 1
        assert kb.sparse.search("river3 stone4 maple", 100) == kb.sparse.search_in_sql(
            "river3 stone4 maple", 100
        )


async def test_a_rebuild_held_up_by_an_old_snapshot_is_skipped_and_its_leftover_dropped_next_time(
    postgres: PostgresService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``REINDEX CONCURRENTLY`` waits for every older snapshot in the database: behind a session
    idle in a transaction it would hold the ingest for as long as that lasts. The rebuild's
    waits are bounded and its failure is reported, not the ingest's: every document is in. The
    invalid index it leaves is dropped by the next ingest, even one that rebuilds nothing."""
    import psycopg

    from toolkernel_rag.postgres import catalog as pg_catalog

    monkeypatch.setattr(pg_catalog, "REBUILD_MIN_POSTINGS", 100)
    monkeypatch.setattr(pg_catalog, "REBUILD_LOCK_TIMEOUT_SECONDS", 1)
    kb = await KnowledgeBase.open(
        "held", kernel=make_kernel(), create=True, embedder=EMBEDDER, chunker=CHUNKER, home=postgres.uri
    )
    async with kb:
        await ingest(kb, [str(write_records(tmp_path / "corpus.jsonl", _records(30)))])
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            conn.execute("UPDATE kb_held.upkeep SET postings = 1")  # as if it had grown
        capsys.readouterr()
        # An old snapshot; on the old code the session's own timeout ends the wait, a minute on.
        with psycopg.connect(postgres.uri, options="-c idle_in_transaction_session_timeout=60000") as old:
            old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            old.execute("SELECT 1")
            await ingest(kb, [str(write_records(tmp_path / "more.jsonl", _records(3)))])
            old.rollback()
        err = capsys.readouterr().err
        assert "kb.postings_index_not_rebuilt" in err
        assert "lock timeout" in err
        indexes, built, _ = _postings_index(postgres.uri, "kb_held")
        assert built == 1  # not rebuilt
        assert ("document_postings_pkey_ccnew", False) in indexes
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            count = conn.execute("SELECT count(*) FROM kb_held.documents").fetchone()
            conn.execute("UPDATE kb_held.upkeep SET postings = 1000000000")  # no rebuild due
        assert count is not None
        assert count[0] == 33
        write_records(tmp_path / "more.jsonl", _records(3, changed=frozenset({1})))
        await ingest(kb, [str(tmp_path / "more.jsonl")])
        indexes, built, _ = _postings_index(postgres.uri, "kb_held")
        assert indexes == [("document_postings_document_idx", True), ("document_postings_pkey", True)]
        assert built == 1_000_000_000
        assert kb.sparse.search("river2 stone1", 100) == kb.sparse.search_in_sql("river2 stone1", 100)


async def test_a_knowledge_base_without_term_counts_is_searched_and_given_them(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """A knowledge base made before ``term_counts`` existed: searches count postings, with the
    same scores, and its next writer makes and fills the table."""
    import psycopg

    corpus = write_records(tmp_path / "corpus.jsonl", _records(30))
    kernel = make_kernel()
    kb = await _new_kb(postgres.uri, "older", kernel)
    async with kb:
        await ingest(kb, [str(corpus)])
        want = kb.sparse.search("river3 stone4 maple", 100)
    with psycopg.connect(postgres.uri, autocommit=True) as conn:
        conn.execute("DROP TABLE kb_older.term_counts")
    older = await KnowledgeBase.open("older", kernel=kernel, home=postgres.uri, writable=True)
    async with older:
        assert older.sparse.search("river3 stone4 maple", 100) == want
        assert await older.remove(["corpus.jsonl/doc-4"]) == 1  # a writer: the table is made and filled
    assert _counts(postgres.uri, "older")["term_counts_match"]
    again = await KnowledgeBase.open("older", kernel=kernel, home=postgres.uri, writable=True)
    async with again:
        await ingest(again, [str(corpus)])
        assert again.sparse.search("river3 stone4 maple", 100) == want
    assert _counts(postgres.uri, "older")["term_counts_match"]


def _by_score(ranked: list[tuple[str, Any]]) -> list[list[tuple[str, str]]]:
    groups: dict[float, list[tuple[str, str]]] = {}
    for document_id, chunk in ranked:
        groups.setdefault(round(chunk.score, 4), []).append((document_id, chunk.id))
    return [sorted(g) for _, g in sorted(groups.items(), reverse=True)]


def test_cli_on_a_database_home(
    postgres: PostgresService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_records(tmp_path / "corpus.jsonl", _records(6))
    home = ["--home", postgres.uri]
    ingest_args = ["kb", "ingest", str(corpus), "--kb", "clikb", *home, "--embedder", EMBEDDER, "--quiet"]
    assert main(ingest_args) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 6
    assert main(["kb", "list", *home]) == 0
    listed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert ["clikb", EMBEDDER, "pgvector"] in [line[:3] for line in listed]
    assert main(["kb", "stats", "--kb", "clikb", *home]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["documents"], stats["pending"], stats["vectors"]) == (6, 0, stats["chunks"])
    assert main(["kb", "serve", "--kb", "nosuch", *home]) == 2
    assert "no knowledge base 'nosuch' in postgresql://" in capsys.readouterr().err
    assert main(["kb", "delete", "--kb", "clikb", *home, "--yes"]) == 0
    assert main(["kb", "stats", "--kb", "clikb", *home]) == 2
    capsys.readouterr()


def test_two_writers_of_the_same_documents_leave_one_version(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """Two ingests of the same corpus at once, from separate processes: no duplicates, counts of one run."""
    corpus = write_records(tmp_path / "corpus.jsonl", _records(60))
    command = [TOOLKERNEL, "kb", "ingest", str(corpus), "--kb", "racers", "--embedder", EMBEDDER, "--quiet"]
    command += ["--batch", "16"]
    writers = [
        subprocess.Popen(
            command, env=_env(postgres.uri), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=240)
        assert writer.returncode == 0, err
    counts = _counts(postgres.uri, "racers")
    assert (counts["documents"], counts["pending"]) == (60, 0)
    assert counts["chunks"] == counts["distinct_chunks"]
    assert counts["stats_match"]
    assert counts["term_counts_match"]


async def test_a_servers_cache_moved_on_through_concurrent_writers_holds_what_the_database_holds(
    postgres: PostgresService, tmp_path: Path
) -> None:
    """Three writer processes commit at once (a re-ingest with changed documents, a new source,
    a removal) while a reader searches: its cache is moved on by the changed documents at every
    generation it meets, never started over, and ends holding exactly each term's postings in
    the database, also for terms no search fetched again; its scores equal the SQL statement's."""
    import psycopg

    first = write_records(tmp_path / "a.jsonl", _records(60))
    removed = write_records(tmp_path / "c.jsonl", _records(10))
    kernel = make_kernel()
    kb = await _new_kb(postgres.uri, "moving", kernel)
    async with kb:
        await ingest(kb, [str(first), str(removed)])
    queries = ["stone3 river3", "maple maple1 copper8", "harbor2 signal lantern5", "quokka7 orbit4 meadow6"]
    reader = await KnowledgeBase.open("moving", kernel=kernel, home=postgres.uri, writable=False)
    async with reader:
        sparse = reader.sparse
        for query in [*queries, "cloud5 lantern8 copper2"]:
            sparse.search(query, 10)
        held = set(sparse.cache.terms())
        assert {"cloud5", "lantern8", "copper2"} <= held  # never searched again: moved on alone
        start = sparse.cache.generation
        write_records(first, _records(60, changed=frozenset(range(0, 60, 6))))
        second = write_records(tmp_path / "b.jsonl", _records(30))
        ingest_command = [TOOLKERNEL, "kb", "ingest", "--kb", "moving", "--embedder", EMBEDDER, "--quiet"]
        commands = [
            [*ingest_command, str(first), "--batch", "4"],
            [*ingest_command, str(second), "--batch", "4"],
            [TOOLKERNEL, "kb", "remove", "c.jsonl/doc-1", "c.jsonl/doc-2", "--kb", "moving"],
        ]
        writers = [
            await anyio.open_process(
                c, env=_env(postgres.uri), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for c in commands
        ]
        generations = set()
        with anyio.fail_after(240):
            while any(w.returncode is None for w in writers):
                for query in queries:
                    await anyio.to_thread.run_sync(sparse.search, query, 10)
                generations.add(sparse.cache.generation)
            assert [await w.wait() for w in writers] == [0, 0, 0]
        for query in queries:
            assert sparse.search(query, 100) == sparse.search_in_sql(query, 100), query
        assert start is not None
        assert sparse.cache.generation is not None
        assert sparse.cache.generation > start
        assert len(generations) > 1  # it met generations while the writers committed
        assert held <= set(sparse.cache.terms())  # moved on every time, never started over
        _, cached = sparse.cache.cached(sorted(held))
        with psycopg.connect(postgres.uri, autocommit=True) as conn:
            for term, postings in cached.items():
                want = conn.execute(
                    "SELECT document, tf, length FROM kb_moving.document_postings WHERE term = %s", (term,)
                ).fetchall()
                names = sparse.cache._names
                got = [
                    (names[d], int(t), int(n))
                    for d, t, n in zip(postings.documents, postings.tf, postings.lengths, strict=True)
                ]
                assert sorted(got) == sorted(want), term
    assert _counts(postgres.uri, "moving")["documents"] == 98


def test_a_killed_ingest_resumes_to_a_clean_ingests_counts(postgres: PostgresService, tmp_path: Path) -> None:
    corpus = write_records(tmp_path / "corpus.jsonl", _records(300))
    env = _env(postgres.uri)
    clean = [TOOLKERNEL, "kb", "ingest", str(corpus), "--embedder", EMBEDDER, "--quiet", "--batch", "16"]
    subprocess.run([*clean, "--kb", "clean"], env=env, check=True, timeout=300, capture_output=True)
    victim = subprocess.Popen(
        [*clean, "--kb", "killed"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while (
        _done_or_zero(postgres.uri, "killed") < 40 and time.monotonic() < deadline and victim.poll() is None
    ):
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    partial = _counts(postgres.uri, "killed")
    assert partial["documents"] < 300, "the ingest finished before it was killed: nothing was tested"
    # A first ingest builds the HNSW index once at its end: the killed one left none...
    assert partial["vector_index"] == 0
    subprocess.run([*clean, "--kb", "killed"], env=env, check=True, timeout=300, capture_output=True)
    want, got = _counts(postgres.uri, "clean"), _counts(postgres.uri, "killed")
    assert got == want  # ...and the rerun, which found chunks there, built it at its end
    assert got["vector_index"] == 1
    assert (got["chunks"], got["stats_match"], got["pending"]) == (got["distinct_chunks"], True, 0)
    assert got["term_counts_match"]


def _done_or_zero(url: str, name: str) -> int:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(f"SELECT count(*) FROM kb_{name}.documents WHERE state = 'done'").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0


@asynccontextmanager
async def _server(url: str, name: str, cwd: Path) -> AsyncIterator[Any]:
    """``toolkernel kb serve`` in its own working directory, knowing only the database URL."""
    from mcp.client import Client

    from toolkernel.transports import ClientTransportOptions

    options = ClientTransportOptions(env=_env(url), cwd=str(cwd))
    transport = make_kernel().client_transport([TOOLKERNEL, "kb", "serve", "--kb", name], options)
    async with Client(transport, mode="legacy") as client:
        yield client


async def _serve_during_ingest(
    primary: PostgresService, read_urls: list[str], tmp_path: Path, name: str
) -> None:
    """Servers search in a loop while a third process re-ingests with 10 % of documents changed."""
    records = _records(60)
    corpus = write_records(tmp_path / "corpus.jsonl", records)
    env = _env(primary.uri)
    base = [TOOLKERNEL, "kb", "ingest", str(corpus), "--kb", name, "--embedder", EMBEDDER, "--quiet"]
    with anyio.fail_after(300):
        await anyio.run_process(base, env=env, cwd=tmp_path)
    changed = frozenset(range(0, 60, 10))
    failures: list[str] = []
    searches = [0] * len(read_urls)
    seen_at: dict[tuple[int, int], float] = {}
    stop = anyio.Event()

    async def loop(index: int, url: str) -> None:
        async with _server(url, name, tmp_path / f"server-{index}") as client:
            ready.append(index)
            if len(ready) == len(read_urls):
                all_ready.set()
            while not stop.is_set():
                for i in changed:
                    result = await client.call_tool(
                        "search", {"query": f"quokka{i}", "top_k": 1, "mode": "sparse"}
                    )
                    searches[index] += 1
                    if result.is_error:
                        failures.append(str(result.content))
                        continue
                    hits = result.structured_content["results"]
                    if hits and f"quokka{i}" in hits[0]["text"]:
                        seen_at.setdefault((index, i), time.monotonic())
                        if len(seen_at) == len(read_urls) * len(changed):
                            all_seen.set()
                await anyio.sleep(0.05)

    ready: list[int] = []
    all_ready, all_seen = anyio.Event(), anyio.Event()
    writer_dir = tmp_path / "writer"
    writer_dir.mkdir()
    for index in range(len(read_urls)):
        (tmp_path / f"server-{index}").mkdir()
    async with anyio.create_task_group() as tasks:
        for index, url in enumerate(read_urls):
            tasks.start_soon(loop, index, url)
        with anyio.fail_after(120):
            await all_ready.wait()
        write_records(corpus, _records(60, changed))
        ingest_run = await anyio.run_process(base, env=env, cwd=writer_dir)
        assert ingest_run.returncode == 0
        ended = time.monotonic()
        with anyio.move_on_after(5):
            await all_seen.wait()
        stop.set()
    assert failures == []
    assert all(n > 0 for n in searches)
    late = {k: round(t - ended, 2) for k, t in seen_at.items() if t - ended > 5}
    assert len(seen_at) == len(read_urls) * len(changed), (
        f"not seen within 5 s: {len(seen_at)} of {len(read_urls) * len(changed)}"
    )
    assert late == {}


async def test_two_servers_on_other_hosts_serve_through_an_ingest(
    postgres: PostgresService, tmp_path: Path
) -> None:
    await _serve_during_ingest(postgres, [postgres.uri, postgres.uri], tmp_path, "live")


async def test_a_server_on_a_hot_standby_sees_the_primarys_ingest(
    postgres: PostgresService, tmp_path: Path
) -> None:
    import tempfile

    with (
        tempfile.TemporaryDirectory(prefix="toolkernel-standby-") as directory,
        postgres_standby(postgres, Path(directory)) as standby,
    ):
        await _serve_during_ingest(postgres, [postgres.uri, standby.uri], tmp_path, "replicated")


async def test_a_database_outage_fails_searches_quickly_and_heals(
    postgres: PostgresService, tmp_path: Path
) -> None:
    corpus = write_records(tmp_path / "corpus.jsonl", _records(10))
    env = _env(postgres.uri)
    command = [TOOLKERNEL, "kb", "ingest", str(corpus), "--kb", "outage", "--embedder", EMBEDDER, "--quiet"]
    with anyio.fail_after(300):
        await anyio.run_process(command, env=env)
    args = {"query": "river3 stone4", "top_k": 3}
    (tmp_path / "server").mkdir()
    async with _server(postgres.uri, "outage", tmp_path / "server") as client:
        assert not (await client.call_tool("search", args)).is_error
        stop_postgres(postgres)
        try:
            for _ in range(3):
                started = time.monotonic()
                with anyio.fail_after(10):
                    result = await client.call_tool("search", args)
                took = time.monotonic() - started
                assert result.is_error
                text = result.content[0].text
                assert "PostgreSQL database postgresql://" in text, text
                assert took < 2.0, took
        finally:
            start_postgres(postgres)
        result = await client.call_tool("search", args)
        assert not result.is_error, result.content
        assert result.structured_content["results"]


async def test_graph_mode_on_the_database_backend(postgres: PostgresService, tmp_path: Path) -> None:
    from toolkernel_graphrag import plugin as graphrag

    kernel = make_kernel(graphrag)
    corpus = write_records(tmp_path / "corpus.jsonl", _records(20))
    async with await _new_kb(postgres.uri, "graphkb", kernel) as kb:
        await ingest(kb, [str(corpus)])
        with pytest.raises(Exception, match="has no directory"):
            _ = kb.extensions["graph"].context.directory  # type: ignore[attr-defined]
        hits = await kb.search("river3 stone4", mode="graph", top_k=5)
        assert len(hits) == 5
    # A reader elsewhere loads the graph a writer saved, and follows the next save.
    reader = await KnowledgeBase.open("graphkb", kernel=make_kernel(graphrag), home=postgres.uri)
    async with reader:
        assert len(await reader.search("river3 stone4", mode="graph", top_k=5)) == 5
        write_records(corpus, _records(20, frozenset({4})))
        async with await KnowledgeBase.open(
            "graphkb", kernel=kernel, home=postgres.uri, writable=True
        ) as writer:
            await ingest(writer, [str(corpus)])
        await anyio.sleep(1.1)
        hits = await reader.search("quokka4", mode="graph", top_k=3)
        assert hits[0].chunk.document_id == "corpus.jsonl/doc-4"


def test_delete_drops_the_pgvector_index_of_a_knowledge_base_in_a_directory(
    corpus: Path, postgres: PostgresService, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store server (pgvector) is outside any directory: delete dropped the directory and
    left the knowledge base's table in the database."""
    from toolkernel import Kernel

    options = {"dsn": postgres.uri, "schema": "kb_delete"}
    store = ["--store", "pgvector", "--store-options", json.dumps(options)]
    for name in ("pg1", "pg2"):
        args = ["kb", "ingest", str(corpus), "--kb", name, "--embedder", EMBEDDER, "--quiet", *store]
        assert main([*args, "--no-extensions"]) == 0

    async def indexes() -> list[str]:
        opened = Kernel.from_config(None).vector_store("pgvector", **options)
        try:
            return sorted(await opened.list_indexes())
        finally:
            await opened.aclose()

    assert anyio.run(indexes) == ["pg1", "pg2"]
    capsys.readouterr()
    assert main(["kb", "delete", "--kb", "pg1", "--yes"]) == 0
    assert capsys.readouterr().err.strip().endswith("and the index 'pg1' in the pgvector store (its server)")
    assert anyio.run(indexes) == ["pg2"]
