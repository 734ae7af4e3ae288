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

A server (``kb serve``) warms the cache when it opens, in the background: the postings of the
most frequent terms, up to :data:`WARM_SHARE` of the cache's budget, the terms whose postings
are costly to fetch at a search. When the generation moves on, the cache is caught up by the
documents the writers changed (the ``changes`` table), read in one repeatable-read snapshot.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import numpy as np

from toolkernel.filters import coerce_filter
from toolkernel.knowledge import ScoredChunk
from toolkernel.vectors import QueryResult, query_results
from toolkernel_rag.layout import SparseSpec
from toolkernel_rag.postgres.postings_cache import Fetched, PostingsCache, Snapshot
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
    "s.tableoid::int8, p.term, p.documents, p.tfs, p.lengths, p.n FROM {s}.stats s LEFT JOIN LATERAL "
    "(SELECT term, string_agg(document, E'\\n') AS documents, string_agg(int4send(tf), ''::bytea) AS tfs, "
    "string_agg(int4send(length), ''::bytea) AS lengths, count(*) AS n "
    "FROM {s}.document_postings WHERE term = ANY(%(terms)s::text[]) GROUP BY term) AS p ON true"
)
"""The generation, the document count and mean length, the history (the ``stats`` table's oid:
a knowledge base deleted and created again, or restored from a dump, has another), and the
document postings of some terms:
one statement, one snapshot. Each term's postings come packed (the ids joined by newlines, tf
and lengths as big-endian int32 bytes): a hundred thousand postings as Python objects took
longer to receive than the database took to read them."""

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

WARM_SHARE = 0.75
"""The share of the cache's budget a server fills with the most frequent terms when it opens;
the rest is for the terms searches ask for."""

CLOSE_TIMEOUT = 5.0
"""Seconds :meth:`PgSparse.close` waits at most for the warming thread, its statement cancelled."""

WARM_BATCH = 250_000
"""Postings fetched by one statement while warming (what one batch costs in memory as Python
strings, some 15 MB, before it is numbered)."""

MAX_CAUGHT_UP = 20_000
"""Changed documents a cache is moved on by at most; past that it starts over (and warms again)."""

_FREQUENT = (
    'SELECT term, df FROM (SELECT term, df, sum(df) OVER (ORDER BY df DESC, term COLLATE "C") AS running '
    'FROM ({df}) AS t WHERE df > 0) AS w WHERE running <= %(budget)s ORDER BY df DESC, term COLLATE "C"'
)
"""The most frequent terms (by document frequency) whose postings fit in ``budget`` together."""

_FREQUENCIES = "SELECT term, sum(n) AS df FROM {s}.term_counts WHERE postings = 'document' GROUP BY term"
_FREQUENCIES_COUNTED = "SELECT term, count(*) AS df FROM {s}.document_postings GROUP BY term"

_CHANGED = (
    "SELECT count(DISTINCT generation), "
    "COALESCE(array_agg(DISTINCT document) FILTER (WHERE document IS NOT NULL), '{}') "
    "FROM {s}.changes WHERE generation > %s AND generation <= %s"
)
"""How many generations in a range have their changes logged, and the documents they changed."""

_CHANGED_POSTINGS = (
    "SELECT term, string_agg(document, E'\\n'), string_agg(int4send(tf), ''::bytea), "
    "string_agg(int4send(length), ''::bytea), count(*) FROM {s}.document_postings "
    "WHERE document = ANY(%(documents)s::text[]) GROUP BY term"
)
"""The current postings of some documents, packed as :data:`_POSTINGS` packs them (a server
keeps those of the terms it holds)."""


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
        self._catching_up = threading.Lock()
        self._report: Callable[[str], None] | None = None
        self._warmer: threading.Thread | None = None
        self._warming: psycopg.Connection | None = None
        self._warm_lock = threading.Lock()
        self._warm_running = False
        self._rewarm = threading.Event()
        self._closed = threading.Event()

    def terms(self, text: str) -> str:
        """The terms of ``text`` as the catalog stores them (space-separated)."""
        return " ".join(self.analyzer.terms(text))

    def refresh(self, catalog: object) -> None:
        """Every search reads the generation: the search that sees a new one catches the cache up."""

    def warm(self, report: Callable[[str], None]) -> None:
        """Fill the cache with the postings of the most frequent terms in a background thread, now
        and whenever the cache has to start over; ``report`` is told what each warming held."""
        self._report = report
        self._start_warming()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop warming: cancel the statement the warming thread runs and wait for the thread to
        end (``timeout`` seconds at most), so no query of a closed server goes on."""
        import psycopg

        self._closed.set()
        warmer = self._warmer
        deadline = time.monotonic() + timeout
        while warmer is not None and warmer.is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            conn = self._warming
            if conn is not None:
                with suppress(psycopg.Error):  # the connection is gone: so is its statement
                    conn.cancel_safe(timeout=left)
            warmer.join(min(left, 0.1))  # again if the thread had not begun a statement yet

    @contextmanager
    def _warming_connection(self) -> Iterator[psycopg.Connection]:
        """A connection for the warming thread, known to :meth:`close` to cancel its statement."""
        with self.catalog.db.connection() as conn:
            self._warming = conn
            try:
                yield conn
            finally:
                self._warming = None

    def _start_warming(self) -> None:
        """Warm in a new thread, or, if one is warming (it may be the caller, whose catch-up
        started the cache over), have it start again from the most frequent term once its
        batch is done: what it warmed was dropped."""
        if self._report is None or self._closed.is_set():
            return
        with self._warm_lock:
            if self._warm_running:
                self._rewarm.set()
                return
            self._warm_running = True
            self._rewarm.clear()
            self._warmer = threading.Thread(target=self._warm, name="bm25-warm", daemon=True)
            self._warmer.start()

    def _warm(self) -> None:
        """Warm the cache, again for as long as it is started over meanwhile."""
        while True:
            self._warm_once()
            with self._warm_lock:
                if not self._rewarm.is_set() or self._closed.is_set():
                    self._warm_running = False
                    return
                self._rewarm.clear()

    def _warm_once(self) -> None:
        from toolkernel_rag.layout import KBError

        report = self._report
        assert report is not None
        started = time.perf_counter()
        catalog = self.catalog
        frequencies = _FREQUENCIES if catalog.has_term_counts() else _FREQUENCIES_COUNTED
        statement = catalog._sql(_FREQUENT.replace("{df}", frequencies))
        terms = postings = 0
        try:
            with self._warming_connection() as conn:
                budget = int(self.cache.limit * WARM_SHARE) - self.cache.size
                frequent = conn.execute(statement, {"budget": budget}).fetchall()
            for batch in _batches(frequent, WARM_BATCH):
                if self._closed.is_set() or self._rewarm.is_set():
                    return
                for _ in range(ATTEMPTS):
                    with self._warming_connection() as conn:
                        try:
                            history, generation, _, _, fetched = self._fetch(conn, batch)
                        except _NewlineInId:
                            break
                        if self.cache.warm(generation, fetched, history):
                            terms += len(fetched)
                            postings += sum(len(f[1]) for f in fetched)
                            break
                        self._catch_up(conn)
                        if self._rewarm.is_set():  # started over: warm again from the start
                            return
        except Exception as exc:  # a background thread: say why, searches fetch what they need
            if not self._closed.is_set():
                reason = str(exc) if isinstance(exc, KBError) else f"{type(exc).__name__}: {exc}"
                report(f"BM25 postings not warmed: {reason}")
            return
        report(
            f"BM25 postings of the {terms} most frequent terms cached ({postings} postings) "
            f"in {time.perf_counter() - started:.1f} s"
        )

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
                try:
                    snapshot, documents, average = self._snapshot(conn, list(counted))
                except _NewlineInId:
                    break
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
        cached ones and the fetched ones are of different generations (score again)."""
        history = self.cache.history
        held, cached = self.cache.cached(terms)
        missing = [t for t in terms if t not in cached]
        now, generation, documents, average, fetched = self._fetch(conn, missing)
        if held is not None and (generation != held or now != history):  # the cache follows the database
            self._catch_up(conn)
            held, again = self.cache.cached(cached)
            if len(again) != len(cached) or self.cache.history != now:
                return None, documents, average
            cached = again
        return self.cache.add(generation, fetched, cached, held, now), documents, average

    def _fetch(
        self, conn: psycopg.Connection, terms: list[str]
    ) -> tuple[int, int, float, float, list[Fetched]]:
        """The history, generation, document count and mean length, and the postings of
        ``terms``, read by one statement."""
        rows = conn.execute(self.catalog._sql(_POSTINGS), {"terms": terms}).fetchall()
        generation, documents, average, history = rows[0][0], rows[0][1], rows[0][2], rows[0][3]
        fetched = _unpacked([r[4:] for r in rows if r[4] is not None])
        return int(history), int(generation), float(documents), float(average), fetched

    def _catch_up(self, conn: psycopg.Connection) -> None:
        """Move the cache on to the database's generation by the documents changed since the one
        it holds, all read in one snapshot; start it over (and warm it again) when those are not
        all logged or too many, or when the knowledge base's history is another (deleted and
        created again, restored) or went back (a lagging standby promoted)."""
        with self._catching_up:
            held = self.cache.generation
            if held is None:
                return
            catalog = self.catalog
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                row = conn.execute(
                    catalog._sql(
                        "SELECT s.generation, to_regclass(%s) IS NOT NULL, s.tableoid::int8 FROM {s}.stats s"
                    ),
                    (f"{catalog.schema}.changes",),
                ).fetchone()
                assert row is not None
                generation, logged, history = int(row[0]), bool(row[1]), int(row[2])
                same = history == self.cache.history and generation >= held
                if same and generation == held:
                    return
                logged = logged and same
                changed: list[str] = []
                if logged:
                    found = conn.execute(catalog._sql(_CHANGED), (held, generation)).fetchone()
                    assert found is not None
                    logged = found[0] == generation - held and len(found[1]) <= MAX_CAUGHT_UP
                    changed = list(found[1])
                fetched: list[Fetched] | None = None
                if logged and changed:
                    rows = conn.execute(catalog._sql(_CHANGED_POSTINGS), {"documents": changed}).fetchall()
                    try:
                        fetched = _unpacked(rows)
                    except _NewlineInId:
                        logged = False
            if logged and self.cache.move_on(held, generation, changed, fetched or []):
                return
            self.cache.start_over(generation, history)
            self._start_warming()

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


class _NewlineInId(Exception):
    """A document id holds a newline, so packed postings cannot be split: score in SQL."""


def _int32s(packed: bytes) -> np.ndarray[Any, np.dtype[np.int32]]:
    return np.frombuffer(packed, dtype=">i4").astype(np.int32)


def _unpacked(rows: Sequence[Sequence[Any]]) -> list[Fetched]:
    """Rows of packed postings, ``(term, ids joined by newlines, tfs, lengths, count)``, as
    ``(term, ids, tfs, lengths)``; :class:`_NewlineInId` if an id holds a newline."""
    fetched: list[Fetched] = []
    for term, ids, tfs, lengths, n in rows:
        names = ids.split("\n")
        if len(names) != n:
            raise _NewlineInId
        fetched.append((term, names, _int32s(tfs), _int32s(lengths)))
    return fetched


def _batches(frequent: Sequence[Sequence[Any]], size: int) -> list[list[str]]:
    """The terms of ``(term, document frequency)`` rows in order, grouped into batches of about
    ``size`` postings."""
    out: list[list[str]] = [[]]
    held = 0
    for term, df in frequent:
        if held and held + int(df) > size:
            out.append([])
            held = 0
        out[-1].append(term)
        held += int(df)
    return [b for b in out if b]


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
