"""Searches of a knowledge base in PostgreSQL: BM25 over the postings tables, and pgvector HNSW.

BM25 is scored in SQL exactly as bm25s's ``lucene`` method scores the embedded index:
``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` and ``tf / (tf + k1 * (1 - b + b * len / avg_len))``,
summed over the query's terms (a repeated term counts again), with ``N`` and the lengths from
the ``stats`` row of the same snapshot. Documents are ranked on their own terms and shown by
their best-scoring chunk, as the embedded :class:`~toolkernel_rag.sparse.SparseIndex` does;
a filter is tested on chunks with the kernel's reference :func:`~toolkernel.filters.matches`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import numpy as np

from toolkernel.filters import coerce_filter
from toolkernel.knowledge import ScoredChunk
from toolkernel.vectors import QueryResult, query_results
from toolkernel_rag.layout import SparseSpec
from toolkernel_rag.postgres.schema import register_vector
from toolkernel_rag.sparse import Analyzer

if TYPE_CHECKING:
    from toolkernel.vectors import FilterInput
    from toolkernel_rag.postgres.catalog import PgCatalog

_SCORE = (
    "sum(q.n * ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * p.tf "
    "/ (%(k1)s * (1 - %(b)s + %(b)s * p.length / st.avg) + p.tf))"
)

_DOCUMENTS = (
    "WITH q(term, n) AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[])), "
    "st AS (SELECT documents::float8 AS n, document_length::float8 / greatest(documents, 1) AS avg "
    "FROM {s}.stats), "
    "df AS (SELECT p.term, count(*)::float8 AS df FROM {s}.document_postings p JOIN q USING (term) "
    "GROUP BY p.term) "
    f"SELECT p.document, {_SCORE} AS score "
    "FROM {s}.document_postings p JOIN q USING (term) JOIN df USING (term) CROSS JOIN st "
    "GROUP BY p.document ORDER BY score DESC, p.document LIMIT %(limit)s"
)

_CHUNKS = (
    "WITH q(term, n) AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[])), "
    "st AS (SELECT chunks::float8 AS n, chunk_length::float8 / greatest(chunks, 1) AS avg FROM {s}.stats), "
    "df AS (SELECT p.term, count(*)::float8 AS df FROM {s}.chunk_postings p JOIN q USING (term) "
    "GROUP BY p.term), "
    "c AS (SELECT rowid, id, document_id, metadata FROM {s}.chunks WHERE document_id = ANY(%(documents)s)), "
    f"sc AS (SELECT p.chunk, {_SCORE} AS score "
    "FROM {s}.chunk_postings p JOIN q USING (term) JOIN df USING (term) CROSS JOIN st "
    "WHERE p.chunk IN (SELECT rowid FROM c) GROUP BY p.chunk) "
    "SELECT c.id, c.document_id, {metadata}, COALESCE(sc.score, 0) AS score "
    "FROM c LEFT JOIN sc ON sc.chunk = c.rowid ORDER BY c.document_id, score DESC, c.rowid"
)


class PgSparse:
    """BM25 over a knowledge base's postings tables; nothing to load, so nothing to refresh."""

    def __init__(self, catalog: PgCatalog, spec: SparseSpec) -> None:
        self.catalog = catalog
        self.spec = spec
        self.analyzer = Analyzer(spec.language)

    def terms(self, text: str) -> str:
        """The terms of ``text`` as the catalog stores them (space-separated)."""
        return " ".join(self.analyzer.terms(text))

    def refresh(self, catalog: object) -> None:
        """Every search reads the committed postings: there is no index to bring up to date."""

    def search(
        self,
        query: str,
        top_k: int,
        allowed: Callable[[Mapping[str, Any]], bool] | None = None,
        loaded: object = None,
    ) -> list[tuple[str, ScoredChunk]]:
        """The ``top_k`` best documents by BM25 as ``(document id, best chunk)``, filtered by ``allowed``.

        ``loaded`` is for the embedded index's readers; every search here reads the database.
        """
        counted = Counter(self.analyzer.terms(query))
        if not counted or top_k <= 0:
            return []
        params: dict[str, Any] = {
            "terms": list(counted),
            "counts": list(counted.values()),
            "k1": self.spec.k1,
            "b": self.spec.b,
        }
        limit = top_k if allowed is None else 4 * top_k
        catalog = self.catalog
        with catalog.db.connection() as conn:
            while True:
                documents = conn.execute(catalog._sql(_DOCUMENTS), {**params, "limit": limit}).fetchall()
                if not documents:
                    return []
                chunk_sql = _CHUNKS.replace("{metadata}", "NULL" if allowed is None else "c.metadata")
                rows = conn.execute(
                    catalog._sql(chunk_sql), {**params, "documents": [d for d, _ in documents]}
                ).fetchall()
                best: dict[str, str] = {}
                for chunk_id, document_id, metadata, _ in rows:
                    if document_id not in best and (allowed is None or allowed(metadata)):
                        best[document_id] = chunk_id
                out = [(d, ScoredChunk(best[d], float(score))) for d, score in documents if d in best][:top_k]
                if len(out) == top_k or len(documents) < limit:
                    return out
                limit *= 4


class PgVectors:
    """Dense search over the ``embedding`` column of the chunks table (pgvector HNSW, cosine).

    The vectors are written with their chunks by the catalog, in the same transaction, so
    this is only the reading half of a :class:`~toolkernel.vectors.VectorStore`.
    """

    name = "pgvector"

    def __init__(self, catalog: PgCatalog) -> None:
        from toolkernel_pgvector.where import SUPPORTED_OPERATORS

        self.catalog = catalog
        self.supported_filter_operators = SUPPORTED_OPERATORS

    async def create_index(self, index: str, dimension: int, metric: str) -> None:
        """The chunks table is the index, made with the knowledge base."""

    async def query(
        self, index: str, vector: list[float], *, top_k: int, filter: FilterInput | None = None
    ) -> list[QueryResult]:
        """The ``top_k`` nearest chunks (cosine similarity, higher first) that pass ``filter``."""
        return await anyio.to_thread.run_sync(self._query, vector, top_k, filter)

    def _query(self, vector: list[float], top_k: int, filter: FilterInput | None) -> list[QueryResult]:
        from psycopg import sql

        from toolkernel_pgvector.where import where_clause

        condition, params = where_clause(coerce_filter(filter))
        catalog = self.catalog
        statement = sql.SQL(
            "SELECT id, document_id, 1 - (embedding <=> %s) AS score FROM {}.chunks "
            "WHERE embedding IS NOT NULL AND ({}) ORDER BY embedding <=> %s LIMIT %s"
        ).format(sql.Identifier(catalog.schema), condition)
        query = np.asarray(vector, dtype=np.float32)
        with catalog.db.connection() as conn:
            register_vector(conn)
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, false), "
                "set_config('hnsw.iterative_scan', %s, false)",
                (str(min(1000, max(40, 2 * top_k))), "off" if filter is None else "strict_order"),
            )
            rows = conn.execute(statement, [query, *params, query, top_k]).fetchall()
        return query_results(
            [{"id": r[0], "score": float(r[2]), "metadata": {"document_id": r[1]}} for r in rows]
        )

    async def count(self, index: str) -> int:
        """Chunks that carry a vector."""
        return await anyio.to_thread.run_sync(self._count)

    def _count(self) -> int:
        with self.catalog.db.connection() as conn:
            row = conn.execute(
                self.catalog._sql("SELECT count(*) FROM {s}.chunks WHERE embedding IS NOT NULL")
            ).fetchone()
        return int(row[0]) if row else 0

    async def aclose(self) -> None:
        """The catalog owns the connections."""
