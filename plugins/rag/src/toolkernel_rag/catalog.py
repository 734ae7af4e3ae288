"""The catalog: one SQLite file that says which documents a knowledge base holds, and their chunks.

A document's id is ``<source key>/<path in the source>`` (a single-file source: the key alone),
so equal paths under two sources never meet. A source's key is given once, when the source is
first ingested: the last component of its absolute path, with ``-2``, ``-3``… when another
location holds that name already; the ``sources`` table keeps ``key -> location``. A catalog
written before ids were qualified has no ``settings.document_ids`` and is migrated by
:mod:`toolkernel_rag.migration`.

It is the source of truth for ingestion. A document row carries the content hash it was
last indexed with and a state: ``pending`` while its chunks are being written to the vector
store, ``done`` once they all are. A run killed midway leaves ``pending`` rows (or none), so
the next run rewrites exactly those documents; chunk ids are deterministic, so rewriting
never duplicates. Documents and chunks keep their BM25 terms and chunks their text, metadata
and vector (float32), from which the sparse index is rebuilt and extensions are caught up
without re-embedding.

What changed since a generation can be read without reading everything (:meth:`Catalog.changes`):
chunk rowids only grow (a chunk is never given a rowid any chunk had before), so the chunks
added since are those above the highest rowid seen then, and every removed chunk leaves a
tombstone (``removed_chunks``: its rowid and the generation that removed it). ``log_from`` is
the first generation from which that log is complete (a catalog upgraded from an older
toolkernel-rag, or one whose ids were migrated in place, starts it anew).

SQLite runs in WAL mode with ``synchronous=NORMAL``: a committed transaction survives a
killed process.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import numpy.typing as npt

from toolkernel.knowledge import ChunkRecord
from toolkernel_rag import segment_files
from toolkernel_rag.layout import KBError
from toolkernel_rag.postings import ChunkRow

EXTENSIONS_DIR = "extensions"
"""Beside the catalog: each extension's directory (:data:`toolkernel_rag.layout.EXTENSIONS_DIR`)."""

EXTENSION_LOCK_SECONDS = 600.0
"""How long a writer waits for another to finish catching an extension up."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done')),
    metadata TEXT NOT NULL,
    text TEXT NOT NULL,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    terms TEXT
);
CREATE INDEX IF NOT EXISTS documents_source ON documents (source);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    document_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    vector BLOB,
    terms TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document_id, seq);
CREATE TABLE IF NOT EXISTS extension_state (
    extension TEXT NOT NULL,
    document_id TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (extension, document_id)
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (key TEXT PRIMARY KEY, location TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS removed_chunks (rowid INTEGER PRIMARY KEY, generation INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS removed_chunks_generation ON removed_chunks (generation);
CREATE INDEX IF NOT EXISTS documents_pending ON documents (id) WHERE state = 'pending';
"""


def _chunk_counts(row: str) -> str:
    """Whether the chunk ``row`` (``NEW`` or ``OLD``) counts in ``done_vectors``: 0 or 1."""
    return (
        f"({row}.vector IS NOT NULL AND EXISTS "
        f"(SELECT 1 FROM documents d WHERE d.id = {row}.document_id AND d.state = 'done'))"
    )


def _document_counts(row: str) -> str:
    """What the document ``row`` (``NEW`` or ``OLD``) counts in ``done_vectors``: its chunks
    with a vector, if it is done."""
    return (
        f"(({row}.state = 'done') * "
        f"(SELECT COUNT(*) FROM chunks c WHERE c.document_id = {row}.id AND c.vector IS NOT NULL))"
    )


_DONE_VECTORS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS done_vectors_{name} AFTER {event} BEGIN "
    f"UPDATE settings SET value = CAST(value AS INTEGER) {delta} WHERE key = 'done_vectors'; END"
    for name, event, delta in (
        ("chunk_added", "INSERT ON chunks", f"+ {_chunk_counts('NEW')}"),
        ("chunk_removed", "DELETE ON chunks", f"- {_chunk_counts('OLD')}"),
        (
            "chunk_changed",
            "UPDATE OF vector, document_id ON chunks",
            f"- {_chunk_counts('OLD')} + {_chunk_counts('NEW')}",
        ),
        ("document_added", "INSERT ON documents", f"+ {_document_counts('NEW')}"),
        ("document_removed", "DELETE ON documents", f"- {_document_counts('OLD')}"),
        (
            "document_changed",
            "UPDATE OF id, state ON documents",
            f"- {_document_counts('OLD')} + {_document_counts('NEW')}",
        ),
    )
)
"""Keeps ``settings.done_vectors``, the chunks with a vector of done documents (what the vector
store must hold, pending documents aside), in the transaction of every change, whichever
statement makes it: a writer's store check reads one row instead of counting every chunk. Each
trigger adds what its row's change adds to that sum (a chunk counts while it has a vector and
its document is done), so a document renamed before its chunks, or deleted after them, keeps it
right. ``INSERT OR REPLACE`` on these tables would bypass the delete triggers: none is used."""

QUALIFIED_IDS = "qualified"
"""``settings.document_ids`` of a catalog whose document ids start with their source's key."""


_DONE = " JOIN documents d ON d.id = c.document_id AND d.state = 'done'"
"""Narrows a query over ``chunks c`` to done documents. A join, not ``IN (SELECT ...)``: SQLite
plans that as a sort of every chunk per statement, so paging 294,000 chunks took 34 s (0.38 s)."""


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as the catalog keeps it (the extension-facing :class:`ChunkRecord` plus span and terms)."""

    id: str
    document_id: str
    seq: int
    start: int
    end: int
    text: str
    metadata: dict[str, Any]
    vector: list[float] | None
    terms: str

    def record(self, include_vector: bool = True) -> ChunkRecord:
        return ChunkRecord(
            self.id, self.document_id, self.text, self.metadata, self.vector if include_vector else None
        )


@dataclass(frozen=True, slots=True)
class Changes:
    """What :meth:`Catalog.changes` found: the generation now, the highest chunk rowid now (chunks
    above the one asked about are new), and the rowids at or below it removed since."""

    generation: int
    max_rowid: int
    removed: list[int]


@dataclass(frozen=True, slots=True)
class SourceRow:
    """A source the knowledge base was fed from: its key (the first part of its documents' ids) and path."""

    key: str
    location: str
    documents: int


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """A document's row, without its text."""

    id: str
    source: str
    hash: str
    state: str
    metadata: dict[str, Any]
    chunk_count: int


def source_key_for(location: str, taken: Collection[str]) -> str:
    """A new source's key: the last component of ``location``, then ``-2``, ``-3``… until not ``taken``."""
    base = PurePosixPath(location.replace("\\", "/")).name or "root"
    key, n = base, 1
    while key in taken:
        n += 1
        key = f"{base}-{n}"
    return key


def _blob(vector: Sequence[float] | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


_RESETS = "extension_resets:"
"""Prefix of the settings that count each extension's resets."""


def _unblob(blob: bytes | None) -> list[float] | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32).tolist()


def _matrix(blobs: Sequence[bytes]) -> npt.NDArray[np.float32]:
    """Stored float32 vectors as one matrix, a row each."""
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)


class Catalog:
    """The SQLite catalog of one knowledge base; safe to use from several threads (one lock).

    ``writable=False`` opens it read-only (``mode=ro``): a reader never creates, migrates or
    changes it, and a missing file is an error instead of a new empty catalog.
    """

    def __init__(self, path: Path, *, writable: bool = True) -> None:
        self.path = path
        self.writable = writable
        if not writable and not path.is_file():
            raise KBError(
                f"knowledge base {str(path.parent)!r}: {path.name} is missing, so its documents are gone; "
                f"delete it (toolkernel kb delete --kb {path.parent}) and ingest again"
            )
        target = str(path) if writable else f"{path.resolve().as_uri()}?mode=ro"
        self._db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, uri=not writable)
        self._lock = threading.RLock()
        try:
            with self._lock:
                if writable:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA synchronous=NORMAL")
                    self._db.executescript(_SCHEMA)
                columns = {r[1] for r in self._db.execute("PRAGMA table_info(documents)")}
                if not columns:
                    raise sqlite3.DatabaseError("it holds no documents table")
                if "terms" not in columns and writable:
                    # A catalog written before documents kept their terms.
                    self._db.execute("ALTER TABLE documents ADD COLUMN terms TEXT")
                    columns.add("terms")
                    self._set_setting("log_from", str(self.generation()))  # derived data is rebuilt
                self._document_terms = "terms" in columns
                if writable and self._setting("log_from") is None:
                    self._set_setting("log_from", str(self.generation()))
                if writable:
                    self._keep_done_vectors()
                self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise KBError(
                f"knowledge base {str(path.parent)!r}: {path.name} is damaged or not a catalog ({exc}); "
                "its documents cannot be read: restore it from a backup, or delete the knowledge base "
                "and ingest again"
            ) from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- documents -----------------------------------------------------------------

    def hashes(self, source: str | None = None) -> dict[str, tuple[str, str]]:
        """``document id -> (hash, state)``, for one source or every document."""
        with self._lock:
            rows = (
                self._db.execute("SELECT id, hash, state FROM documents WHERE source = ?", (source,))
                if source is not None
                else self._db.execute("SELECT id, hash, state FROM documents")
            )
            return {r[0]: (r[1], r[2]) for r in rows}

    def hashes_of(self, document_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``document id -> (hash, state)`` of those of ``document_ids`` the catalog holds: an
        ingest asks a window of documents at a time instead of holding a whole source's."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, hash, state FROM documents WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(document_ids)),),
            )
            return {r[0]: (r[1], r[2]) for r in rows}

    def source_ids(self, source: str, after: str, limit: int) -> list[str]:
        """Ids of the documents of ``source`` (any state) after id ``after``, in id order, ``limit``
        at a time: what an ingest pages through to find the documents gone from a source."""
        with self._lock:
            # ``+source``: walk the primary key in id order and stop at ``limit``, rather than
            # sort every document of the source on each page.
            rows = self._db.execute(
                "SELECT id FROM documents WHERE id > ? AND +source = ? ORDER BY id LIMIT ?",
                (after, source, limit),
            )
            return [r[0] for r in rows]

    def mark_pending(self, docs: Iterable[tuple[str, str, str, dict[str, Any], str, str]]) -> None:
        """Record documents ``(id, source, hash, metadata, text, terms)`` as being written."""
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT INTO documents (id, source, hash, state, metadata, text, terms) "
                "VALUES (?, ?, ?, 'pending', ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET source=excluded.source, hash=excluded.hash, state='pending', "
                "metadata=excluded.metadata, text=excluded.text, terms=excluded.terms",
                [(i, s, h, json.dumps(m, ensure_ascii=False), t, terms) for i, s, h, m, t, terms in docs],
            )
            self._db.execute(
                "INSERT OR IGNORE INTO settings (key, value) VALUES ('document_ids', ?)", (QUALIFIED_IDS,)
            )

    def commit_documents(self, document_ids: Sequence[str], chunks: Sequence[StoredChunk]) -> None:
        """Replace the chunks of ``document_ids`` with ``chunks`` and mark them done (one transaction)."""
        counts: dict[str, int] = dict.fromkeys(document_ids, 0)
        for c in chunks:
            counts[c.document_id] += 1
        with self._lock, self._transaction():
            first = self._next_rowids(len(chunks))
            self._tombstone(document_ids)
            self._db.executemany("DELETE FROM chunks WHERE document_id = ?", [(d,) for d in document_ids])
            self._db.executemany(
                "INSERT INTO chunks (rowid, id, document_id, seq, start, end, text, metadata, vector, terms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        first + n,
                        c.id,
                        c.document_id,
                        c.seq,
                        c.start,
                        c.end,
                        c.text,
                        json.dumps(c.metadata, ensure_ascii=False),
                        _blob(c.vector),
                        c.terms,
                    )
                    for n, c in enumerate(chunks)
                ],
            )
            self._db.executemany(
                "UPDATE documents SET state='done', chunk_count=? WHERE id = ?",
                [(n, d) for d, n in counts.items()],
            )
            self._bump_generation()

    def delete_documents(self, document_ids: Sequence[str]) -> None:
        """Remove documents and their chunks (one transaction)."""
        with self._lock, self._transaction():
            params = [(d,) for d in document_ids]
            self._tombstone(document_ids)
            self._db.executemany("DELETE FROM chunks WHERE document_id = ?", params)
            self._db.executemany("DELETE FROM documents WHERE id = ?", params)
            self._bump_generation()

    def _next_rowids(self, n: int) -> int:
        """The first of ``n`` chunk rowids above every rowid given before (read before any delete:
        SQLite would hand a deleted highest rowid out again)."""
        (highest,) = self._db.execute("SELECT COALESCE(max(rowid), 0) FROM chunks").fetchone()
        first = max(int(highest), int(self._setting("chunk_rowid_high") or 0)) + 1
        self._set_setting("chunk_rowid_high", str(first + n - 1))
        return first

    def _tombstone(self, document_ids: Sequence[str]) -> None:
        """Record the chunks of ``document_ids`` as removed by the generation being committed."""
        generation = self.generation() + 1
        self._db.executemany(
            "INSERT OR REPLACE INTO removed_chunks (rowid, generation) "
            "SELECT rowid, ? FROM chunks WHERE document_id = ?",
            [(generation, d) for d in document_ids],
        )

    def chunk_ids(self, document_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM chunks WHERE document_id = ? ORDER BY seq", (document_id,)
            )
            return [r[0] for r in rows]

    def document(self, document_id: str) -> tuple[DocumentRow, str] | None:
        """A document's row and its full text, or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, source, hash, state, metadata, chunk_count, text FROM documents WHERE id = ?",
                (document_id,),
            ).fetchone()
        if row is None:
            return None
        return DocumentRow(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5]), row[6]

    def documents(
        self, limit: int | None = None, after: str | None = None, source: str | None = None
    ) -> list[DocumentRow]:
        """Done documents ordered by id, ``limit`` at a time after id ``after``; only ``source``'s if given.

        ``source`` is a location, as :meth:`source_location` returns it.
        """
        where = "state = 'done' AND id > ?" + (" AND source = ?" if source is not None else "")
        params: list[Any] = [after or ""] + ([source] if source is not None else [])
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, source, hash, state, metadata, chunk_count FROM documents "
                f"WHERE {where} ORDER BY id LIMIT ?",
                (*params, -1 if limit is None else limit),
            )
            return [DocumentRow(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5]) for r in rows]

    def missing(self, document_ids: Sequence[str]) -> list[str]:
        """Those of ``document_ids`` the catalog does not hold (in the order given)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM documents)",
                (json.dumps(list(document_ids)),),
            ).fetchall()
        return [r[0] for r in rows]

    def counts(self) -> tuple[int, int, int]:
        """``(done documents, pending documents, chunks)``."""
        with self._lock:
            done, pending = self._db.execute(
                "SELECT COALESCE(SUM(state='done'), 0), COALESCE(SUM(state='pending'), 0) FROM documents"
            ).fetchone()
            (chunks,) = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()
        return int(done), int(pending), int(chunks)

    def chunk_totals(self) -> tuple[int, int]:
        """``(done documents that have chunks, chunks)``: what a search estimates its over-fetch from."""
        with self._lock:
            (documents,) = self._db.execute(
                "SELECT COUNT(*) FROM documents WHERE state='done' AND chunk_count > 0"
            ).fetchone()
            (chunks,) = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()
        return int(documents), int(chunks)

    # -- sources -----------------------------------------------------------------------

    def source_key(self, location: str) -> str:
        """The key of the source at ``location`` (an absolute path), given now if it has none.

        The key is the location's last component, made unique with ``-2``, ``-3``…
        """
        with self._lock, self._transaction():
            row = self._db.execute("SELECT key FROM sources WHERE location = ?", (location,)).fetchone()
            if row is not None:
                return str(row[0])
            taken = {r[0] for r in self._db.execute("SELECT key FROM sources")}
            key = source_key_for(location, taken)
            self._db.execute("INSERT INTO sources (key, location) VALUES (?, ?)", (key, location))
            return key

    def source_location(self, key_or_location: str) -> str | None:
        """The location of the source with this key or location, or ``None`` when there is none."""
        with self._lock:
            row = self._db.execute(
                "SELECT location FROM sources WHERE key = ? OR location = ?",
                (key_or_location, key_or_location),
            ).fetchone()
        return None if row is None else str(row[0])

    def sources(self) -> list[SourceRow]:
        """Every source, by key, with how many documents it holds."""
        with self._lock:
            rows = self._db.execute(
                "SELECT s.key, s.location, (SELECT COUNT(*) FROM documents d WHERE d.source = s.location) "
                "FROM sources s ORDER BY s.key"
            ).fetchall()
        return [SourceRow(r[0], r[1], int(r[2])) for r in rows]

    def locations_of(self, document_ids: Sequence[str]) -> set[str]:
        """The locations of the sources these documents came from."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT source FROM documents WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(document_ids)),),
            ).fetchall()
        return {r[0] for r in rows}

    def forget_source(self, location: str) -> None:
        """Drop a source's key once none of its documents is left (its key may then go to another)."""
        with self._lock, self._transaction():
            self._db.execute(
                "DELETE FROM sources WHERE location = ? AND NOT EXISTS "
                "(SELECT 1 FROM documents WHERE source = ?)",
                (location, location),
            )

    # -- document id migration ------------------------------------------------------------

    def needs_id_migration(self) -> bool:
        """Whether the documents still carry the ids of an older catalog (relative to their source)."""
        if self._setting("document_ids") == QUALIFIED_IDS:
            return False
        with self._lock:
            return self._db.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is not None

    def legacy_documents(self) -> list[tuple[str, str]]:
        """``(id, source location)`` of every document, for the id migration."""
        with self._lock:
            return [(r[0], r[1]) for r in self._db.execute("SELECT id, source FROM documents ORDER BY id")]

    def qualify_ids(self, sources: Mapping[str, str], renames: Sequence[tuple[str, str]]) -> None:
        """Give sources their keys (``location -> key``) and documents their new ids ``(old, new)``.

        One transaction: the documents, their chunks (ids, ``document_id`` and metadata) and
        the flag that the vector store must be rebuilt from the catalog. Extensions keep the
        old ids until the next catch-up, which sends them as deleted and the new ones as added.
        """
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO sources (key, location) VALUES (?, ?)",
                [(k, loc) for loc, k in sources.items()],
            )
            self._db.execute(
                "CREATE TEMP TABLE IF NOT EXISTS renames (old TEXT PRIMARY KEY, new TEXT NOT NULL)"
            )
            self._db.execute("DELETE FROM renames")
            self._db.executemany("INSERT INTO renames (old, new) VALUES (?, ?)", renames)
            # Through a prefix no id holds, so an old id equal to another's new id never collides.
            self._db.execute("UPDATE renames SET new = char(1) || new")
            for _ in range(2):
                self._db.execute(
                    "UPDATE documents SET id = (SELECT new FROM renames WHERE old = documents.id) "
                    "WHERE id IN (SELECT old FROM renames)"
                )
                self._db.execute(
                    "UPDATE chunks SET "
                    "id = (SELECT new FROM renames WHERE old = chunks.document_id) || '#' || seq, "
                    "metadata = json_set(metadata, '$.document_id', "
                    "(SELECT new FROM renames WHERE old = chunks.document_id)), "
                    "document_id = (SELECT new FROM renames WHERE old = chunks.document_id) "
                    "WHERE document_id IN (SELECT old FROM renames)"
                )
                self._db.execute("UPDATE renames SET old = new, new = substr(new, 2)")
            self._db.execute("DROP TABLE renames")
            self._set_setting("document_ids", QUALIFIED_IDS)
            self._set_setting("store_stale", "1")
            self._bump_generation()
            self._set_setting("log_from", str(self.generation()))  # chunks changed in place

    def store_stale(self) -> bool:
        """Whether the vector store must be rebuilt from the catalog (an id migration did not finish)."""
        return self._setting("store_stale") == "1"

    def set_store_fresh(self) -> None:
        with self._lock, self._transaction():
            self._db.execute("DELETE FROM settings WHERE key = 'store_stale'")

    def chunk_batches(self, size: int) -> Iterator[list[StoredChunk]]:
        """Every chunk with its vector, ``size`` at a time in a stable order (to rebuild a store)."""
        last = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT rowid, id, document_id, seq, start, end, text, metadata, vector, terms "
                    "FROM chunks WHERE rowid > ? ORDER BY rowid LIMIT ?",
                    (last, size),
                ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield [
                StoredChunk(r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]), _unblob(r[8]), r[9])
                for r in rows
            ]

    # -- chunks ----------------------------------------------------------------------

    def chunks(self, ids: Sequence[str], include_vectors: bool = False) -> list[StoredChunk]:
        """The chunks with these ids, in the order given; unknown ids are left out."""
        if not ids:
            return []
        vector_col = "vector" if include_vectors else "NULL"
        found: dict[str, StoredChunk] = {}
        with self._lock:
            for first in range(0, len(ids), 500):
                part = list(ids[first : first + 500])
                rows = self._db.execute(
                    f"SELECT id, document_id, seq, start, end, text, metadata, {vector_col}, terms "
                    f"FROM chunks WHERE id IN ({','.join('?' * len(part))})",
                    part,
                )
                for r in rows:
                    found[r[0]] = StoredChunk(
                        r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), _unblob(r[7]), r[8]
                    )
        return [found[i] for i in ids if i in found]

    def document_chunks(self, document_ids: Sequence[str]) -> list[StoredChunk]:
        """Every chunk of these documents, with vectors, in document then chunk order."""
        out: list[StoredChunk] = []
        with self._lock:
            for d in document_ids:
                rows = self._db.execute(
                    "SELECT id, document_id, seq, start, end, text, metadata, vector, terms "
                    "FROM chunks WHERE document_id = ? ORDER BY seq",
                    (d,),
                )
                out.extend(
                    StoredChunk(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]), _unblob(r[7]), r[8])
                    for r in rows
                )
        return out

    def chunk_rows(self, after: int = 0, page: int = 2000) -> Iterator[ChunkRow]:
        """Every chunk above rowid ``after`` in rowid order, as the sparse index is built from it,
        read ``page`` rows at a time."""
        last = after
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT rowid, id, document_id, terms, metadata FROM chunks "
                    "WHERE rowid > ? ORDER BY rowid LIMIT ?",
                    (last, page),
                ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            for r in rows:
                yield ChunkRow(r[0], r[1], r[2], r[3], r[4])

    _FIRST_CHUNKS = "SELECT document_id, min(rowid) AS first FROM chunks GROUP BY document_id"

    def documents_by_first_chunk(self, page: int = 2000) -> Iterator[tuple[str, str | None, str | None]]:
        """``(document id, state, terms)`` of every document that has chunks, in the order of its
        first chunk's rowid (``state`` and ``terms`` are ``None`` for chunks without a document row)."""
        column = "d.terms" if self._document_terms else "NULL"
        yield from self._paged(
            f"SELECT f.document_id, d.state, {column} FROM ({self._FIRST_CHUNKS}) f "
            "LEFT JOIN documents d ON d.id = f.document_id ORDER BY f.first",
            page,
        )

    def chunk_rowids_by_document(self, page: int = 2000) -> Iterator[tuple[str, int]]:
        """``(document id, chunk rowid)`` of every chunk, documents in the order of their first
        chunk's rowid, each document's chunks in rowid order."""
        yield from self._paged(
            f"SELECT c.document_id, c.rowid FROM chunks c JOIN ({self._FIRST_CHUNKS}) f "
            "USING (document_id) ORDER BY f.first, c.rowid",
            page,
        )

    def _paged(self, query: str, page: int) -> Iterator[Any]:
        """Rows of one query in one read transaction, fetched ``page`` at a time (SQLite sorts on
        disk past its cache, so a large catalog is never held in memory)."""
        with self._lock:
            cursor = self._db.execute(query)
        try:
            while True:
                with self._lock:
                    rows = cursor.fetchmany(page)
                if not rows:
                    return
                yield from rows
        finally:
            cursor.close()

    def terms_of(self, document_ids: Sequence[str]) -> dict[str, str | None]:
        """``document id -> terms`` of those done documents (``None`` where an older catalog kept none)."""
        column = "terms" if self._document_terms else "NULL"
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, {column} FROM documents WHERE state = 'done' "
                "AND id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(document_ids)),),
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def changes(self, generation: int, max_rowid: int) -> Changes | None:
        """What changed since ``generation``, whose chunks reached rowid ``max_rowid``; ``None`` when
        the log does not reach that far back (read everything). Call inside :meth:`reading`."""
        log_from = self._setting("log_from")
        if log_from is None or not int(log_from) <= generation <= self.generation():
            return None
        with self._lock:
            try:
                removed = [
                    r[0]
                    for r in self._db.execute(
                        "SELECT rowid FROM removed_chunks WHERE generation > ? AND rowid <= ? ORDER BY rowid",
                        (generation, max_rowid),
                    )
                ]
            except sqlite3.OperationalError:  # a catalog no writer of this version has opened yet
                return None
            (highest,) = self._db.execute("SELECT COALESCE(max(rowid), 0) FROM chunks").fetchone()
        return Changes(self.generation(), max(max_rowid, int(highest)), removed)

    def max_rowid(self) -> int:
        """The highest chunk rowid now (0 without chunks)."""
        with self._lock:
            (highest,) = self._db.execute("SELECT COALESCE(max(rowid), 0) FROM chunks").fetchone()
        return int(highest)

    def vectors_above(self, after: int) -> tuple[list[int], list[str], list[dict[str, Any]], bytes]:
        """``(rowids, chunk ids, metadata, float32 vectors concatenated)`` of the chunks with a vector
        above rowid ``after``, by rowid."""
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, id, metadata, vector FROM chunks WHERE vector IS NOT NULL AND rowid > ? "
                "ORDER BY rowid",
                (after,),
            ).fetchall()
        return (
            [r[0] for r in rows],
            [r[1] for r in rows],
            [json.loads(r[2]) for r in rows],
            b"".join(r[3] for r in rows),
        )

    def document_texts(self, document_ids: Sequence[str], max_chars: int) -> dict[str, str]:
        """``document id -> text`` of those documents whose text is at most ``max_chars`` long."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, text FROM documents "
                "WHERE length(text) <= ? AND id IN (SELECT value FROM json_each(?))",
                (max_chars, json.dumps(list(document_ids))),
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def set_document_terms(self, terms: Sequence[tuple[str, str]]) -> None:
        """Keep ``(document id, terms)`` for documents an older catalog stored without them."""
        with self._lock, self._transaction():
            self._db.executemany("UPDATE documents SET terms = ? WHERE id = ?", [(t, d) for d, t in terms])

    # -- extensions --------------------------------------------------------------------

    def extension_changes(self, extension: str, after: str, limit: int) -> list[tuple[str, str]]:
        """``(id, hash)`` of the next ``limit`` done documents after ``after`` (by id) that
        ``extension`` does not hold at their hash: a catch-up reads them page by page, never
        every document's hash at once."""
        with self._lock:
            rows = self._db.execute(
                "SELECT d.id, d.hash FROM documents d LEFT JOIN extension_state e "
                "ON e.extension = ? AND e.document_id = d.id "
                "WHERE d.state = 'done' AND d.id > ? AND (e.hash IS NULL OR e.hash <> d.hash) "
                "ORDER BY d.id LIMIT ?",
                (extension, after, limit),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def extension_forgotten(self, extension: str) -> list[str]:
        """Documents ``extension`` holds that are no longer done documents (deleted), by id."""
        with self._lock:
            rows = self._db.execute(
                "SELECT e.document_id FROM extension_state e LEFT JOIN documents d "
                "ON d.id = e.document_id AND d.state = 'done' "
                "WHERE e.extension = ? AND d.id IS NULL ORDER BY e.document_id",
                (extension,),
            ).fetchall()
        return [r[0] for r in rows]

    def forget_extension(self, extension: str) -> None:
        """Record that ``extension`` holds nothing (its state is rebuilt from scratch), and count
        the reset, so readers that keep the extension open know to open it again."""
        with self._lock, self._transaction():
            self._db.execute("DELETE FROM extension_state WHERE extension = ?", (extension,))
            self._db.execute(
                "INSERT INTO settings (key, value) VALUES (?, '1') "
                "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                (f"{_RESETS}{extension}",),
            )

    def extension_resets(self) -> dict[str, int]:
        """How often each extension's state was reset (:meth:`forget_extension`); absent: never."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key, value FROM settings WHERE key >= ? AND key < ?", (_RESETS, _RESETS + "\uffff")
            ).fetchall()
        return {str(k).removeprefix(_RESETS): int(v) for k, v in rows}

    def set_extension_state(
        self, extension: str, seen: Sequence[tuple[str, str]], forgotten: Sequence[str]
    ) -> None:
        """Record that ``extension`` holds documents ``(id, hash)`` and no longer holds ``forgotten``."""
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO extension_state (extension, document_id, hash) VALUES (?, ?, ?)",
                [(extension, d, h) for d, h in seen],
            )
            self._db.executemany(
                "DELETE FROM extension_state WHERE extension = ? AND document_id = ?",
                [(extension, d) for d in forgotten],
            )

    def _blob_path(self, extension: str, key: str) -> Path:
        return self.path.parent / EXTENSIONS_DIR / extension / key

    def load_blob(self, extension: str, key: str, unless: str | None) -> tuple[str, bytes | None] | None:
        """``(version, data)`` of an extension's named state, a file in its directory; ``data`` is
        ``None`` when the version is still ``unless``."""
        try:
            with self._blob_path(extension, key).open("rb") as file:
                version = _file_version(os.fstat(file.fileno()))
                return version, None if version == unless else file.read()
        except FileNotFoundError:
            return None

    def save_blob(self, extension: str, key: str, data: bytes) -> str:
        """Replace an extension's named state file atomically; returns its new version."""
        path = self._blob_path(extension, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{key}.tmp")
        with tmp.open("wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        return _file_version(path.stat())

    def _segments_path(self, extension: str, key: str) -> Path:
        return self.path.parent / EXTENSIONS_DIR / extension / f"{key}.segments"

    def append_segment(self, extension: str, key: str, data: bytes) -> int:
        """Add a segment to an extension's segmented state (a file, :mod:`toolkernel_rag.segment_files`)."""
        return segment_files.append_segment(self._segments_path(extension, key), data)

    def load_segments(self, extension: str, key: str, after: int) -> list[tuple[int, bytes]]:
        """``(sequence, data)`` of an extension's segments numbered above ``after``, in order."""
        return segment_files.load_segments(self._segments_path(extension, key), after)

    def replace_segments(self, extension: str, key: str, first: int, last: int, data: bytes) -> None:
        """Merge an extension's segments ``first``..``last`` into one numbered ``last``."""
        segment_files.replace_segments(self._segments_path(extension, key), first, last, data)

    @contextmanager
    def extension_lock(self, extension: str) -> Iterator[None]:
        """Hold an exclusive lock file while a writer catches ``extension`` up."""
        path = self.path.with_name(f".extension-{extension}.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + EXTENSION_LOCK_SECONDS
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"{path}: another writer has been catching {extension!r} up for "
                            f"{EXTENSION_LOCK_SECONDS:.0f}s"
                        ) from None
                    time.sleep(0.1)
            yield
        finally:
            os.close(fd)

    def start_bulk_load(self) -> None:
        """Nothing to put off: SQLite's indexes are kept per row, the BM25 index is rebuilt after."""

    def finish_bulk_load(self) -> None:
        """Nothing was put off."""

    # -- generation (bumped on every change, so derived indexes know they are stale) ------

    def generation(self) -> int:
        value = self._setting("generation")
        return int(value) if value is not None else 0

    def _setting(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_setting(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def bump_generation(self) -> None:
        """Tell readers that derived data (an extension's state) changed though the documents did not."""
        with self._lock, self._transaction():
            self._bump_generation()

    def vector_count(self, *, done_only: bool = False) -> int:
        """Chunks that have a vector (what the vector store must hold), of done documents only if asked."""
        done = _DONE if done_only else ""
        with self._lock:
            query = f"SELECT COUNT(*) FROM chunks c{done} WHERE c.vector IS NOT NULL"
            (n,) = self._db.execute(query).fetchone()
        return int(n)

    def kept_done_vectors(self) -> int:
        """:meth:`vector_count` of done documents as the catalog keeps it (one row, see
        ``_DONE_VECTORS``); ``-1`` in an older catalog no writer has opened since."""
        value = self._setting("done_vectors")
        return -1 if value is None else int(value)

    def recount_done_vectors(self) -> int:
        """Count the done documents' vectors again and keep that count (when the kept one is in doubt)."""
        with self._lock, self._transaction():
            count = self.vector_count(done_only=True)
            self._set_setting("done_vectors", str(count))
        return count

    def _keep_done_vectors(self) -> None:
        """Create the triggers that keep ``done_vectors`` and count it once (a catalog made before them)."""
        with self._lock, self._transaction():
            for trigger in _DONE_VECTORS:
                self._db.execute(trigger)
            if self._setting("done_vectors") is None:
                self._set_setting("done_vectors", str(self.vector_count(done_only=True)))

    def pending_documents(self) -> list[str]:
        """Ids of the documents still ``pending`` (a killed run), in id order; read from an index of
        them alone, so it costs what a killed run left, not the catalog's size."""
        with self._lock:
            rows = self._db.execute("SELECT id FROM documents WHERE state = 'pending' ORDER BY id")
            return [r[0] for r in rows]

    def all_vectors(
        self, batch: int = 1024, *, done_only: bool = False
    ) -> Iterator[list[tuple[str, list[float], dict[str, Any]]]]:
        """Every chunk's ``(id, vector, metadata)``, ``batch`` at a time (to rebuild a vector store)."""
        after = 0
        done = _DONE if done_only else ""
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT c.rowid, c.id, c.vector, c.metadata FROM chunks c{done} "
                    "WHERE c.rowid > ? AND c.vector IS NOT NULL ORDER BY c.rowid LIMIT ?",
                    (after, batch),
                ).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            yield [(r[1], _unblob(r[2]) or [], json.loads(r[3])) for r in rows]

    def vector_pages(self, batch: int = 1024) -> Iterator[tuple[list[str], np.ndarray]]:
        """The ids and float32 vectors (one row each) of every done document's chunks, ``batch``
        rows at a time: a scan that holds one page, never every vector."""
        for rows in self._done_vector_pages("c.id, c.vector", batch):
            yield [r[1] for r in rows], _matrix([r[2] for r in rows])

    def vector_rows(self, batch: int = 1024) -> Iterator[tuple[npt.NDArray[np.int64], np.ndarray]]:
        """:meth:`vector_pages` by row number instead of chunk id (what an index keyed by rows
        needs: no id held per vector)."""
        for rows in self._done_vector_pages("c.vector", batch):
            yield np.array([r[0] for r in rows], dtype=np.int64), _matrix([r[1] for r in rows])

    def _done_vector_pages(self, columns: str, batch: int) -> Iterator[list[Any]]:
        """Pages of ``(rowid, *columns)`` rows of every done chunk with a vector, in row order."""
        after = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT c.rowid, {columns} FROM chunks c{_DONE} "
                    "WHERE c.rowid > ? AND c.vector IS NOT NULL ORDER BY c.rowid LIMIT ?",
                    (after, batch),
                ).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            yield rows

    def vectors_at(self, rowids: Sequence[int]) -> tuple[npt.NDArray[np.int64], list[str], np.ndarray]:
        """The row numbers, chunk ids and float32 vectors of these rows that are done chunks with a
        vector, in row order (one query, however many rows)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT c.rowid, c.id, c.vector FROM chunks c{_DONE} "
                "WHERE c.rowid IN (SELECT value FROM json_each(?)) AND c.vector IS NOT NULL ORDER BY c.rowid",
                (json.dumps([int(r) for r in rowids]),),
            ).fetchall()
        rowid_array = np.array([r[0] for r in rows], dtype=np.int64)
        return rowid_array, [r[1] for r in rows], _matrix([r[2] for r in rows])

    def reading(self) -> _Reading:
        """A read transaction: every read inside it sees one committed state of the catalog."""
        return _Reading(self._db, self._lock)

    def _bump_generation(self) -> None:
        self._db.execute(
            "INSERT INTO settings (key, value) VALUES ('generation', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


def _file_version(stat: os.stat_result) -> str:
    """A file's version: a replace makes a new inode, a rewrite a new time or size."""
    return f"{stat.st_ino}-{stat.st_mtime_ns}-{stat.st_size}"


class _Reading:
    """``BEGIN`` … ``COMMIT`` holding the catalog's lock: WAL readers see one snapshot throughout."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> None:
        self._lock.acquire()
        self._db.execute("BEGIN")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        try:
            self._db.execute("COMMIT")
        finally:
            self._lock.release()


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc is None else "ROLLBACK")
