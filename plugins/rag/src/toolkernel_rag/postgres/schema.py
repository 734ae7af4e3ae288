"""The tables of a knowledge base in PostgreSQL, one schema ``kb_<name>`` each, and its manifest.

``stats`` is one row the writers update in every transaction that changes chunks: the
generation (which servers poll to drop caches) and the counts and total lengths BM25 needs,
so a search reads them consistently with the postings of the same snapshot. Postings carry
the length of their chunk or document so scoring reads the postings index alone.
"""

from __future__ import annotations

import json
import re
import weakref
from typing import TYPE_CHECKING

from toolkernel_rag.layout import KBError, Manifest

if TYPE_CHECKING:
    import psycopg

    from toolkernel_rag.postgres.connection import Database

PREFIX = "kb_"
VECTOR_INDEX_NAME = "chunks_embedding_idx"
_IDENT = re.compile(r"^[a-z0-9_]+$")

_TABLES = """
CREATE TABLE {s}.manifest (id int PRIMARY KEY CHECK (id = 1), body jsonb NOT NULL);
CREATE TABLE {s}.stats (
    id int PRIMARY KEY CHECK (id = 1),
    generation bigint NOT NULL DEFAULT 0,
    chunks bigint NOT NULL DEFAULT 0,
    chunk_length bigint NOT NULL DEFAULT 0,
    documents bigint NOT NULL DEFAULT 0,
    document_length bigint NOT NULL DEFAULT 0
);
INSERT INTO {s}.stats (id) VALUES (1);
CREATE TABLE {s}.documents (
    id text PRIMARY KEY,
    source text NOT NULL,
    hash text NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'done')),
    metadata jsonb NOT NULL,
    text text NOT NULL,
    chunk_count int NOT NULL DEFAULT 0,
    terms text NOT NULL DEFAULT '',
    indexed_length int
);
CREATE INDEX ON {s}.documents (source);
CREATE SEQUENCE {s}.chunk_rowids;
CREATE TABLE {s}.chunks (
    rowid bigint PRIMARY KEY,
    id text NOT NULL UNIQUE,
    document_id text NOT NULL,
    seq int NOT NULL,
    start int NOT NULL,
    "end" int NOT NULL,
    text text NOT NULL,
    metadata jsonb NOT NULL,
    embedding vector({dimension}),
    terms text NOT NULL,
    length int NOT NULL
);
CREATE INDEX ON {s}.chunks (document_id, seq);
{vector_index};
CREATE TABLE {s}.chunk_postings (
    term text NOT NULL, chunk bigint NOT NULL, tf int NOT NULL, length int NOT NULL,
    PRIMARY KEY (term, chunk) INCLUDE (tf, length)
);
CREATE INDEX ON {s}.chunk_postings (chunk);
CREATE TABLE {s}.document_postings (
    term text NOT NULL, document text NOT NULL, tf int NOT NULL, length int NOT NULL,
    PRIMARY KEY (term, document) INCLUDE (tf, length)
);
CREATE INDEX ON {s}.document_postings (document);
{term_counts};
{changes};
CREATE TABLE {s}.sources (key text PRIMARY KEY, location text NOT NULL UNIQUE);
CREATE TABLE {s}.extension_state (
    extension text NOT NULL, document_id text NOT NULL, hash text NOT NULL,
    PRIMARY KEY (extension, document_id)
);
CREATE TABLE {s}.extension_blobs (
    extension text NOT NULL, key text NOT NULL, version bigint NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (extension, key)
);
{segments};
{upkeep};
"""

SEGMENTS_TABLE = """CREATE TABLE IF NOT EXISTS {s}.extension_segments (
    extension text NOT NULL, key text NOT NULL, sequence bigint NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (extension, key, sequence)
)"""
"""Extensions' segmented state (``KBContext.append_segment``); also made on first append in a
schema created before it."""

UPKEEP_TABLE = """CREATE TABLE IF NOT EXISTS {s}.upkeep (task text PRIMARY KEY, postings bigint NOT NULL)"""
"""When each index rebuild last ran, as the postings its table held then
(:meth:`~toolkernel_rag.postgres.catalog.PgCatalog.rebuild_postings_index`); also made by the
first rebuild in a schema created before it."""

VECTOR_INDEX = (
    f"CREATE INDEX IF NOT EXISTS {VECTOR_INDEX_NAME} ON {{s}}.chunks USING hnsw (embedding vector_cosine_ops)"
)
"""The HNSW index of the chunks' embeddings (PostgreSQL's own name for the index made before it had one)."""


TERM_COUNTS = (
    "CREATE TABLE {s}.term_counts (postings text NOT NULL, term text NOT NULL, n bigint NOT NULL);\n"
    "CREATE INDEX term_counts_term_idx ON {s}.term_counts (postings, term) INCLUDE (n)"
)
"""How many postings (``chunk`` or ``document``) hold each term: the sum of the term's rows.

Each writing transaction adds one row per term it adds or removes postings of (``n`` the
change), so concurrent writers never update a shared row; :meth:`PgCatalog.compact_term_counts`
folds a term's rows into one. A search reads a few rows per term where counting its postings
read every one of them."""


CHANGES = (
    "CREATE TABLE {s}.changes (generation bigint NOT NULL, document text);\n"
    "CREATE INDEX changes_generation_idx ON {s}.changes (generation)"
)
"""Which documents each generation changed, so a server moves its cached postings on by those
documents instead of dropping them.

Every writing transaction bumps the generation by one (the ``stats`` row serialises them) and
adds a row per document it wrote or removed, with that generation; a change that is not about
documents (an extension's state) adds one row with no document. A server that finds a
generation without rows in the range it catches up over (written by a writer from before this
table, or pruned: see :data:`KEPT_GENERATIONS`) starts its cache over instead. A knowledge
base made before it gets it from its first writer."""

KEPT_GENERATIONS = 2_000
"""Generations of ``changes`` kept: a server further behind starts its cache over."""


def schema_name(name: str) -> str:
    """The schema of knowledge base ``name``: ``kb_`` and the name in lower case, ``-`` as ``_``."""
    schema = PREFIX + name.lower().replace("-", "_")
    if len(schema) > 63 or not _IDENT.match(schema):
        raise KBError(
            f"knowledge base name {name!r} cannot name a PostgreSQL schema: "
            "use at most 60 characters from A-Z a-z 0-9 '_' '-'"
        )
    return schema


def read_manifest(db: Database, schema: str) -> Manifest | None:
    """The manifest kept in ``schema``, or ``None`` when there is no knowledge base there."""
    with db.connection() as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (f"{schema}.manifest",)).fetchone()
        if exists is None or exists[0] is None:
            return None
        row = conn.execute(f"SELECT body FROM {schema}.manifest").fetchone()
    if row is None:
        return None
    return Manifest.model_validate(row[0])


def create(db: Database, schema: str, manifest: Manifest) -> Manifest:
    """Create the knowledge base's schema and tables with ``manifest``, unless another writer did first.

    Returns the manifest the schema holds (the other writer's when it won the race).
    """
    from psycopg.types.json import Jsonb

    lock = f"toolkernel-kb:{schema}"
    with db.connection() as conn:
        # One creator at a time, locked before the transaction starts so that the loser's
        # catalog lookups see the winner's committed tables.
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock,))
        try:
            with conn.transaction():
                found = conn.execute("SELECT to_regclass(%s)", (f"{schema}.manifest",)).fetchone()
                if found is not None and found[0] is not None:
                    row = conn.execute(f"SELECT body FROM {schema}.manifest").fetchone()
                    if row is not None:
                        return Manifest.model_validate(row[0])
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                tables = _TABLES.format(
                    s=schema,
                    segments=SEGMENTS_TABLE.format(s=schema),
                    upkeep=UPKEEP_TABLE.format(s=schema),
                    dimension=manifest.embedder.dimension,
                    vector_index=VECTOR_INDEX.format(s=schema),
                    term_counts=TERM_COUNTS.format(s=schema),
                    changes=CHANGES.format(s=schema),
                )
                for statement in tables.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {schema}.manifest (id, body) VALUES (1, %s)",
                    (Jsonb(json.loads(manifest.model_dump_json())),),
                )
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))
    return manifest


def list_knowledge_bases(db: Database) -> list[Manifest]:
    """The manifests of every knowledge base in the database, by name."""
    with db.connection() as conn:
        schemas = [
            r[0]
            for r in conn.execute(
                "SELECT table_schema FROM information_schema.tables "
                "WHERE table_name = 'manifest' AND table_schema LIKE 'kb\\_%%' ORDER BY table_schema"
            )
        ]
    found = [read_manifest(db, s) for s in schemas]
    return [m for m in found if m is not None]


def drop(db: Database, schema: str) -> None:
    """Drop the knowledge base's schema and everything in it."""
    with db.connection() as conn, conn.transaction():
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


_REGISTERED: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()


def register_vector(conn: psycopg.Connection) -> None:
    """Let ``conn`` send and receive pgvector values as numpy arrays (once per connection)."""
    if conn not in _REGISTERED:
        from pgvector.psycopg import register_vector as register

        register(conn)
        _REGISTERED.add(conn)
