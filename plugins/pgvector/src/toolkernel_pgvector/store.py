"""A :class:`~toolkernel.vectors.VectorStore` on PostgreSQL with the pgvector extension.

Each index is a table ``(id, embedding vector(n), metadata jsonb, document)`` in the
store's schema (one schema per tenant), listed in a catalog table ``toolkernel_indexes``
beside it. Searches use an HNSW or IVFFlat index (or an exact scan) with pgvector's
iterative scans, so a filtered query still returns ``top_k`` hits when enough rows match.
Connections come from a psycopg async pool with bounded waits; the store keeps the ones it
has just used for its next calls (see :meth:`PgVectorStore._acquire`).

A query is one statement and one round trip: the store remembers each index's catalog entry
and, per pooled connection, the search settings it last set, so a query sends only itself
unless its settings differ. Writes run in a transaction that locks the catalog entry.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector_async
from psycopg import errors, sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from toolkernel.store_helpers import check_delete, check_filter, score_from_distance
from toolkernel.vectors import (
    FilterInput,
    IndexExistsError,
    IndexInfo,
    IndexNotFoundError,
    MetadataValue,
    Metric,
    QueryResult,
    VectorInputError,
    VectorStoreError,
    check_index_args,
    check_options,
    check_top_k,
    check_upsert,
    check_vector,
    query_results,
)
from toolkernel_pgvector._where import NO_CONDITION, SUPPORTED_OPERATORS, where_clause
from toolkernel_pgvector.settings import PgVectorSettings

CATALOG = "toolkernel_indexes"
"""The table, in each tenant schema, that lists that schema's indexes."""

QUERY_OPTIONS = ("ef", "probes", "min_score")
"""Options :meth:`PgVectorStore.query` accepts."""

_OPS: dict[str, tuple[str, str]] = {
    "cosine": ("<=>", "vector_cosine_ops"),
    "euclidean": ("<->", "vector_l2_ops"),
    "dot": ("<#>", "vector_ip_ops"),
}
"""Metric → (pgvector distance operator, operator class for the ANN index)."""

KEEP_SECONDS = 10.0
"""How long the store keeps reusing a connection before handing it back to the pool."""

BULK_BUILD_ROWS = 1000
"""An upsert of at least this many rows into an empty index builds the ANN index after loading."""

_IDENT = re.compile(r"[^a-z0-9_]+")


class PgVectorStore:
    """pgvector-backed vector store; every method is safe to await concurrently."""

    name = "pgvector"
    supported_filter_operators: frozenset[str] = SUPPORTED_OPERATORS

    def __init__(self, settings: PgVectorSettings) -> None:
        """Keep validated ``settings``; nothing connects until the first call."""
        self.options = settings
        self._schema = sql.Identifier(self.options.schema_)
        self._catalog = sql.Identifier(self.options.schema_, CATALOG)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._opening = anyio.Lock()
        self._closed = False
        # Connections taken from the pool and kept between calls, and when each was taken.
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._taken: dict[psycopg.AsyncConnection[Any], float] = {}
        self._waiting = 0  # calls of this store waiting on the pool
        # Catalog entries read by queries, dropped by delete_index and refreshed when a query fails on them.
        self._tables: dict[str, _Table] = {}
        self._statements: dict[tuple[str, str, str, bool], bytes] = {}
        # Per pooled connection: the search settings (session level) it holds, so a query re-sends none.
        self._session: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], dict[str, str]] = (
            weakref.WeakKeyDictionary()
        )

    # -- connections ---------------------------------------------------------

    async def _get_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        """The open pool, made on first use after the extension, schema and catalog exist."""
        if self._closed:
            raise VectorStoreError("vector store 'pgvector' is closed")
        if self._pool is not None:  # the common case: no lock, no trip through the event loop
            return self._pool
        async with self._opening:
            if self._pool is None:
                await self._bootstrap()
                pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
                    self.options.dsn,
                    min_size=self.options.pool_min_size,
                    max_size=self.options.pool_max_size,
                    timeout=self.options.pool_timeout,
                    kwargs=self._connect_kwargs(),
                    configure=register_vector_async,
                    open=False,
                    name=f"toolkernel-pgvector:{self.options.schema_}",
                )
                try:
                    await pool.open(wait=True, timeout=self.options.connect_timeout)
                except psycopg.Error as exc:
                    await pool.close()
                    raise VectorStoreError(
                        f"vector store 'pgvector': cannot open the connection pool: {exc}"
                    ) from exc
                self._pool = pool
            return self._pool

    def _connect_kwargs(self) -> dict[str, Any]:
        """libpq options every connection gets: the connect timeout and a per-statement timeout.

        Pooled connections are in autocommit mode: a query is a single statement that needs no
        BEGIN / COMMIT, and writes open an explicit transaction (:meth:`_connection`).
        """
        return {
            "autocommit": True,
            "connect_timeout": max(1, math.ceil(self.options.connect_timeout)),
            "options": f"-c statement_timeout={int(self.options.statement_timeout * 1000)}",
        }

    async def _bootstrap(self) -> None:
        """Create the vector extension, the tenant schema and its catalog if they are missing."""
        try:
            conn = await psycopg.AsyncConnection.connect(self.options.dsn, **self._connect_kwargs())
        except psycopg.Error as exc:
            raise VectorStoreError(f"vector store 'pgvector': cannot connect: {exc}") from exc
        async with conn:
            try:
                # Concurrent stores bootstrapping the same database serialize on this lock.
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('toolkernel_pgvector'))")
                    # Look before creating: CREATE ... IF NOT EXISTS checks the CREATE privilege first,
                    # which a tenant role using a schema someone else prepared may not have.
                    cur = await conn.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'),"
                        " EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s),"
                        " to_regclass(%s) IS NOT NULL",
                        [self.options.schema_, self._catalog.as_string(conn)],
                    )
                    found = await cur.fetchone()
                    has_extension, has_schema, has_catalog = found if found is not None else (False,) * 3
                    if self.options.create_extension and not has_extension:
                        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                    if not has_schema:
                        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self._schema))
                    if not has_catalog:
                        await conn.execute(
                            sql.SQL(
                                "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY,"
                                " table_name text UNIQUE NOT NULL, dimension integer NOT NULL,"
                                " metric text NOT NULL, index_type text NOT NULL)"
                            ).format(self._catalog)
                        )
            except psycopg.Error as exc:
                raise VectorStoreError(f"vector store 'pgvector': cannot prepare schema: {exc}") from exc

    async def _acquire(self) -> psycopg.AsyncConnection[Any]:
        """A connection this store kept from an earlier call, or else one from the pool.

        Taking and returning a pooled connection costs ~28 µs of CPU, a tenth of the client's
        work for a millisecond query; a kept connection costs a list pop. Connections are kept
        only while no call of this store waits on the pool, and go back to it within
        :data:`KEEP_SECONDS`, so the pool's size limit, timeouts and recycling all still hold.
        """
        while self._idle:
            conn = self._idle.pop()
            if time.monotonic() - self._taken[conn] <= KEEP_SECONDS:
                return conn
            await self._give_back(conn)  # kept long enough: let the pool check, recycle or reuse it
        self._waiting += 1
        try:
            pool = await self._get_pool()
            conn = await pool.getconn()
        except PoolTimeout as exc:
            raise VectorStoreError(
                f"vector store 'pgvector': no connection free within {self.options.pool_timeout}s "
                "(raise pool_max_size or pool_timeout)"
            ) from exc
        finally:
            self._waiting -= 1
        self._taken[conn] = time.monotonic()
        return conn

    async def _release(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Keep ``conn`` for the next call if it is clean and may be kept; else give it to the pool.

        The pool discards a connection left broken or mid-transaction.
        """
        if (
            self._waiting
            or self._closed
            or conn.info.transaction_status is not TransactionStatus.IDLE
            or time.monotonic() - self._taken[conn] > KEEP_SECONDS
        ):
            await self._give_back(conn)
        else:
            self._idle.append(conn)

    async def _give_back(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Return ``conn`` to the pool (or close it if the pool is gone)."""
        del self._taken[conn]
        if self._pool is not None:
            await self._pool.putconn(conn)
        else:  # closed meanwhile
            await conn.close()

    @asynccontextmanager
    async def _connection(self, transaction: bool = True) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection (inside a transaction unless ``transaction`` is false).

        Database errors become :class:`VectorStoreError`.
        """
        conn = await self._acquire()
        try:
            if transaction:
                async with conn.transaction():
                    yield conn
            else:
                yield conn
        except psycopg.Error as exc:
            raise VectorStoreError(f"vector store 'pgvector': {type(exc).__name__}: {exc}") from exc
        finally:
            await self._release(conn)

    async def _table(self, conn: psycopg.AsyncConnection[Any], index: str) -> _Table:
        """The catalog entry of ``index``, locked against a concurrent drop for this transaction."""
        cur = await conn.execute(
            sql.SQL(
                "SELECT table_name, dimension, metric, index_type FROM {} WHERE name = %s FOR SHARE"
            ).format(self._catalog),
            [index],
        )
        row = await cur.fetchone()
        if row is None:
            self._tables.pop(index, None)
            raise IndexNotFoundError(index)
        table = _Table(self.options.schema_, row[0], dimension=row[1], metric=row[2], index_type=row[3])
        self._tables[index] = table
        return table

    async def _cached_table(self, index: str) -> _Table:
        """The remembered catalog entry of ``index``, read (without locking) when not yet known."""
        table = self._tables.get(index)
        if table is None:
            async with self._connection(transaction=False) as conn:
                table = await self._table(conn, index)
        return table

    # -- indexes -------------------------------------------------------------

    async def create_index(self, name: str, dimension: int, metric: Metric = "cosine") -> None:
        """Create the table and ANN index for ``name``; a no-op if it exists with the same shape."""
        check_index_args(name, dimension, metric)
        table_name = _table_name(name)
        table = sql.Identifier(self.options.schema_, table_name)
        async with self._connection() as conn:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"{self.options.schema_}.{name}"]
            )
            cur = await conn.execute(
                sql.SQL("SELECT dimension, metric FROM {} WHERE name = %s").format(self._catalog), [name]
            )
            row = await cur.fetchone()
            if row is not None:
                if (row[0], row[1]) != (dimension, metric):
                    existing = IndexInfo(name=name, dimension=row[0], metric=row[1], count=0)
                    raise IndexExistsError(name, existing)
                return
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id text PRIMARY KEY, embedding vector({}) NOT NULL,"
                    " metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb, document text)"
                ).format(table, sql.Literal(dimension))
            )
            ann = self._ann_index_sql(table_name, metric, self.options.index_type)
            if ann is not None:
                await conn.execute(ann)
            if metric == "cosine":
                await conn.execute(_zero_index_sql(self.options.schema_, table_name))
            await conn.execute(
                sql.SQL(
                    "INSERT INTO {} (name, table_name, dimension, metric, index_type)"
                    " VALUES (%s, %s, %s, %s, %s)"
                ).format(self._catalog),
                [name, table_name, dimension, metric, self.options.index_type],
            )

    async def _build_memory(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Give this transaction's index builds ``build_memory`` (``maintenance_work_mem``), if set."""
        if self.options.build_memory is not None:
            await conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, true)", [self.options.build_memory]
            )

    def _ann_index_sql(self, table_name: str, metric: str, index_type: str) -> sql.Composed | None:
        """``CREATE INDEX`` of ``index_type`` on ``table_name`` (``None`` for exact search)."""
        table = sql.Identifier(self.options.schema_, table_name)
        name = sql.Identifier(_ann_name(table_name))
        opclass = sql.SQL(_OPS[metric][1])
        if index_type == "hnsw":
            return sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (embedding {}) WITH (m = {}, ef_construction = {})"
            ).format(
                name,
                table,
                opclass,
                sql.Literal(self.options.hnsw_m),
                sql.Literal(self.options.hnsw_ef_construction),
            )
        if index_type == "ivfflat":
            return sql.SQL("CREATE INDEX {} ON {} USING ivfflat (embedding {}) WITH (lists = {})").format(
                name, table, opclass, sql.Literal(self.options.ivfflat_lists)
            )
        return None

    async def reindex(self, name: str) -> None:
        """Rebuild ``name``'s ANN index from its current rows (IVFFlat learns its lists from the data)."""
        async with self._connection() as conn:
            table = await self._table(conn, name)
            await self._build_memory(conn)
            if table.metric == "cosine":  # tables made before zero vectors had an index of their own
                await conn.execute(_zero_index_sql(self.options.schema_, table.name))
            await conn.execute(sql.SQL("REINDEX TABLE {}").format(table.ident))

    async def describe_index(self, name: str) -> IndexInfo:
        """Dimension, metric and row count of ``name``."""
        async with self._connection() as conn:
            table = await self._table(conn, name)
            cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table.ident))
            row = await cur.fetchone()
        count = row[0] if row is not None else 0
        return IndexInfo(name=name, dimension=table.dimension, metric=table.metric, count=count)

    async def list_indexes(self) -> list[str]:
        """Every index name in this store's schema, sorted."""
        async with self._connection() as conn:
            cur = await conn.execute(sql.SQL("SELECT name FROM {} ORDER BY name").format(self._catalog))
            return sorted(row[0] for row in await cur.fetchall())

    async def delete_index(self, name: str) -> None:
        """Drop ``name``'s table and its catalog entry."""
        async with self._connection() as conn:
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE name = %s RETURNING table_name").format(self._catalog), [name]
            )
            row = await cur.fetchone()
            if row is None:
                raise IndexNotFoundError(name)
            await conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(self.options.schema_, row[0]))
            )
        self._tables.pop(name, None)

    # -- records -------------------------------------------------------------

    async def upsert(
        self,
        index: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadata: Sequence[Mapping[str, MetadataValue]] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> None:
        """Insert or replace rows by id in one transaction, so a failing batch writes nothing."""
        async with self._connection() as conn:
            table = await self._table(conn, index)
            rows = check_upsert(table.dimension, ids, vectors, metadata, documents)
            if not rows[0]:
                return
            # A large first load is faster, and IVFFlat learns real lists, if the ANN index is built after it.
            rebuild = None
            if len(rows[0]) >= BULK_BUILD_ROWS:
                rebuild = self._ann_index_sql(table.name, table.metric, table.index_type)
            if rebuild is not None:
                # Writers that might rebuild serialize here, so two never race to drop the index.
                await conn.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(table.ident))
                cur = await conn.execute(sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(table.ident))
                empty = await cur.fetchone()
                if empty is not None and empty[0]:
                    ann = sql.Identifier(self.options.schema_, _ann_name(table.name))
                    await conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(ann))
                else:
                    rebuild = None
            # Bulk-load through COPY into a temporary table, then merge: far faster than row INSERTs.
            await conn.execute(
                "CREATE TEMPORARY TABLE IF NOT EXISTS _tk_upsert (id text, embedding vector, metadata jsonb,"
                " document text) ON COMMIT DELETE ROWS"
            )
            async with conn.cursor().copy(
                "COPY _tk_upsert (id, embedding, metadata, document) FROM STDIN"
            ) as copy:
                for id_, vector, meta, doc in zip(*rows, strict=True):
                    await copy.write_row((id_, Vector(vector), Jsonb(meta), doc))
            await conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, embedding, metadata, document)"
                    " SELECT id, embedding, metadata, document FROM _tk_upsert"
                    " ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding,"
                    " metadata = EXCLUDED.metadata, document = EXCLUDED.document"
                ).format(table.ident)
            )
            if rebuild is not None:
                await self._build_memory(conn)
                await conn.execute(rebuild)

    async def query(
        self,
        index: str,
        vector: Sequence[float],
        top_k: int = 10,
        filter: FilterInput | None = None,
        include_vectors: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> list[QueryResult]:
        """The ``top_k`` best rows matching ``filter``; options ``ef``, ``probes``, ``min_score``.

        One statement on an autocommit connection: the index's catalog entry is remembered, and
        the search settings are sent only when the connection does not hold them already. If the
        remembered entry is stale (another process dropped or recreated the index), the failing
        query refreshes it from the catalog and runs once more.
        """
        table = await self._cached_table(index)
        check_top_k(top_k)
        opts = _query_options(check_options(self.name, options, QUERY_OPTIONS))
        parsed = check_filter(self, filter)
        condition, params = where_clause(parsed)
        for attempt in range(2):
            checked = check_vector(vector, table.dimension, "vector")
            query_vector = Vector(checked)
            cosine = table.metric == "cosine"
            try:
                if cosine and not any(checked):  # a query with no direction scores 0 against everything
                    rows = await self._zero_query(table, condition, params, top_k, include_vectors)
                    break
                statement = self._search_statement(table, condition, include_vectors)
                args = [query_vector, *params, top_k, *([*params, top_k] if cosine else [])]
                # A filter needs an iterative scan to keep top_k hits. Without one, a plain scan
                # yields ef_search (>= top_k) rows and costs less; only if it comes up short
                # (a tiny index, many dead rows, an ef below top_k) does the query iterate.
                rows = await self._search(statement, args, self._search_settings(table, top_k, opts, parsed))
                nearest = sum(row[1] is not None for row in rows)  # zero vectors come without a distance
                if parsed is None and nearest < top_k and table.index_type != "exact":
                    rows = await self._search(
                        statement, args, self._search_settings(table, top_k, opts, True)
                    )
                if cosine:
                    rows = _zero_vectors_scored(rows, top_k)
                break
            except VectorStoreError as exc:
                stale = isinstance(exc.__cause__, errors.UndefinedTable | errors.DataException)
                if attempt or not stale:
                    raise
                self._tables.pop(index, None)
                table = await self._cached_table(index)
        hits: list[dict[str, Any]] = []
        min_score = opts.get("min_score")
        for row in rows:
            score = score_from_distance(table.metric, row[1], squared_l2=False, negated_dot=True)
            if min_score is not None and score < min_score:
                break
            hits.append(
                {
                    "id": row[0],
                    "score": score,
                    "metadata": row[2],
                    "document": row[3],
                    "vector": row[4].to_list() if include_vectors else None,
                }
            )
        return query_results(hits)

    async def _zero_query(
        self, table: _Table, condition: sql.Composable, params: list[Any], top_k: int, include_vectors: bool
    ) -> list[Any]:
        """Up to ``top_k`` rows matching ``condition``, at cosine distance 1: a zero query's answer."""
        statement = sql.SQL(
            "SELECT id, 1.0::float8 AS distance, metadata, document{} FROM {} WHERE {} ORDER BY id LIMIT %s"
        ).format(sql.SQL(", embedding" if include_vectors else ""), table.ident, condition)
        async with self._connection(transaction=False) as conn:
            cur = await conn.execute(statement, [*params, top_k])
            return await cur.fetchall()

    def _search_statement(
        self, table: _Table, condition: sql.Composable, include_vectors: bool
    ) -> sql.Composed | bytes:
        """The nearest-neighbour ``SELECT`` on ``table``: bound vector, filter parameters and limit.

        Without a filter it is the same text every time, composed once per table and metric.
        """
        key = (table.name, table.metric, table.index_type, include_vectors)
        if condition is NO_CONDITION and key in self._statements:
            return self._statements[key]
        statement = sql.SQL(
            "SELECT id, embedding {} %s AS distance, metadata, document{} FROM {} WHERE {} "
            "ORDER BY distance LIMIT %s"
        ).format(
            sql.SQL(_OPS[table.metric][0]),
            sql.SQL(", embedding" if include_vectors else ""),
            table.ident,
            condition,
        )
        if table.index_type == "ivfflat":
            # IVFFlat's iterative scan (relaxed order) may return rows slightly out of order:
            # sort them again. HNSW's strict order and exact scans need no second sort (~20 µs).
            statement = sql.SQL("WITH hits AS MATERIALIZED ({}) SELECT * FROM hits ORDER BY distance").format(
                statement
            )
        if table.metric == "cosine":
            # pgvector's ANN indexes leave zero vectors out (and an exact scan gives them a NaN
            # distance); the contract scores them 0. Their partial index finds them in the same
            # statement, marked by a NULL distance.
            statement = sql.SQL(
                "({}) UNION ALL (SELECT id, NULL::float8, metadata, document{} FROM {} "
                "WHERE vector_norm(embedding) = 0 AND ({}) ORDER BY id LIMIT %s)"
            ).format(statement, sql.SQL(", embedding" if include_vectors else ""), table.ident, condition)
        if condition is NO_CONDITION:
            # Spelled out once: psycopg would otherwise rebuild the text from its parts on every execute.
            self._statements[key] = statement.as_bytes(None)
            return self._statements[key]
        return statement

    async def _search(
        self, statement: sql.Composed | bytes, args: list[Any], settings: dict[str, str]
    ) -> list[Any]:
        """Run a search on a connection given ``settings``; errors become :class:`VectorStoreError`."""
        async with self._connection(transaction=False) as conn:
            await self._tune_search(conn, settings)
            cur = await conn.execute(statement, args)
            return await cur.fetchall()

    def _search_settings(
        self, table: _Table, top_k: int, opts: dict[str, Any], iterate: object
    ) -> dict[str, str]:
        """The HNSW / IVFFlat search parameters of a query on ``table``; iterative scans if ``iterate``."""
        if table.index_type == "hnsw":
            # A plain HNSW scan yields at most ef_search rows: size it to top_k by default.
            return {
                "hnsw.ef_search": str(opts.get("ef", min(1000, max(40, 2 * top_k)))),
                "hnsw.iterative_scan": "strict_order" if iterate else "off",
            }
        if table.index_type == "ivfflat":
            default = self.options.ivfflat_probes or max(1, round(math.sqrt(self.options.ivfflat_lists)))
            # Iterating probes further lists until top_k rows match (the query re-sorts what it gets).
            return {
                "ivfflat.probes": str(opts.get("probes", default)),
                "ivfflat.iterative_scan": "relaxed_order" if iterate else "off",
            }
        return {}

    async def _tune_search(self, conn: psycopg.AsyncConnection[Any], settings: dict[str, str]) -> None:
        """Give ``conn`` these session settings, in one statement, unless it already holds them.

        Only this store's queries use its pool, and every query states all the settings of its
        index type, so values left on a connection by an earlier query are never relied on.
        """
        held = self._session.get(conn)
        if held is None:
            held = self._session[conn] = {}
        changed = [(key, value) for key, value in settings.items() if held.get(key) != value]
        if not changed:
            return
        held.clear()  # unknown until the statement succeeds
        calls = sql.SQL(", ").join(sql.SQL("set_config(%s, %s, false)") for _ in changed)
        await conn.execute(sql.SQL("SELECT {}").format(calls), [x for pair in changed for x in pair])
        held.update(settings)

    async def delete(
        self, index: str, ids: Sequence[str] | None = None, filter: FilterInput | None = None
    ) -> None:
        """Delete rows by id, by filter, or ids that also match the filter."""
        async with self._connection() as conn:
            table = await self._table(conn, index)
            wanted, parsed = check_delete(self, ids, filter)
            condition, params = where_clause(parsed)
            if wanted is not None:
                condition = sql.SQL("id = ANY(%s) AND ({})").format(condition)
                params = [wanted, *params]
            await conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(table.ident, condition), params)

    async def count(self, index: str, filter: FilterInput | None = None) -> int:
        """How many rows ``index`` holds, or how many match ``filter``."""
        condition, params = where_clause(check_filter(self, filter))
        async with self._connection() as conn:
            table = await self._table(conn, index)
            cur = await conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table.ident, condition), params
            )
            row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    async def aclose(self) -> None:
        """Close the connection pool; the store cannot be used afterwards."""
        self._closed = True
        async with self._opening:
            if self._pool is not None:
                while self._idle:
                    await self._give_back(self._idle.pop())
                await self._pool.close()
                self._pool = None


class _Table:
    """An index's table and shape, as read from the catalog."""

    __slots__ = ("dimension", "ident", "index_type", "metric", "name")

    def __init__(self, schema: str, name: str, *, dimension: int, metric: Metric, index_type: str) -> None:
        """Remember a catalog row of ``schema``."""
        self.name = name
        self.ident = sql.Identifier(schema, name)
        self.dimension = dimension
        self.metric = metric
        self.index_type = index_type


def _table_name(name: str) -> str:
    """A readable, collision-free table name for index ``name``: a slug plus a hash of the full name."""
    slug = _IDENT.sub("_", name.lower()).strip("_")[:40]
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"tk_{slug}_{digest}" if slug else f"tk_{digest}"


def _zero_vectors_scored(rows: list[Any], top_k: int) -> list[Any]:
    """A cosine search's rows best first, zero vectors (NULL distance) at distance 1, NaN ones dropped."""
    scored = [row if row[1] is not None else (row[0], 1.0, *row[2:]) for row in rows]
    return sorted((row for row in scored if not math.isnan(row[1])), key=lambda row: row[1])[:top_k]


def _zero_index_sql(schema: str, table_name: str) -> sql.Composed:
    """A partial index of a cosine table's zero vectors, which the ANN index leaves out."""
    return sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (id) WHERE vector_norm(embedding) = 0").format(
        sql.Identifier(f"{table_name}_zero"), sql.Identifier(schema, table_name)
    )


def _ann_name(table_name: str) -> str:
    """The name of a table's ANN index, fixed so a bulk load can drop and rebuild it."""
    return f"{table_name}_ann"


def _query_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Check the types and ranges of ``ef``, ``probes`` and ``min_score``."""
    for key in ("ef", "probes"):
        if key in opts:
            value = opts[key]
            high = 1000 if key == "ef" else 32768
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise VectorInputError(
                    f"query option {key!r} must be an integer from 1 to {high}, got {value!r}"
                )
    if "min_score" in opts:
        value = opts["min_score"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise VectorInputError(f"query option 'min_score' must be a finite number, got {value!r}")
    return opts
