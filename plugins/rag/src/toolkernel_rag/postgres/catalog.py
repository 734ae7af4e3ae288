"""The catalog of a knowledge base in PostgreSQL: the same operations as the SQLite catalog.

Writers on any host may run at once. A document's rows change only under a transaction-level
advisory lock on its id, taken in a fixed order, so two ingests of the same document
serialise: the second replaces the first's chunks, never adds to them. The document row, its
chunks with their embeddings, and the BM25 postings of both are written in one transaction
with the ``stats`` row, so a reader sees a document whole or not at all and scores it with
counts of the same snapshot. A killed ingest leaves ``pending`` rows, rewritten by the next run.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkernel_rag.catalog import DocumentRow, SourceRow, StoredChunk
from toolkernel_rag.postgres.schema import (
    CHANGES,
    KEPT_GENERATIONS,
    SEGMENTS_TABLE,
    TERM_COUNTS,
    UPKEEP_TABLE,
    VECTOR_INDEX,
    VECTOR_INDEX_NAME,
    register_vector,
)

if TYPE_CHECKING:
    import psycopg

    from toolkernel_rag.postgres.connection import Database

_LOCK_DOCUMENTS = (
    "SELECT pg_advisory_xact_lock(k) FROM "
    "(SELECT DISTINCT hashtextextended(%s || ':' || d, 0) AS k FROM unnest(%s::text[]) AS d ORDER BY k) AS s"
)

_LOCK_SOURCES = "SELECT pg_advisory_xact_lock(hashtextextended(%s || ':sources', 0))"

REBUILD_GROWTH = 1.25
"""How much the document postings grow after a build of their index before it is rebuilt."""

REBUILD_MEMORY_MB = 512
"""The ``maintenance_work_mem`` a rebuild of the postings index asks for at least, for its sort
(PostgreSQL's default is 64 MB; at 300k chunks, 14 million postings, a rebuild with 512 MB took 35 s)."""

REBUILD_LOCK_TIMEOUT_SECONDS = 10
"""How long a rebuild of the postings index waits at most for each lock it needs, and for the
transactions older than it (a ``REINDEX CONCURRENTLY`` waits for every older snapshot in the
database: an idle-in-transaction session or a ``pg_dump`` would hold it, and the ingest behind
it, for as long as they last). Searches and writers' transactions take well under that; past
it the rebuild is skipped, and the next ingest tries again."""

REBUILD_MIN_POSTINGS = 100_000
"""Document postings below which their index is never rebuilt (a few MB, read whole anyway)."""

INDEX_BUILD_MEMORY_MB = 1024
"""The most ``maintenance_work_mem`` an HNSW build asks for (set for that transaction alone)."""

INDEX_BYTES_PER_ELEMENT = 1024
"""What pgvector's in-memory HNSW graph holds per chunk besides its vector (neighbour lists, header)."""

_UNCOUNT = (
    "WITH gone AS (DELETE FROM {{s}}.{postings}_postings WHERE {key} = ANY(%s) RETURNING term) "
    "INSERT INTO {{s}}.term_counts (postings, term, n) "
    "SELECT '{postings}', term, -count(*) FROM gone GROUP BY term"
)
"""Delete postings and count them out of ``term_counts`` in one statement."""

PendingRow = tuple[str, str, str, dict[str, Any], str, str]
"""``(id, source, hash, metadata, text, terms)`` of a document being written."""


class PgCatalog:
    """The catalog tables of one knowledge base schema; safe to use from several threads."""

    def __init__(self, db: Database, schema: str, dimension: int) -> None:
        self.db = db
        self.schema = schema
        self.dimension = dimension
        self.path = f"{db.where} schema {schema}"
        self._pending: dict[str, PendingRow] = {}
        self._term_counts = False
        self._changes = False
        self._bulk = False

    def close(self) -> None:
        self.db.close()

    def _sql(self, text: str) -> str:
        return text.replace("{s}", self.schema)

    # -- documents -----------------------------------------------------------------

    def hashes(self, source: str | None = None) -> dict[str, tuple[str, str]]:
        """``document id -> (hash, state)``, for one source or every document."""
        with self.db.connection() as conn:
            if source is None:
                rows = conn.execute(self._sql("SELECT id, hash, state FROM {s}.documents"))
            else:
                rows = conn.execute(
                    self._sql("SELECT id, hash, state FROM {s}.documents WHERE source = %s"), (source,)
                )
            return {r[0]: (r[1], r[2]) for r in rows}

    def hashes_of(self, document_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``document id -> (hash, state)`` of those of ``document_ids`` the catalog holds."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT id, hash, state FROM {s}.documents WHERE id = ANY(%s)"),
                (list(document_ids),),
            )
            return {r[0]: (r[1], r[2]) for r in rows}

    def source_ids(self, source: str, after: str, limit: int) -> list[str]:
        """Ids of the documents of ``source`` (any state) after id ``after``, in id order (bytewise),
        ``limit`` at a time."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql(
                    'SELECT id FROM {s}.documents WHERE source = %s AND id COLLATE "C" > %s '
                    'ORDER BY id COLLATE "C" LIMIT %s'
                ),
                (source, after, limit),
            )
            return [r[0] for r in rows]

    def mark_pending(self, docs: Iterable[PendingRow]) -> None:
        """Record documents as being written (kept too for :meth:`commit_documents`)."""
        rows = list(docs)
        for row in rows:
            self._pending[row[0]] = row
        if not rows:
            return
        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK_DOCUMENTS, (self.schema, [r[0] for r in rows]))
            with conn.cursor() as cur:
                cur.executemany(
                    self._sql(
                        "INSERT INTO {s}.documents (id, source, hash, state, metadata, text, terms) "
                        "VALUES (%s, %s, %s, 'pending', %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                        "source = excluded.source, hash = excluded.hash, state = 'pending', "
                        "metadata = excluded.metadata, text = excluded.text, terms = excluded.terms"
                    ),
                    [(i, s, h, json.dumps(m, ensure_ascii=False), t, terms) for i, s, h, m, t, terms in rows],
                )

    def commit_documents(self, document_ids: Sequence[str], chunks: Sequence[StoredChunk]) -> None:
        """Replace the chunks of ``document_ids`` with ``chunks`` and mark them done (one transaction).

        The document rows are written again from what :meth:`mark_pending` recorded, so when
        two writers raced on a document the row and the chunks are the same writer's.
        """
        from psycopg.types.json import Jsonb

        ids = list(document_ids)
        counts: dict[str, int] = dict.fromkeys(ids, 0)
        for c in chunks:
            counts[c.document_id] += 1
        with self.db.connection() as conn, conn.transaction():
            register_vector(conn)
            self._ensure_term_counts(conn)
            self._ensure_changes(conn)
            conn.execute(_LOCK_DOCUMENTS, (self.schema, ids))
            removed_chunks, removed_length = self._remove_chunks(conn, ids)
            removed_docs, removed_doc_length = self._remove_document_postings(conn, ids)
            pending = [self._pending.get(d) for d in ids]
            rows = [p for p in pending if p is not None]
            with conn.cursor() as cur:
                cur.executemany(
                    self._sql(
                        "INSERT INTO {s}.documents (id, source, hash, state, metadata, text, terms) "
                        "VALUES (%s, %s, %s, 'done', %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                        "source = excluded.source, hash = excluded.hash, state = 'done', "
                        "metadata = excluded.metadata, text = excluded.text, terms = excluded.terms"
                    ),
                    [(i, s, h, json.dumps(m, ensure_ascii=False), t, terms) for i, s, h, m, t, terms in rows],
                )
            rowids = self._next_rowids(conn, len(chunks))
            chunk_length = 0
            with conn.cursor().copy(
                self._sql(
                    'COPY {s}.chunks (rowid, id, document_id, seq, start, "end", text, metadata, '
                    "embedding, terms, length) FROM STDIN (FORMAT BINARY)"
                )
            ) as copy:
                copy.set_types(
                    [
                        "int8",
                        "text",
                        "text",
                        "int4",
                        "int4",
                        "int4",
                        "text",
                        "jsonb",
                        "vector",
                        "text",
                        "int4",
                    ]
                )
                for rowid, c in zip(rowids, chunks, strict=True):
                    length = len(c.terms.split())
                    chunk_length += length
                    vector = None if c.vector is None else np.asarray(c.vector, dtype=np.float32)
                    copy.write_row(
                        (
                            rowid,
                            c.id,
                            c.document_id,
                            c.seq,
                            c.start,
                            c.end,
                            c.text,
                            Jsonb(c.metadata),
                            vector,
                            c.terms,
                            length,
                        )
                    )
            with conn.cursor().copy(
                self._sql("COPY {s}.chunk_postings (term, chunk, tf, length) FROM STDIN (FORMAT BINARY)")
            ) as copy:
                copy.set_types(["text", "int8", "int4", "int4"])
                chunk_df: Counter[str] = Counter()
                for rowid, c in zip(rowids, chunks, strict=True):
                    words = c.terms.split()
                    counted = Counter(words)
                    chunk_df.update(counted.keys())
                    for term, tf in counted.items():
                        copy.write_row((term, rowid, tf, len(words)))
            indexed = [(d, (self._pending[d][5] if d in self._pending else "")) for d in ids if counts[d]]
            missing = [d for d, _ in indexed if d not in self._pending]
            if missing:  # another process marked them: their terms are in the table
                found = dict(
                    conn.execute(
                        self._sql("SELECT id, terms FROM {s}.documents WHERE id = ANY(%s)"), (missing,)
                    ).fetchall()
                )
                indexed = [(d, found.get(d, t) if d in missing else t) for d, t in indexed]
            document_length = 0
            with conn.cursor().copy(
                self._sql(
                    "COPY {s}.document_postings (term, document, tf, length) FROM STDIN (FORMAT BINARY)"
                )
            ) as copy:
                copy.set_types(["text", "text", "int4", "int4"])
                document_df: Counter[str] = Counter()
                for d, terms in indexed:
                    words = terms.split()
                    document_length += len(words)
                    counted = Counter(words)
                    document_df.update(counted.keys())
                    for term, tf in counted.items():
                        copy.write_row((term, d, tf, len(words)))
            with conn.cursor().copy(
                self._sql("COPY {s}.term_counts (postings, term, n) FROM STDIN (FORMAT BINARY)")
            ) as copy:
                copy.set_types(["text", "text", "int8"])
                for postings, df in (("chunk", chunk_df), ("document", document_df)):
                    for term, n in df.items():
                        copy.write_row((postings, term, n))
            with conn.cursor() as cur:
                cur.executemany(
                    self._sql(
                        "UPDATE {s}.documents SET state = 'done', chunk_count = %s, indexed_length = %s "
                        "WHERE id = %s"
                    ),
                    [(n, len(dict(indexed).get(d, "").split()) if n else None, d) for d, n in counts.items()],
                )
            self._bump(
                conn,
                ids,
                chunks=len(chunks) - removed_chunks,
                chunk_length=chunk_length - removed_length,
                documents=len(indexed) - removed_docs,
                document_length=document_length - removed_doc_length,
            )
        for d in ids:
            self._pending.pop(d, None)

    def delete_documents(self, document_ids: Sequence[str]) -> None:
        """Remove documents, their chunks and postings (one transaction)."""
        ids = list(document_ids)
        with self.db.connection() as conn, conn.transaction():
            self._ensure_term_counts(conn)
            self._ensure_changes(conn)
            conn.execute(_LOCK_DOCUMENTS, (self.schema, ids))
            removed_chunks, removed_length = self._remove_chunks(conn, ids)
            removed_docs, removed_doc_length = self._remove_document_postings(conn, ids)
            conn.execute(self._sql("DELETE FROM {s}.documents WHERE id = ANY(%s)"), (ids,))
            self._bump(
                conn,
                ids,
                chunks=-removed_chunks,
                chunk_length=-removed_length,
                documents=-removed_docs,
                document_length=-removed_doc_length,
            )

    def _remove_chunks(self, conn: psycopg.Connection, ids: list[str]) -> tuple[int, int]:
        rows = conn.execute(
            self._sql("DELETE FROM {s}.chunks WHERE document_id = ANY(%s) RETURNING rowid, length"), (ids,)
        ).fetchall()
        if rows:
            conn.execute(self._sql(_UNCOUNT.format(postings="chunk", key="chunk")), ([r[0] for r in rows],))
        return len(rows), sum(r[1] for r in rows)

    def _remove_document_postings(self, conn: psycopg.Connection, ids: list[str]) -> tuple[int, int]:
        """Take documents out of the document-level BM25 index (their advisory locks are held)."""
        row = conn.execute(
            self._sql(
                "SELECT count(*), COALESCE(sum(indexed_length), 0) FROM {s}.documents "
                "WHERE id = ANY(%s) AND indexed_length IS NOT NULL"
            ),
            (ids,),
        ).fetchone()
        assert row is not None
        conn.execute(self._sql("UPDATE {s}.documents SET indexed_length = NULL WHERE id = ANY(%s)"), (ids,))
        conn.execute(self._sql(_UNCOUNT.format(postings="document", key="document")), (ids,))
        return int(row[0]), int(row[1])

    def has_term_counts(self) -> bool:
        """Whether the schema has its ``term_counts`` table (a knowledge base made before it had
        one gets it from its first writer; until then searches count postings)."""
        if not self._term_counts:
            with self.db.connection() as conn:
                found = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.term_counts",)).fetchone()
            self._term_counts = found is not None and found[0] is not None
        return self._term_counts

    def _ensure_term_counts(self, conn: psycopg.Connection) -> None:
        """Make and fill ``term_counts`` if this knowledge base predates it, in the writer's transaction.

        Under a transaction-level advisory lock, so one writer fills it from the postings its
        statement sees, and every other writer waits and then adds its own rows to it.
        """
        if self.has_term_counts():
            return
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"toolkernel-kb:{self.schema}",)
        )
        found = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.term_counts",)).fetchone()
        if found is None or found[0] is None:
            for statement in TERM_COUNTS.format(s=self.schema).split(";"):
                conn.execute(statement)
            for postings in ("chunk", "document"):
                conn.execute(
                    self._sql(
                        f"INSERT INTO {{s}}.term_counts (postings, term, n) "
                        f"SELECT '{postings}', term, count(*) FROM {{s}}.{postings}_postings GROUP BY term"
                    )
                )
        self._term_counts = True

    def compact_term_counts(self) -> None:
        """Fold each term's rows of ``term_counts`` into one (terms with one row are left alone).

        One writer at a time (a transaction-level advisory lock; another that finds it taken
        skips). Rows a concurrent writer commits meanwhile are not seen by the statement, so
        they stay as they are: the sums never change, only how many rows hold them.
        """
        if not self.has_term_counts():
            return
        with self.db.connection() as conn, conn.transaction():
            key = f"toolkernel-kb:{self.schema}:term-counts"
            if not _try_transaction_lock(conn, key):
                return
            conn.execute(
                self._sql(
                    "WITH many AS (SELECT postings, term FROM {s}.term_counts GROUP BY postings, term "
                    "HAVING count(*) > 1), "
                    "gone AS (DELETE FROM {s}.term_counts f USING many "
                    "WHERE f.postings = many.postings AND f.term = many.term "
                    "RETURNING f.postings, f.term, f.n) "
                    "INSERT INTO {s}.term_counts (postings, term, n) SELECT postings, term, sum(n) FROM gone "
                    "GROUP BY postings, term HAVING sum(n) <> 0"
                )
            )

    def _next_rowids(self, conn: psycopg.Connection, n: int) -> list[int]:
        if not n:
            return []
        rows = conn.execute(
            self._sql("SELECT nextval('{s}.chunk_rowids') FROM generate_series(1, %s)"), (n,)
        ).fetchall()
        return [r[0] for r in rows]

    def _bump(self, conn: psycopg.Connection, document_ids: list[str], **deltas: int) -> None:
        """Move the generation on with the totals' changes, and log ``document_ids`` as its changes."""
        row = conn.execute(
            self._sql(
                "UPDATE {s}.stats SET generation = generation + 1, chunks = chunks + %s, "
                "chunk_length = chunk_length + %s, documents = documents + %s, "
                "document_length = document_length + %s RETURNING generation"
            ),
            (deltas["chunks"], deltas["chunk_length"], deltas["documents"], deltas["document_length"]),
        ).fetchone()
        assert row is not None
        self._log_changes(conn, int(row[0]), document_ids)

    def _log_changes(self, conn: psycopg.Connection, generation: int, document_ids: list[str]) -> None:
        """Record what ``generation`` changed in ``changes`` (one row without a document if nothing);
        the writer made the table at the start of its transaction (:meth:`_ensure_changes`)."""
        conn.execute(
            self._sql(
                "INSERT INTO {s}.changes (generation, document) "
                "SELECT %s, d FROM unnest(%s::text[]) AS d UNION ALL "
                "SELECT %s, NULL WHERE cardinality(%s::text[]) = 0"
            ),
            (generation, document_ids, generation, document_ids),
        )

    def has_changes(self) -> bool:
        """Whether the schema has its ``changes`` table (made by the first writer of an older one)."""
        if not self._changes:
            with self.db.connection() as conn:
                found = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.changes",)).fetchone()
            self._changes = found is not None and found[0] is not None
        return self._changes

    def _ensure_changes(self, conn: psycopg.Connection) -> None:
        """Make ``changes`` in a knowledge base from before it, in the writer's transaction (one
        writer makes it under a transaction-level advisory lock; the others wait, then use it)."""
        if self.has_changes():
            return
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"toolkernel-kb:{self.schema}",)
        )
        found = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.changes",)).fetchone()
        if found is None or found[0] is None:
            for statement in CHANGES.format(s=self.schema).split(";"):
                conn.execute(statement)
        self._changes = True

    def prune_changes(self) -> None:
        """Delete the ``changes`` of generations more than :data:`KEPT_GENERATIONS` old (one writer
        at a time: another that finds the lock taken skips)."""
        if not self.has_changes():
            return
        with self.db.connection() as conn, conn.transaction():
            if not _try_transaction_lock(conn, f"toolkernel-kb:{self.schema}:changes"):
                return
            conn.execute(
                self._sql(
                    "DELETE FROM {s}.changes WHERE generation <= (SELECT generation FROM {s}.stats) - %s"
                ),
                (KEPT_GENERATIONS,),
            )

    def chunk_ids(self, document_id: str) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT id FROM {s}.chunks WHERE document_id = %s ORDER BY seq"), (document_id,)
            )
            return [r[0] for r in rows]

    def document(self, document_id: str) -> tuple[DocumentRow, str] | None:
        """A document's row and its full text, or ``None``."""
        with self.db.connection() as conn:
            row = conn.execute(
                self._sql(
                    "SELECT id, source, hash, state, metadata, chunk_count, text "
                    "FROM {s}.documents WHERE id = %s"
                ),
                (document_id,),
            ).fetchone()
        if row is None:
            return None
        return DocumentRow(row[0], row[1], row[2], row[3], row[4], row[5]), row[6]

    def documents(
        self, limit: int | None = None, after: str | None = None, source: str | None = None
    ) -> list[DocumentRow]:
        """Done documents ordered by id (bytewise, as SQLite orders them), ``limit`` at a time
        after id ``after``; only those of the source at location ``source`` if given."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql(
                    "SELECT id, source, hash, state, metadata, chunk_count FROM {s}.documents "
                    "WHERE state = 'done' AND id COLLATE \"C\" > %s AND (%s::text IS NULL OR source = %s) "
                    'ORDER BY id COLLATE "C" LIMIT %s'
                ),
                (after or "", source, source, limit),
            )
            return [DocumentRow(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def missing(self, document_ids: Sequence[str]) -> list[str]:
        """Those of ``document_ids`` the catalog does not hold (in the order given)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT id FROM {s}.documents WHERE id = ANY(%s)"), (list(document_ids),)
            ).fetchall()
        found = {r[0] for r in rows}
        return [d for d in document_ids if d not in found]

    # -- sources -----------------------------------------------------------------------

    def source_key(self, location: str) -> str:
        """The key of the source at ``location``, given now if it has none (writers agree on it)."""
        from toolkernel_rag.catalog import source_key_for

        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK_SOURCES, (self.schema,))
            row = conn.execute(
                self._sql("SELECT key FROM {s}.sources WHERE location = %s"), (location,)
            ).fetchone()
            if row is not None:
                return str(row[0])
            taken = {r[0] for r in conn.execute(self._sql("SELECT key FROM {s}.sources"))}
            key = source_key_for(location, taken)
            conn.execute(
                self._sql("INSERT INTO {s}.sources (key, location) VALUES (%s, %s)"), (key, location)
            )
            return key

    def source_location(self, key_or_location: str) -> str | None:
        """The location of the source with this key or location, or ``None`` when there is none."""
        with self.db.connection() as conn:
            row = conn.execute(
                self._sql("SELECT location FROM {s}.sources WHERE key = %s OR location = %s"),
                (key_or_location, key_or_location),
            ).fetchone()
        return None if row is None else str(row[0])

    def sources(self) -> list[SourceRow]:
        """Every source, by key, with how many documents it holds."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql(
                    "SELECT s.key, s.location, "
                    "(SELECT count(*) FROM {s}.documents d WHERE d.source = s.location) "
                    'FROM {s}.sources s ORDER BY s.key COLLATE "C"'
                )
            ).fetchall()
        return [SourceRow(r[0], r[1], int(r[2])) for r in rows]

    def locations_of(self, document_ids: Sequence[str]) -> set[str]:
        """The locations of the sources these documents came from."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT DISTINCT source FROM {s}.documents WHERE id = ANY(%s)"),
                (list(document_ids),),
            ).fetchall()
        return {r[0] for r in rows}

    def forget_source(self, location: str) -> None:
        """Drop a source's key once none of its documents is left."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(_LOCK_SOURCES, (self.schema,))
            conn.execute(
                self._sql(
                    "DELETE FROM {s}.sources WHERE location = %s AND NOT EXISTS "
                    "(SELECT 1 FROM {s}.documents WHERE source = %s)"
                ),
                (location, location),
            )

    def needs_id_migration(self) -> bool:
        """Never: this backend was born with ids qualified by their source."""
        return False

    def store_stale(self) -> bool:
        """Never: the vectors are written with their chunks."""
        return False

    def counts(self) -> tuple[int, int, int]:
        """``(done documents, pending documents, chunks)``."""
        with self.db.connection() as conn:
            row = conn.execute(
                self._sql(
                    "SELECT count(*) FILTER (WHERE state = 'done'), "
                    "count(*) FILTER (WHERE state = 'pending'), "
                    "(SELECT count(*) FROM {s}.chunks) FROM {s}.documents"
                )
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    def chunk_totals(self) -> tuple[int, int]:
        """``(done documents that have chunks, chunks)`` from the ``stats`` row, which every
        transaction that changes chunks keeps current: no count over the tables."""
        with self.db.connection() as conn:
            row = conn.execute(self._sql("SELECT documents, chunks FROM {s}.stats")).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    # -- chunks ----------------------------------------------------------------------

    def chunks(self, ids: Sequence[str], include_vectors: bool = False) -> list[StoredChunk]:
        """The chunks with these ids, in the order given; unknown ids are left out."""
        if not ids:
            return []
        with self.db.connection() as conn:
            if include_vectors:
                register_vector(conn)
            rows = conn.execute(
                self._sql(
                    'SELECT id, document_id, seq, start, "end", text, metadata, '
                    f"{'embedding' if include_vectors else 'NULL'}, terms "
                    "FROM {s}.chunks WHERE id = ANY(%s)"
                ),
                (list(ids),),
            ).fetchall()
        found = {r[0]: _chunk(r) for r in rows}
        return [found[i] for i in ids if i in found]

    def document_chunks(self, document_ids: Sequence[str]) -> list[StoredChunk]:
        """Every chunk of these documents, with vectors, in document then chunk order."""
        if not document_ids:
            return []
        with self.db.connection() as conn:
            register_vector(conn)
            rows = conn.execute(
                self._sql(
                    'SELECT id, document_id, seq, start, "end", text, metadata, embedding, terms '
                    "FROM {s}.chunks WHERE document_id = ANY(%s) ORDER BY document_id, seq"
                ),
                (list(document_ids),),
            ).fetchall()
        by_document: dict[str, list[StoredChunk]] = {d: [] for d in document_ids}
        for r in rows:
            by_document[r[1]].append(_chunk(r))
        return [c for d in document_ids for c in by_document[d]]

    def all_terms(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``(chunk id, terms, metadata)`` of every chunk in insertion order."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT id, terms, metadata FROM {s}.chunks ORDER BY rowid")
            ).fetchall()
        for r in rows:
            yield r[0], r[1], r[2]

    def document_texts(self, document_ids: Sequence[str], max_chars: int) -> dict[str, str]:
        """``document id -> text`` of those documents whose text is at most ``max_chars`` long."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql("SELECT id, text FROM {s}.documents WHERE id = ANY(%s) AND length(text) <= %s"),
                (list(document_ids), max_chars),
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    # -- extensions --------------------------------------------------------------------

    def extension_changes(self, extension: str, after: str, limit: int) -> list[tuple[str, str]]:
        """``(id, hash)`` of the next ``limit`` done documents after ``after`` not held at their hash."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql(
                    "SELECT d.id, d.hash FROM {s}.documents d LEFT JOIN {s}.extension_state e "
                    "ON e.extension = %s AND e.document_id = d.id "
                    "WHERE d.state = 'done' AND d.id > %s AND (e.hash IS NULL OR e.hash <> d.hash) "
                    "ORDER BY d.id LIMIT %s"
                ),
                (extension, after, limit),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def extension_forgotten(self, extension: str) -> list[str]:
        """Documents ``extension`` holds that are no longer done documents (deleted), by id."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._sql(
                    "SELECT e.document_id FROM {s}.extension_state e LEFT JOIN {s}.documents d "
                    "ON d.id = e.document_id AND d.state = 'done' "
                    "WHERE e.extension = %s AND d.id IS NULL ORDER BY e.document_id"
                ),
                (extension,),
            ).fetchall()
        return [r[0] for r in rows]

    def set_extension_state(
        self, extension: str, seen: Sequence[tuple[str, str]], forgotten: Sequence[str]
    ) -> None:
        """Record that ``extension`` holds documents ``(id, hash)`` and no longer holds ``forgotten``."""
        with self.db.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                self._sql(
                    "INSERT INTO {s}.extension_state (extension, document_id, hash) VALUES (%s, %s, %s) "
                    "ON CONFLICT (extension, document_id) DO UPDATE SET hash = excluded.hash"
                ),
                [(extension, d, h) for d, h in seen],
            )
            cur.execute(
                self._sql("DELETE FROM {s}.extension_state WHERE extension = %s AND document_id = ANY(%s)"),
                (extension, list(forgotten)),
            )

    def load_blob(self, extension: str, key: str, unless: str | None) -> tuple[str, bytes | None] | None:
        """``(version, data)`` of an extension's named state; ``data`` is ``None`` when still ``unless``."""
        with self.db.connection() as conn:
            row = conn.execute(
                self._sql(
                    "SELECT version, CASE WHEN version::text = %s THEN NULL ELSE data END "
                    "FROM {s}.extension_blobs WHERE extension = %s AND key = %s"
                ),
                (unless or "", extension, key),
            ).fetchone()
        if row is None:
            return None
        return str(row[0]), None if row[1] is None else bytes(row[1])

    def save_blob(self, extension: str, key: str, data: bytes) -> str:
        """Replace an extension's named state; returns its new version."""
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                self._sql(
                    "INSERT INTO {s}.extension_blobs (extension, key, version, data) "
                    "VALUES (%s, %s, 1, %s) "
                    "ON CONFLICT (extension, key) DO UPDATE SET version = {s}.extension_blobs.version + 1, "
                    "data = excluded.data RETURNING version"
                ),
                (extension, key, data),
            ).fetchone()
        assert row is not None
        return str(row[0])

    def append_segment(self, extension: str, key: str, data: bytes) -> int:
        """Add a segment (a row of ``extension_segments``, made here in a schema from before it)."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(self._sql(SEGMENTS_TABLE))
            row = conn.execute(
                self._sql(
                    "INSERT INTO {s}.extension_segments (extension, key, sequence, data) "
                    "SELECT %s, %s, coalesce(max(sequence), 0) + 1, %s FROM {s}.extension_segments "
                    "WHERE extension = %s AND key = %s RETURNING sequence"
                ),
                (extension, key, data, extension, key),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def load_segments(self, extension: str, key: str, after: int) -> list[tuple[int, bytes]]:
        """``(sequence, data)`` of the segments numbered above ``after``, in order, in one snapshot."""
        with self.db.connection() as conn:
            found = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.extension_segments",)).fetchone()
            if found is None or found[0] is None:  # a schema from before segments, nothing appended yet
                return []
            rows = conn.execute(
                self._sql(
                    "SELECT sequence, data FROM {s}.extension_segments "
                    "WHERE extension = %s AND key = %s AND sequence > %s ORDER BY sequence"
                ),
                (extension, key, after),
            ).fetchall()
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def replace_segments(self, extension: str, key: str, first: int, last: int, data: bytes) -> None:
        """Merge segments ``first``..``last`` into one numbered ``last``, in one transaction."""
        with self.db.connection() as conn, conn.transaction():
            conn.execute(
                self._sql(
                    "DELETE FROM {s}.extension_segments "
                    "WHERE extension = %s AND key = %s AND sequence BETWEEN %s AND %s"
                ),
                (extension, key, first, last),
            )
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.extension_segments (extension, key, sequence, data) "
                    "VALUES (%s, %s, %s, %s)"
                ),
                (extension, key, last, data),
            )

    @contextmanager
    def extension_lock(self, extension: str) -> Iterator[None]:
        """Hold the lock that serialises writers catching ``extension`` up (a session advisory lock)."""
        from toolkernel_rag.catalog import EXTENSION_LOCK_SECONDS

        with self.db.connection() as conn:
            key = f"toolkernel-kb:{self.schema}:extension:{extension}"
            deadline = time.monotonic() + EXTENSION_LOCK_SECONDS
            while True:
                row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
                if row is not None and row[0]:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{self.path}: another writer has been catching {extension!r} up for "
                        f"{EXTENSION_LOCK_SECONDS:.0f}s"
                    )
                time.sleep(0.2)
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    # -- the vector index ----------------------------------------------------------------

    def start_bulk_load(self) -> None:
        """Into a knowledge base without chunks, leave the HNSW index to be built once at the end.

        Inserting row by row into an HNSW graph costs most of an ingest's time; one build over
        the loaded table is several times faster. Meanwhile the chunks are searched exactly
        (a sequential scan, correct but slower). An ingest that stops early leaves the index to
        the next writer: every ingest ends by building it if it is missing.
        """
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(self._sql("SELECT chunks FROM {s}.stats")).fetchone()
            self._bulk = row is not None and row[0] == 0
            if self._bulk:
                conn.execute(self._sql(f"DROP INDEX IF EXISTS {{s}}.{VECTOR_INDEX_NAME}"))

    def finish_bulk_load(self) -> None:
        """Build the HNSW index if missing, fold ``term_counts``, prune ``changes``, after a first
        ingest vacuum and analyze what searches read, and rebuild the postings index if it grew
        (:meth:`rebuild_postings_index`).

        Autovacuum lags a bulk load: until it catches up the newest postings are not marked
        all-visible (each is a heap fetch in an index-only scan), the planner's statistics
        describe a smaller table, and the catch-up itself runs beside the first searches.
        """
        self.ensure_vector_index()
        self.compact_term_counts()
        self.prune_changes()
        if self._bulk:
            self._bulk = False
            with self.db.connection() as conn:
                tables = ["chunk_postings", "document_postings", "chunks", "documents"]
                if self.has_term_counts():
                    tables.append("term_counts")
                conn.execute("VACUUM (ANALYZE) " + ", ".join(f"{self.schema}.{t}" for t in tables))
        self.rebuild_postings_index()

    def rebuild_postings_index(self) -> bool:
        """Rebuild the document postings' index in term order when it has grown by
        :data:`REBUILD_GROWTH` since its last build (and holds :data:`REBUILD_MIN_POSTINGS` at
        least); ``True`` if this call rebuilt it.

        A server fetches a term's postings as one range of that index. Built by inserts, batch
        after batch, a term's entries are spread over leaf pages all through the file: fetched
        from disk, 100,000 postings were some 600 random reads. Rebuilt, they lie in a row (and
        the index is 40 % smaller), read ahead by the operating system. ``REINDEX CONCURRENTLY``
        lets searches and writers go on; one writer rebuilds (a session advisory lock, another
        that finds it taken skips), after dropping what a killed rebuild left (an invalid index,
        dropped whether or not a rebuild is due). It is best effort, bounded by
        :data:`REBUILD_LOCK_TIMEOUT_SECONDS` for each wait: a failure (an older snapshot held past
        that, a deadlock, a cancel, a missing privilege) is logged on one line
        (``kb.postings_index_not_rebuilt``) and left to the next ingest; the data is intact.
        """
        import psycopg

        with self.db.connection() as conn:
            try:
                return self._rebuild_postings_index(conn)
            except psycopg.Error as exc:  # best effort: every document is committed already
                from toolkernel._logging import get_logger

                reason = exc.diag.message_primary or str(exc).splitlines()[0]
                get_logger("toolkernel_rag.postgres").warning(
                    "kb.postings_index_not_rebuilt", schema=self.schema, error=reason
                )
                return False

    def _rebuild_postings_index(self, conn: psycopg.Connection) -> bool:
        key = f"toolkernel-kb:{self.schema}:postings-index"
        taken = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
        if taken is None or not taken[0]:
            return False
        try:
            timeout = f"{REBUILD_LOCK_TIMEOUT_SECONDS}s"
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (timeout,))
            conn.execute(self._sql(UPKEEP_TABLE))
            leftovers = conn.execute(
                self._sql(
                    "SELECT i.indexrelid::regclass::text FROM pg_index i "
                    "WHERE i.indrelid = '{s}.document_postings'::regclass AND NOT i.indisvalid"
                )
            ).fetchall()
            for (leftover,) in leftovers:  # a killed rebuild's, whether or not one is due
                conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {leftover}")
            row = conn.execute(
                self._sql(
                    "SELECT greatest(c.reltuples, 0)::bigint, (SELECT postings FROM {s}.upkeep "
                    "WHERE task = 'document_postings_pkey') FROM pg_class c "
                    "WHERE c.oid = '{s}.document_postings'::regclass"
                )
            ).fetchone()
            assert row is not None
            postings, built = int(row[0]), row[1]
            if postings < REBUILD_MIN_POSTINGS or (built is not None and postings < built * REBUILD_GROWTH):
                return False
            memory = conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()
            assert memory is not None
            if _megabytes(str(memory[0])) < REBUILD_MEMORY_MB:  # for this session's rebuild alone
                conn.execute(
                    "SELECT set_config('maintenance_work_mem', %s, false)", (f"{REBUILD_MEMORY_MB}MB",)
                )
            try:
                conn.execute(self._sql("REINDEX INDEX CONCURRENTLY {s}.document_postings_pkey"))
            finally:
                conn.execute("RESET maintenance_work_mem")
            conn.execute(
                self._sql(
                    "INSERT INTO {s}.upkeep (task, postings) VALUES ('document_postings_pkey', %s) "
                    "ON CONFLICT (task) DO UPDATE SET postings = excluded.postings"
                ),
                (postings,),
            )
            return True
        finally:
            conn.execute("RESET lock_timeout")
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    def ensure_vector_index(self) -> bool:
        """Build the HNSW index if it is missing; ``True`` if this call built it.

        One writer builds it (a transaction-level advisory lock); another that finds the lock
        taken leaves the build to its holder. ``maintenance_work_mem`` is raised for the build
        alone, so the graph is built in memory (see :data:`INDEX_BUILD_MEMORY_MB`).
        """
        with self.db.connection() as conn, conn.transaction():
            key = f"toolkernel-kb:{self.schema}:vector-index"
            if not _try_transaction_lock(conn, key):
                return False
            found = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.{VECTOR_INDEX_NAME}",)).fetchone()
            if found is not None and found[0] is not None:
                return False
            row = conn.execute(
                self._sql("SELECT chunks, (SELECT current_setting('maintenance_work_mem')) FROM {s}.stats")
            ).fetchone()
            assert row is not None
            need_mb = int(row[0]) * (4 * self.dimension + INDEX_BYTES_PER_ELEMENT) * 5 // 4 // 2**20
            memory_mb = min(INDEX_BUILD_MEMORY_MB, need_mb)
            if memory_mb > _megabytes(str(row[1])):
                conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (f"{memory_mb}MB",))
            conn.execute(self._sql(VECTOR_INDEX))
            return True

    # -- generation --------------------------------------------------------------------

    def bump_generation(self) -> None:
        """Move the generation on for a change that is not about documents (logged as such)."""
        with self.db.connection() as conn, conn.transaction():
            self._ensure_changes(conn)
            row = conn.execute(
                self._sql("UPDATE {s}.stats SET generation = generation + 1 RETURNING generation")
            ).fetchone()
            assert row is not None
            self._log_changes(conn, int(row[0]), [])

    def generation(self) -> int:
        with self.db.connection() as conn:
            row = conn.execute(self._sql("SELECT generation FROM {s}.stats")).fetchone()
        return int(row[0]) if row else 0


def _megabytes(setting: str) -> int:
    """A PostgreSQL memory setting as ``current_setting`` shows it (``64MB``, ``1GB``) in MiB."""
    units = {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}
    number = setting.rstrip("kMGTB")
    return int(int(number) * units.get(setting[len(number) :], 1))


def _chunk(r: Any) -> StoredChunk:
    raw = r[7]  # a pgvector Vector when read in binary
    vector = None if raw is None else np.asarray(raw.to_numpy(), dtype=np.float32).tolist()
    return StoredChunk(r[0], r[1], r[2], r[3], r[4], r[5], r[6], vector, r[8])


def _try_transaction_lock(conn: psycopg.Connection[Any], key: str) -> bool:
    """Take the transaction-level advisory lock ``key`` if it is free; ``False`` when another holds it."""
    taken = conn.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (key,)).fetchone()
    return taken is not None and bool(taken[0])
