"""Searches of a knowledge base in PostgreSQL: BM25 over the postings tables, and pgvector HNSW.

BM25 is scored exactly as bm25s's ``lucene`` method scores the embedded index:
``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` and ``tf / (tf + k1 * (1 - b + b * len / avg_len))``,
summed over the query's terms (a repeated term counts again), with ``N`` and the lengths from
the ``stats`` row of the same snapshot. Documents are ranked on their own terms and shown by
their best-scoring chunk, as the embedded :class:`~toolkernel_rag.sparse.SparseIndex` does;
a filter is tested on chunks with the kernel's reference :func:`~toolkernel.filters.matches`.

Documents are scored in the server with numpy, from the document postings of the query's
terms that the server's :class:`~toolkernel_rag.postgres.postings_cache.PostingsCache` holds
for the current generation and those one statement fetches (with the generation and the
totals of the same snapshot); a second statement scores the chunks of the best documents and
says whether the generation is still the same. A search that races a writer three times is
scored by the single SQL statement instead. Ties are broken by document id in code-point
order (``COLLATE "C"``), the same both ways.
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import numpy as np

from toolkernel.filters import coerce_filter
from toolkernel.knowledge import ScoredChunk
from toolkernel.vectors import QueryResult, query_results
from toolkernel_rag.layout import SparseSpec
from toolkernel_rag.postgres.postings_cache import PostingsCache, Snapshot
from toolkernel_rag.postgres.schema import register_vector
from toolkernel_rag.sparse import Analyzer

if TYPE_CHECKING:
    import psycopg

    from toolkernel.vectors import FilterInput
    from toolkernel_rag.postgres.catalog import PgCatalog

_WEIGHTS = (
    "SELECT q.term, q.n * ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) AS w, st.avg "
    "FROM q CROSS JOIN {stats} st CROSS JOIN LATERAL ({df}) AS df WHERE df.df > 0"
)
"""Each query term's weight (its count in the query times its idf) and the mean length, once per term."""

_DF = (
    "SELECT sum(f.n)::float8 AS df FROM {s}.term_counts f WHERE f.postings = '{postings}' AND f.term = q.term"
)
"""A term's document frequency: the sum of its few rows in ``term_counts``."""

_DF_COUNTED = "SELECT count(*)::float8 AS df FROM {s}.{postings}_postings p WHERE p.term = q.term"
"""The same counted over the term's postings, for a knowledge base no writer has given ``term_counts`` yet."""

_SCORE = "sum(w.w * p.tf / (%(k1)s * (1 - %(b)s + %(b)s * p.length / w.avg) + p.tf))"
"""BM25 summed over a row's matching terms (``q.n * idf * tf / (tf + k1 * (1 - b + b * len / avg))``)."""

_SEARCH_TEMPLATE = (
    "WITH q(term, n) AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[])), "
    "dst AS (SELECT documents::float8 AS n, document_length::float8 / greatest(documents, 1) AS avg "
    "FROM {s}.stats), "
    "cst AS (SELECT chunks::float8 AS n, chunk_length::float8 / greatest(chunks, 1) AS avg FROM {s}.stats), "
    "dw AS MATERIALIZED ({document_weights}), "
    "cw AS MATERIALIZED ({chunk_weights}), "
    # Documents ranked on their own terms. Every lookup of postings is a LATERAL subquery
    # fenced by OFFSET 0: an index scan per query term, never a merge join over the whole index
    # (which the planner picks for a dozen terms when it misjudges the size of dw).
    "top AS MATERIALIZED (SELECT p.document, {_SCORE} AS score FROM dw w CROSS JOIN LATERAL "
    "(SELECT document, tf, length FROM {s}.document_postings p WHERE p.term = w.term OFFSET 0) AS p "
    'GROUP BY p.document ORDER BY score DESC, p.document COLLATE "C" LIMIT %(limit)s), '
    # ...and their chunks scored on the chunk index, a (term, chunk) lookup each.
    "c AS MATERIALIZED (SELECT rowid, id, document_id, metadata FROM {s}.chunks "
    "WHERE document_id IN (SELECT document FROM top)), "
    "sc AS (SELECT p.chunk, {_SCORE} AS score FROM c CROSS JOIN cw w CROSS JOIN LATERAL "
    "(SELECT chunk, tf, length FROM {s}.chunk_postings p WHERE p.term = w.term AND p.chunk = c.rowid "
    "OFFSET 0) AS p GROUP BY p.chunk) "
    "SELECT top.document, top.score, c.id, {metadata} "
    "FROM top LEFT JOIN c ON c.document_id = top.document LEFT JOIN sc ON sc.chunk = c.rowid "
    'ORDER BY top.score DESC, top.document COLLATE "C", COALESCE(sc.score, 0) DESC, c.rowid'
)
"""The ``limit`` best documents by BM25, each with its chunks best first: one statement, one snapshot."""


def _search(df: str) -> str:
    """:data:`_SEARCH_TEMPLATE` with each term's document frequency found by ``df``."""
    weights = {
        f"{level}_weights": _WEIGHTS.replace("{stats}", stats).replace(
            "{df}", df.replace("{postings}", level)
        )
        for level, stats in (("document", "dst"), ("chunk", "cst"))
    }
    return (
        _SEARCH_TEMPLATE.replace("{_SCORE}", _SCORE)
        .replace("{document_weights}", weights["document_weights"])
        .replace("{chunk_weights}", weights["chunk_weights"])
    )


_SEARCH = _search(_DF)
_SEARCH_COUNTED = _search(_DF_COUNTED)

_POSTINGS = (
    "SELECT s.generation, s.documents::float8, s.document_length::float8 / greatest(s.documents, 1), "
    "p.term, p.documents, p.tfs, p.lengths FROM {s}.stats s LEFT JOIN LATERAL "
    "(SELECT term, array_agg(document) AS documents, array_agg(tf) AS tfs, array_agg(length) AS lengths "
    "FROM {s}.document_postings WHERE term = ANY(%(terms)s::text[]) GROUP BY term) AS p ON true"
)
"""The generation, the document count and mean length, and the document postings of some terms:
one statement, one snapshot."""

_CHUNKS_TEMPLATE = (
    "WITH q(term, n) AS (SELECT * FROM unnest(%(terms)s::text[], %(counts)s::int[])), "
    "cst AS (SELECT chunks::float8 AS n, chunk_length::float8 / greatest(chunks, 1) AS avg FROM {s}.stats), "
    "cw AS MATERIALIZED ({chunk_weights}), "
    "c AS MATERIALIZED (SELECT rowid, id, document_id, metadata, "
    "count(*) OVER (PARTITION BY document_id) AS siblings FROM {s}.chunks "
    "WHERE document_id = ANY(%(documents)s::text[])), "
    # Only a document of several chunks needs them scored (a lookup per term over them all).
    "sc AS (SELECT p.chunk, {_SCORE} AS score FROM cw w CROSS JOIN LATERAL "
    "(SELECT chunk, tf, length FROM {s}.chunk_postings p WHERE p.term = w.term "
    "AND p.chunk = ANY(ARRAY(SELECT rowid FROM c WHERE siblings > 1)) OFFSET 0) AS p GROUP BY p.chunk) "
    "SELECT s.generation, c.document_id, c.id, {metadata} FROM {s}.stats s "
    "LEFT JOIN (c LEFT JOIN sc ON sc.chunk = c.rowid) ON true "
    "ORDER BY c.document_id, COALESCE(sc.score, 0) DESC, c.rowid"
)
"""The chunks of some documents, each document's best first by its chunk-level BM25, and the
generation of the same snapshot."""


def _chunks(df: str) -> str:
    weights = _WEIGHTS.replace("{stats}", "cst").replace("{df}", df.replace("{postings}", "chunk"))
    return _CHUNKS_TEMPLATE.replace("{_SCORE}", _SCORE).replace("{chunk_weights}", weights)


_CHUNKS = _chunks(_DF)
_CHUNKS_COUNTED = _chunks(_DF_COUNTED)

ATTEMPTS = 3
"""Searches scored from postings before a search that keeps racing writers is scored in SQL."""


_SESSION_SETTINGS: weakref.WeakKeyDictionary[psycopg.Connection, tuple[str, str]] = (
    weakref.WeakKeyDictionary()
)
"""The HNSW settings each pooled connection's session holds, so a search sets them only on change."""


class PgSparse:
    """BM25 over a knowledge base's postings tables, with the server's cache of term postings."""

    def __init__(self, catalog: PgCatalog, spec: SparseSpec, cache: PostingsCache | None = None) -> None:
        self.catalog = catalog
        self.spec = spec
        self.analyzer = Analyzer(spec.language)
        self.cache = cache if cache is not None else PostingsCache()

    def terms(self, text: str) -> str:
        """The terms of ``text`` as the catalog stores them (space-separated)."""
        return " ".join(self.analyzer.terms(text))

    def refresh(self, catalog: object) -> None:
        """Every search reads the generation: the cache is dropped by the search that sees a new one."""

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
        catalog = self.catalog
        chunks = catalog._sql(_CHUNKS if catalog.has_term_counts() else _CHUNKS_COUNTED).replace(
            "{metadata}", "NULL" if allowed is None else "c.metadata"
        )
        with catalog.db.connection() as conn:
            for _ in range(ATTEMPTS):
                snapshot, documents, average = self._snapshot(conn, list(counted))
                if snapshot is None:
                    continue
                scores = self._scores(snapshot, counted, documents, average)
                limit = top_k if allowed is None else 4 * top_k
                while True:
                    ranked = _best(scores, snapshot.names, limit)
                    params = {
                        "terms": list(counted),
                        "counts": list(counted.values()),
                        "k1": self.spec.k1,
                        "b": self.spec.b,
                        "documents": [d for d, _ in ranked],
                    }
                    rows = conn.execute(chunks, params).fetchall()
                    if rows[0][0] != snapshot.generation:
                        break  # a writer committed meanwhile: score again
                    best: dict[str, str] = {}
                    for _, document_id, chunk_id, metadata in rows:
                        if chunk_id is None or document_id in best:
                            continue
                        if allowed is None or allowed(metadata):
                            best[document_id] = chunk_id
                    out = [(d, ScoredChunk(best[d], score)) for d, score in ranked if d in best]
                    if len(out) >= top_k or len(ranked) < limit:
                        return out[:top_k]
                    limit *= 4
        return self.search_in_sql(query, top_k, allowed)

    def _snapshot(self, conn: psycopg.Connection, terms: list[str]) -> tuple[Snapshot | None, float, float]:
        """The postings of ``terms`` (cached, and fetched with the totals), or ``None`` when the
        cached ones turned out to be of an older generation (they are dropped)."""
        held, cached = self.cache.cached(terms)
        fetch = [t for t in terms if t not in cached]
        rows = conn.execute(self.catalog._sql(_POSTINGS), {"terms": fetch}).fetchall()
        generation, documents, average = rows[0][0], rows[0][1], rows[0][2]
        fetched = [(r[3], r[4], r[5], r[6]) for r in rows if r[3] is not None]
        return self.cache.add(int(generation), fetched, cached, held), float(documents), float(average)

    def _scores(
        self, snapshot: Snapshot, counted: Counter[str], documents: float, average: float
    ) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Every numbered document's BM25 for the query, summed term by term in the query's order
        with the same operations, in the same order, as the SQL statement."""
        k1, b = self.spec.k1, self.spec.b
        numbers: list[np.ndarray[Any, Any]] = []
        parts: list[np.ndarray[Any, Any]] = []
        for term, n in counted.items():
            postings = snapshot.postings.get(term)
            if postings is None or not len(postings):
                continue
            df = float(len(postings))
            weight = n * math.log(1 + (documents - df + 0.5) / (df + 0.5))
            tf = postings.tf.astype(np.float64)
            lengths = postings.lengths.astype(np.float64)
            parts.append(weight * tf / (k1 * (1 - b + b * lengths / average) + tf))
            numbers.append(postings.documents)
        if not numbers:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(
            np.bincount(np.concatenate(numbers), weights=np.concatenate(parts)), dtype=np.float64
        )

    def search_in_sql(
        self, query: str, top_k: int, allowed: Callable[[Mapping[str, Any]], bool] | None = None
    ) -> list[tuple[str, ScoredChunk]]:
        """:meth:`search` scored by one SQL statement over every posting of the query's terms."""
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
        search = _SEARCH if catalog.has_term_counts() else _SEARCH_COUNTED
        statement = catalog._sql(search).replace("{metadata}", "NULL" if allowed is None else "c.metadata")
        with catalog.db.connection() as conn:
            while True:
                rows = conn.execute(statement, {**params, "limit": limit}).fetchall()
                ranked: dict[str, float] = {}
                best: dict[str, str] = {}
                for document_id, score, chunk_id, metadata in rows:
                    ranked.setdefault(document_id, score)
                    if (
                        chunk_id is not None
                        and document_id not in best
                        and (allowed is None or allowed(metadata))
                    ):
                        best[document_id] = chunk_id
                out = [(d, ScoredChunk(best[d], float(score))) for d, score in ranked.items() if d in best]
                if len(out) >= top_k or len(ranked) < limit:
                    return out[:top_k]
                limit *= 4


def _best(
    scores: np.ndarray[Any, np.dtype[np.float64]], names: Sequence[str], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` best-scoring documents as ``(id, score)``, ties by id in code-point order."""
    touched = np.flatnonzero(scores > 0)
    if len(touched) > limit:
        values = scores[touched]
        kth = np.partition(values, len(values) - limit)[len(values) - limit]
        touched = touched[values >= kth]
    order = sorted(touched.tolist(), key=lambda i: (-scores[i], names[i]))[:limit]
    return [(names[i], float(scores[i])) for i in order]


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
        settings = (str(min(1000, max(40, 2 * top_k))), "off" if filter is None else "strict_order")
        with catalog.db.connection() as conn:
            register_vector(conn)
            if _SESSION_SETTINGS.get(conn) != settings:  # kept by the session: set when they change
                conn.execute(
                    "SELECT set_config('hnsw.ef_search', %s, false), "
                    "set_config('hnsw.iterative_scan', %s, false)",
                    settings,
                )
                _SESSION_SETTINGS[conn] = settings
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
