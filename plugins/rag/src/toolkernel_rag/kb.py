"""A knowledge base opened for use: its catalog, vector store, embedder, sparse index and extensions.

:meth:`KnowledgeBase.open` reads the manifest (or writes it, creating the knowledge base)
and refuses a mismatch: asking for another embedder than the one the vectors came from is
an error, never silent garbage. A knowledge base is opened either **writable** (one process
at a time: it holds the writer lock, owns the embedded vector store and saves derived data)
or **read-only** (any number of processes: nothing is written; an embedded store's vectors
are read from the catalog, and a background thread follows the catalog's generation and
swaps in whole new views, see :mod:`toolkernel_rag.view`).

:meth:`KnowledgeBase.search` runs dense, sparse or hybrid retrieval over documents (or an
extension's mode), fuses by reciprocal rank, reranks when asked, and hydrates chunks from
the catalog.
"""

from __future__ import annotations

import json
import math
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
from opentelemetry import trace

from toolkernel.filters import ALL_OPERATORS, coerce_filter, matches, require_supported
from toolkernel.knowledge import (
    ChunkRecord,
    ExtensionState,
    KBExtension,
    RetrievalRequest,
    ScoredChunk,
    StateSegment,
)
from toolkernel_rag.backend import CatalogBackend, SparseBackend
from toolkernel_rag.catalog import Catalog, DocumentRow, SourceRow, StoredChunk
from toolkernel_rag.layout import (
    CATALOG,
    EXTENSIONS_DIR,
    SPARSE_DIR,
    STORE_DIR,
    EmbedderSpec,
    KBError,
    KBLocation,
    Manifest,
    StoreSpec,
    kb_name,
    read_manifest,
    resolve_location,
    write_manifest,
)
from toolkernel_rag.locking import WriterLock
from toolkernel_rag.neighbours import NeighbourSearch
from toolkernel_rag.settings import RagSettings
from toolkernel_rag.shapes import BUILTIN_MODES
from toolkernel_rag.sparse import SparseIndex
from toolkernel_rag.view import Follower, View

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.chunkers import Chunker
    from toolkernel.embedders import Embedder
    from toolkernel.rerankers import Reranker
    from toolkernel.vectors import VectorStore
    from toolkernel_rag.postgres.connection import Database

DEFAULT_STORE = "qdrant"

RRF_K = 60
FUSION_DEPTH = 100
"""Documents each of dense and sparse contributes to the fusion (the SciFact reference used 100)."""
MAX_CHUNK_OVERFETCH = 8.0
"""Dense retrieval asks the store for at most this many chunks per document wanted."""
MAX_DENSE_REFETCH = 64
"""Dense mode stops asking for more chunks at this many per document wanted."""
RERANK_DEPTH = 50
"""Documents a reranker re-scores before the top ``top_k`` are kept."""
RERANK_DOCUMENT_CHARS = 4000
"""A candidate is a document: the reranker reads its whole text up to this length, else the passage.

The passage shown for a document is the best chunk of one ranking; the other ranking may have
matched another chunk. On SciFact (250-token chunks) the weighted reranker scored 2.3 nDCG
points under hybrid reading passages and 0.4 under it reading whole abstracts.
"""

DOCUMENT_SCAN = 500
"""Catalog rows read at a time when documents are listed under a metadata filter."""

_tracer = trace.get_tracer("toolkernel_rag")


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved chunk, hydrated: what ``search`` returns before shaping it for MCP."""

    chunk: StoredChunk
    score: float


class KnowledgeBase:
    """One knowledge base, open; close it with :meth:`aclose` (or ``async with``)."""

    def __init__(
        self,
        location: KBLocation | Path,
        manifest: Manifest,
        kernel: Kernel,
        *,
        extensions: bool | Collection[str] = True,
        writable: bool = True,
        lock: WriterLock | None = None,
        database: Database | None = None,
    ) -> None:
        if isinstance(location, Path):
            location = KBLocation(kb_name(location), directory=location)
        self.location = location
        """Where the knowledge base lives: a directory, or a schema of a PostgreSQL database."""
        self.manifest = manifest
        self.kernel = kernel
        self.writable = writable
        self._lock = lock
        self.catalog: CatalogBackend
        self.sparse: SparseBackend
        if database is not None:
            from toolkernel_rag.postgres.catalog import PgCatalog
            from toolkernel_rag.postgres.schema import schema_name
            from toolkernel_rag.postgres.search import PgSparse

            catalog = PgCatalog(database, schema_name(location.name), manifest.embedder.dimension)
            self.catalog, self.sparse = catalog, PgSparse(catalog, manifest.sparse)
        else:
            self.catalog = Catalog(self.directory / CATALOG, writable=writable)
            self.sparse = SparseIndex(self.directory / SPARSE_DIR, manifest.sparse, writable=writable)
        self._store: VectorStore | None = None
        self._embedder: Embedder | None = None
        self._query_embedder: Embedder | None = None
        self._chunkers: dict[str, Chunker] = {}
        self._rerankers: dict[str, Reranker] = {}
        self._overfetch = (-1, 1.0)
        self._overfetch_checked = -math.inf
        self.extensions: dict[str, KBExtension] = {}
        self._enabled_extensions = extensions
        self._extensions_generation = -1
        self._extension_resets: dict[str, int] = {}
        self._neighbours: NeighbourSearch | None = None
        self._follower: Follower | None = None
        self._operators: frozenset[str] = ALL_OPERATORS
        self.migrated = False
        """Whether opening this knowledge base (writable) migrated it from an older layout."""

    @property
    def directory(self) -> Path:
        """The knowledge base's directory (a knowledge base in PostgreSQL has none)."""
        if self.location.directory is None:
            raise KBError(f"knowledge base {self.location} lives in a database, not a directory")
        return self.location.directory

    @property
    def neighbour_search(self) -> NeighbourSearch:
        """How this embedded writer finds extensions' nearest chunks (:mod:`toolkernel_rag.neighbours`)."""
        if self._neighbours is None:
            self._neighbours = NeighbourSearch(
                self.embedded_catalog, self.manifest.embedder.dimension, before_build=self.release_embedder
            )
        return self._neighbours

    def release_neighbour_search(self) -> None:
        """Drop the neighbour index a catch-up built (its memory is not needed past the catch-up)."""
        self._neighbours = None

    @property
    def embedded_catalog(self) -> Catalog:
        """The SQLite catalog, for what only the embedded backend has (views, repair, health)."""
        if not isinstance(self.catalog, Catalog):
            raise KBError(f"knowledge base {self.location} lives in a database: it has no catalog file")
        return self.catalog

    @property
    def embedded_sparse(self) -> SparseIndex:
        """The bm25s index files, for what only the embedded backend has (views, repair, health)."""
        if not isinstance(self.sparse, SparseIndex):
            raise KBError(f"knowledge base {self.location} lives in a database: it has no index files")
        return self.sparse

    @property
    def vectors_in_catalog(self) -> bool:
        """Whether the catalog writes the vectors itself (PostgreSQL), in the chunks' transaction."""
        return self.location.url is not None

    def extension_lock(self, extension: str) -> AbstractContextManager[None]:
        """The lock a writer holds while it catches ``extension`` up (see the backend)."""
        return self.catalog.extension_lock(extension)

    # -- opening ---------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        name_or_path: str | Path,
        *,
        kernel: Kernel | None = None,
        create: bool = False,
        writable: bool | None = None,
        wait: float = 0.0,
        embedder: str | None = None,
        embedder_options: Mapping[str, Any] | None = None,
        store: str | None = None,
        store_options: Mapping[str, Any] | None = None,
        chunker: Mapping[str, Any] | None = None,
        extensions: bool | Collection[str] = True,
        repair: bool = False,
        home: str | None = None,
    ) -> KnowledgeBase:
        """Open the knowledge base at ``name_or_path`` (created when ``create`` and absent).

        ``writable`` (default: ``create``) takes the writer lock first, waiting up to ``wait``
        seconds for another writer, and refuses with the holder's name after that. Read-only,
        nothing in the knowledge base's directory is written and any number of processes may
        have it open while one writes; it follows the writer's changes by itself.

        ``embedder``, ``store`` and ``chunker`` choose them at creation; on an existing
        knowledge base they must agree with its manifest. ``extensions``: ``True`` opens
        every registered extension, ``False`` none, a collection only those named.
        A bare name lives in ``home`` (a directory or a ``postgresql://`` URL; default
        ``$TOOLKERNEL_KB_HOME``, then ``[plugins.rag] home``, then the data directory). In
        PostgreSQL any number of writers may open it at once (documents are locked one by one).

        ``repair`` (writable only) discards an embedded store's files instead of checking them,
        for :func:`toolkernel_rag.repair.repair` to rebuild.

        A knowledge base written by an older toolkernel-rag (document ids not qualified by
        their source) is migrated when opened writable, and refused read-only with the
        command that migrates it.
        """
        if kernel is None:
            from toolkernel._kernel import Kernel

            kernel = Kernel.from_config()
        writable = create if writable is None else writable
        location = resolve_location(name_or_path, home, rag_settings(kernel).home)
        if location.url is not None:
            return await cls._open_database(
                location,
                kernel,
                create,
                writable,
                extensions,
                (embedder, embedder_options, store, None, chunker),
            )
        directory = location.directory
        assert directory is not None
        if not writable:
            manifest = read_manifest(directory)
            if manifest is None:
                raise _no_kb(directory, name_or_path)
            _check_agrees(str(directory), manifest, embedder, store, chunker)
            kb = cls(directory, manifest, kernel, extensions=extensions, writable=False)
            try:
                await kb._up_to_date(str(name_or_path))
                await kb._open_reader()
            except BaseException:
                await kb.aclose()
                raise
            return kb
        return await cls._open_writer(
            directory,
            name_or_path,
            kernel,
            create,
            wait,
            extensions,
            (embedder, embedder_options, store, store_options, chunker),
            repair,
        )

    @classmethod
    async def _open_database(
        cls,
        location: KBLocation,
        kernel: Kernel,
        create: bool,
        writable: bool,
        extensions: bool | Collection[str],
        choices: tuple[Any, Any, Any, Any, Any],
    ) -> KnowledgeBase:
        """Open (or create) a knowledge base kept in a schema of a PostgreSQL database.

        Without ``create`` nothing is written at all, so a server may point at a hot standby.
        """
        embedder, embedder_options, store, _, chunker = choices
        try:
            import psycopg  # noqa: F401

            import toolkernel_pgvector  # noqa: F401
        except ImportError:
            raise KBError(
                f"knowledge base {location}: a postgresql:// home needs the PostgreSQL backend: "
                "pip install 'toolkernel-rag[postgresql]'"
            ) from None
        from toolkernel_rag.postgres import schema as pg
        from toolkernel_rag.postgres.connection import Database

        assert location.url is not None
        if store not in (None, "pgvector"):
            raise KBError(
                f"knowledge base {location}: in PostgreSQL the vectors live beside the chunks "
                f"(pgvector); --store {store!r} cannot be used there"
            )
        schema = pg.schema_name(location.name)
        database = Database(location.url)
        try:
            manifest = await anyio.to_thread.run_sync(pg.read_manifest, database, schema)
            if manifest is None:
                if not create:
                    raise KBError(
                        f"no knowledge base {location.name!r} in {database.where}: create it with "
                        f"'toolkernel kb ingest SOURCE --home {database.where} --kb {location.name}'"
                    )
                spec = StoreSpec(name="pgvector", index=schema)
                made = await _new_manifest(
                    location.name, kernel, embedder, embedder_options, None, None, chunker, spec
                )
                manifest = await anyio.to_thread.run_sync(pg.create, database, schema, made)
            else:
                _check_agrees(str(location), manifest, embedder, store, chunker)
        except BaseException:
            database.close()
            raise
        kb = cls(location, manifest, kernel, extensions=extensions, writable=writable, database=database)
        try:
            from toolkernel_rag.postgres.search import PgVectors

            kb._store = cast("VectorStore", PgVectors(kb.catalog))  # type: ignore[arg-type]
            kb._open_extensions()
        except BaseException:
            await kb.aclose()
            raise
        return kb

    @classmethod
    async def _open_writer(
        cls,
        directory: Path,
        name_or_path: str | Path,
        kernel: Kernel,
        create: bool,
        wait: float,
        extensions: bool | Collection[str],
        choices: tuple[Any, Any, Any, Any, Any],
        repair: bool,
    ) -> KnowledgeBase:
        """Check the choices, take the writer lock, then open (or create) the knowledge base.

        Nothing is created on disk until the embedder, store and chunker named are known to
        exist; a directory this call created is removed again when opening fails.
        """
        embedder, embedder_options, store, store_options, chunker = choices
        manifest = read_manifest(directory)
        if manifest is None:
            if not create:
                raise _no_kb(directory, name_or_path)
            manifest = await _new_manifest(
                kb_name(directory), kernel, embedder, embedder_options, store, store_options, chunker
            )
        created = _make_directory(directory)
        lock = WriterLock(directory)
        kb: KnowledgeBase | None = None
        locked = False
        try:
            lock.acquire(wait)
            locked = True
            recorded = read_manifest(directory)  # another writer may have created it meanwhile
            if recorded is not None:
                _check_agrees(str(directory), recorded, embedder, store, chunker)
                manifest = recorded
                if not (directory / CATALOG).is_file():
                    raise KBError(
                        f"knowledge base {str(directory)!r}: {CATALOG} is missing, so its documents are "
                        f"gone; delete it (toolkernel kb delete --kb {name_or_path}) and ingest again"
                    )
            kb = cls(directory, manifest, kernel, extensions=extensions, writable=True, lock=lock)
            await kb._open_writer_parts(repair)
            if recorded is None:
                write_manifest(directory, manifest)
            await kb._up_to_date(str(name_or_path))
            return kb
        except BaseException:
            if kb is not None:
                await kb.aclose()
            lock.release()
            # Only a writer that got the lock may take away the directory it made: one refused
            # the lock would remove what the writer holding it is creating there.
            if created and locked:
                _remove_unfinished(directory)
            raise

    async def _open_writer_parts(self, repair: bool) -> None:
        from toolkernel_rag.repair import check_store, take_store_files, wipe_embedded_store

        damage = take_store_files(self)
        if repair:
            wipe_embedded_store(self)
        store = self.kernel.vector_store(self.manifest.store.name, **_store_options(self))
        self._store = store
        if repair:
            await store.create_index(self.index, self.manifest.embedder.dimension, "cosine")
        else:
            await check_store(self, damage)
        self._open_extensions()

    async def _open_reader(self) -> None:
        """Open the store when it is shared (a server), load the first view, follow the catalog."""
        options = _store_options(self)
        if not self.embedded_store:
            self._store = self.kernel.vector_store(self.manifest.store.name, **options)
        elif _is_directory(options["path"]):
            # Made only to learn its filter operators (an embedded store opens its files on first use).
            probe = self.kernel.vector_store(self.manifest.store.name, **options)
            self._operators = frozenset(probe.supported_filter_operators)
            await probe.aclose()
        self._follower = Follower(self)
        await anyio.to_thread.run_sync(self._follower.load_first)
        self._follower.start()
        self._open_extensions()

    def _open_extensions(
        self, keep: Mapping[str, KBExtension] | None = None, resets: dict[str, int] | None = None
    ) -> None:
        """Open the enabled extensions, in registry order; those in ``keep`` stay as they are.
        ``resets``: the extensions' reset counts read before deciding what to keep."""
        enabled = self._enabled_extensions
        for entry in self.kernel.kb_extensions.entries():
            if enabled is True or (not isinstance(enabled, bool) and entry.name in enabled):
                kept = keep.get(entry.name) if keep else None
                self.extensions[entry.name] = kept or entry.value(_ExtensionContext(self, entry.name))
        if self._follower is not None:
            self._extensions_generation = self._follower.view.generation
            self._extension_resets = self.embedded_catalog.extension_resets() if resets is None else resets
        else:
            self._extensions_generation = -1

    async def _follow_extensions(self, view: View) -> None:
        """A reader reopens its extensions when the view moves on, so they reload their state.

        One that follows its state by itself (``follows_state``: it reads what writers appended
        since it last looked) is kept open, unless a writer reset its state (``kb repair``)."""
        if self._extensions_generation == view.generation or not self.extensions:
            return
        resets = await anyio.to_thread.run_sync(self.embedded_catalog.extension_resets)
        old, keep = self.extensions, {}
        for name, extension in old.items():
            follows = getattr(extension, "follows_state", False)
            if follows and resets.get(name) == self._extension_resets.get(name):
                keep[name] = extension
        self.extensions = {}
        self._open_extensions(keep, resets)
        self._extensions_generation = view.generation
        for name, extension in old.items():
            if name not in keep:
                await extension.aclose()

    async def _up_to_date(self, asked_as: str) -> None:
        """A writer migrates a knowledge base written by an older toolkernel-rag; a reader refuses it."""
        if not (self.catalog.needs_id_migration() or self.catalog.store_stale()):
            return
        if not self.writable:
            raise KBError(
                f"knowledge base {str(self.directory)!r} was written by an older toolkernel-rag "
                f"(document ids not qualified by their source): migrate it once: "
                f"'toolkernel kb migrate --kb {asked_as}'"
            )
        from toolkernel_rag.migration import bring_up_to_date

        self.migrated = await bring_up_to_date(self)

    async def __aenter__(self) -> KnowledgeBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop following, close extensions, the store and the catalog; release the writer lock."""
        if self._follower is not None:
            await anyio.to_thread.run_sync(self._follower.stop)
            self._follower = None
        await anyio.to_thread.run_sync(self.sparse.close)  # may wait for a warming thread
        for extension in self.extensions.values():
            await extension.aclose()
        self.extensions.clear()
        if self._store is not None:
            await self._store.aclose()
            self._store = None
            if self._lock is not None:  # the writer of an embedded knowledge base
                from toolkernel_rag.repair import seal_store_files

                seal_store_files(self)
        self.catalog.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def embedded_store(self) -> bool:
        """Whether the vector store keeps its files on this machine (a ``path``): then only the
        writer opens it, and readers rank the catalog's vectors themselves."""
        return "path" in self.manifest.store.options

    def require_writable(self, action: str) -> None:
        """Refuse ``action`` on a knowledge base opened read-only."""
        if not self.writable:
            raise KBError(
                f"knowledge base {self.name!r} is open read-only: {action} needs "
                "KnowledgeBase.open(..., writable=True), which takes the writer lock"
            )

    # -- parts -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def store(self) -> VectorStore:
        """The vector store; a reader of an embedded store has none (it ranks the catalog's vectors)."""
        if self._store is None:
            if not self.writable and self.catalog is not None:
                raise KBError(
                    f"knowledge base {self.name!r} is open read-only and its store is embedded: only the "
                    "writer opens the store; open with writable=True"
                )
            raise KBError(f"knowledge base {self.name!r} is closed")
        return self._store

    @property
    def supported_filter_operators(self) -> frozenset[str]:
        """The filter operators search accepts: the store's (a reader keeps the writer's set)."""
        if self._store is not None:
            return frozenset(self._store.supported_filter_operators)
        return self._operators

    @property
    def index(self) -> str:
        return self.manifest.store.index

    @property
    def embedder(self) -> Embedder:
        """The embedder the manifest names (made on first use)."""
        if self._embedder is None:
            spec = self.manifest.embedder
            embedder = shared_embedder(self.kernel, spec.name, spec.options)
            if embedder.dimension != spec.dimension:
                raise KBError(
                    f"knowledge base {self.name!r}: embedder {spec.name!r} now makes vectors of dimension "
                    f"{embedder.dimension}, the knowledge base holds {spec.dimension}: ingest into a new one"
                )
            self._embedder = embedder
        return self._embedder

    def release_embedder(self) -> None:
        """Let go of the embedding model (loaded again by the next embed or query).

        A writer calls it before it builds the neighbour index of an extensions' catch-up: the
        catch-up embeds nothing, and a local model (32 MiB for ``local/wordllama-256``) is
        about what the index and its library take at 100,000 chunks. Only this knowledge base's
        references and the process's shared entry are dropped; another holder keeps its model.
        """
        held = {id(e) for e in (self._embedder, self._query_embedder) if e is not None}
        self._embedder = self._query_embedder = None
        shared = _embedders.get(self.kernel, {})
        for key in [k for k, e in shared.items() if id(e) in held]:
            del shared[key]

    def chunker(self, kind: str, language: str | None = None) -> Chunker:
        """The chunker for a document of ``kind`` (``auto`` picks by kind), options from the manifest.

        ``auto`` cuts a ``code`` document with the grammar of its ``language``.
        """
        return manifest_chunker(self.kernel, self.manifest.chunker, kind, language, self._chunkers)

    def reranker(self, name: str) -> Reranker:
        """The reranker ``name``, made once; one that cannot work here is a :class:`KBError` saying why.

        A reranker may have a ``check()`` method that raises when it cannot work in this
        deployment (the cross-encoder without its model files); it is called before first use.
        """
        if name not in self._rerankers:
            from pydantic import ValidationError

            try:
                made = self.kernel.reranker(name)
                check = getattr(made, "check", None)
                if callable(check):
                    check()
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']}" for e in exc.errors()
                )
                raise KBError(f"reranker {name!r} cannot be used here: {problems}") from None
            except (ValueError, LookupError, OSError) as exc:
                raise KBError(f"reranker {name!r} cannot be used here: {exc}") from None
            self._rerankers[name] = made
        return self._rerankers[name]

    def usable_rerankers(self) -> list[str]:
        """The registered rerankers that can work in this deployment (made and checked without error)."""
        usable = []
        for name in self.kernel.rerankers:
            try:
                self.reranker(name)
            except KBError:
                continue
            usable.append(name)
        return usable

    @property
    def modes(self) -> list[str]:
        """Every ``search`` mode: the built-in three, then each extension's."""
        out = list(BUILTIN_MODES)
        for extension in self.extensions.values():
            out.extend(m for m in extension.modes if m not in out)
        return out

    # -- reading -------------------------------------------------------------------------

    def document(self, document_id: str) -> tuple[DocumentRow, str] | None:
        """A document's row and its full text, or ``None``."""
        return self.catalog.document(document_id)

    def documents(
        self,
        limit: int | None = None,
        after: str | None = None,
        *,
        source: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[DocumentRow]:
        """Documents ordered by id, at most ``limit`` after id ``after``.

        ``source``: only that source's (its key, or its path); ``where``: only those whose
        metadata match a filter of the kernel's filter language (tested document by
        document, so a selective filter on a large knowledge base reads the whole catalog).

        :raises KBError: an unknown source.
        """
        location = None if source is None else self.source_location(source)
        parsed = coerce_filter(where)
        if parsed is None:
            return self.catalog.documents(limit, after, location)
        found: list[DocumentRow] = []
        cursor = after
        while limit is None or len(found) < limit:
            page = self.catalog.documents(DOCUMENT_SCAN, cursor, location)
            found.extend(row for row in page if matches(parsed, row.metadata))
            if len(page) < DOCUMENT_SCAN:
                break
            cursor = page[-1].id
        return found if limit is None else found[:limit]

    def document_chunks(self, document_id: str) -> list[StoredChunk]:
        """A document's chunks, in order, with their vectors."""
        return self.catalog.document_chunks([document_id])

    def sources(self) -> list[SourceRow]:
        """The sources documents came from: key, location, and how many documents each holds."""
        return self.catalog.sources()

    def source_location(self, source: str) -> str:
        """The location of a source named by its key or its path (relative to the working directory).

        :raises KBError: the knowledge base has no such source.
        """
        location = self.catalog.source_location(source)
        if location is None:
            location = self.catalog.source_location(str(Path(source).expanduser().resolve()))
        if location is None:
            known = ", ".join(s.key for s in self.catalog.sources()) or "none"
            raise KBError(f"knowledge base {self.name!r} has no source {source!r} (its sources: {known})")
        return location

    def require_documents(self, document_ids: Sequence[str]) -> None:
        """:raises KBError: naming the ids of ``document_ids`` the knowledge base does not hold."""
        unknown = self.catalog.missing(document_ids)
        if unknown:
            shown = ", ".join(repr(d) for d in unknown[:5]) + (
                f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            )
            raise KBError(
                f"knowledge base {self.name!r} has no document {shown} "
                f"(list them with 'toolkernel kb documents --kb {self.name}')"
            )

    async def remove(self, document_ids: Sequence[str]) -> int:
        """Remove documents by id from the catalog, the store, the BM25 index and every extension.

        :raises KBError: an id the knowledge base does not hold (then nothing is removed).
        """
        from toolkernel_rag.ingestion import remove_documents

        return await remove_documents(self, document_ids)

    async def remove_source(self, source: str) -> int:
        """Remove every document of a source (its key or its path); returns how many."""
        location = self.source_location(source)
        return await self.remove([row.id for row in self.catalog.documents(source=location)])

    @property
    def query_embedder(self) -> Embedder:
        """The embedder for queries: the manifest's, with ``[plugins.rag] query_embedder_options``.

        A query is one short text: for the ``local`` provider the default is at most two
        onnxruntime threads that sleep rather than spin between operators. Two spinning
        threads doubled the CPU per query on this machine; two sleeping ones cost the CPU of
        one and share a query's larger products between the cores.
        """
        if self._query_embedder is None:
            spec = self.manifest.embedder
            options = dict(spec.options)
            if spec.name.startswith("local/"):
                options.setdefault("threads", min(2, os.cpu_count() or 1))
                options.setdefault("spin_wait", False)
            options.update(rag_settings(self.kernel).query_embedder_options)
            if options == spec.options:
                self._query_embedder = self.embedder
            else:
                embedder = shared_embedder(self.kernel, spec.name, options)
                if embedder.dimension != spec.dimension:
                    raise KBError(
                        f"query_embedder_options make {spec.name!r} return vectors of dimension "
                        f"{embedder.dimension}; the knowledge base holds {spec.dimension}"
                    )
                self._query_embedder = embedder
        return self._query_embedder

    async def embed_query(self, query: str) -> list[float]:
        with _tracer.start_as_current_span("kb.embed") as span:
            started = time.perf_counter()
            [vector] = await self.query_embedder.embed([query])
            span.set_attribute("kb.texts", 1)
            span.set_attribute("kb.duration_ms", (time.perf_counter() - started) * 1000)
        return vector

    # -- search ---------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        rerank: str | None = None,
        include_vectors: bool = False,
        depth: int = FUSION_DEPTH,
        rerank_depth: int = RERANK_DEPTH,
        options: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The ``top_k`` best documents for ``query`` under ``filter``, each as its best chunk, best first.

        Dense, sparse and hybrid rank documents (a document's rank is its best chunk's), so the
        results are ``top_k`` distinct documents; an extension's mode decides for itself.

        ``options`` go to an extension's mode (:attr:`RetrievalRequest.options`); the built-in
        modes take none.

        :raises UnsupportedFilterError: the filter uses an operator the store lacks (any mode).
        :raises KBError: an unknown mode, or options given to a built-in mode.
        """
        if options and mode in BUILTIN_MODES:
            raise KBError(f"search mode {mode!r} takes no options; got {sorted(options)}")
        parsed = coerce_filter(filter)
        if parsed is not None:
            require_supported(self.manifest.store.name, self.supported_filter_operators, parsed)
        view = self._current_view()
        if view is not None:
            await self._follow_extensions(view)
        wanted = max(top_k, rerank_depth) if rerank else top_k
        vector_cache: list[list[float]] = []

        async def query_vector() -> list[float]:
            if not vector_cache:
                vector_cache.append(await self.embed_query(query))
            return vector_cache[0]

        with _tracer.start_as_current_span("kb.retrieve") as span:
            started = time.perf_counter()
            span.set_attribute("kb.mode", mode)
            if mode == "dense":
                ranked = _chunks(await self._dense(view, await query_vector(), wanted, filter, fill=True))
            elif mode == "sparse":
                ranked = _chunks(self._sparse(view, query, wanted, filter))
            elif mode == "hybrid":
                ranked = _chunks(await self._hybrid(view, query, query_vector, wanted, filter, depth))
            else:
                ranked = await self._extension_mode(
                    view, mode, query, query_vector, wanted, filter, depth, options or {}
                )
            span.set_attribute("kb.candidates", len(ranked))
            span.set_attribute("kb.duration_ms", (time.perf_counter() - started) * 1000)
        hits = self._hydrate(ranked, include_vectors)
        if rerank:
            hits = await self._rerank(rerank, query, hits)
        return hits[:top_k]

    def _current_view(self) -> View | None:
        """A reader's view of one catalog generation (``None`` for a writer, which reads live)."""
        return self._follower.view if self._follower is not None else None

    async def _dense(
        self,
        view: View | None,
        vector: list[float],
        top_k: int,
        filter: Mapping[str, Any] | None,
        *,
        fill: bool = False,
    ) -> list[tuple[str, ScoredChunk]]:
        """The ``top_k`` best documents by their best chunk's similarity, as ``(document id, chunk)``.

        The store ranks chunks, so it is asked for as many more as a document has chunks on
        average: fewer and a long document's chunks crowd the others out of the fusion's depth
        (SciFact, 2.5 chunks per abstract: hybrid 0.7153 nDCG@10 from 100 chunks, 0.7165 from 300).
        With ``fill`` (what a caller sees, not a fusion's depth) it asks again for twice as many
        until ``top_k`` documents are found or the store has no more.
        """
        fetch = math.ceil(top_k * self._chunks_per_document())
        while True:
            if view is not None and view.dense is not None:
                results: Sequence[Any] = view.dense.query(vector, fetch, filter)
            else:
                results = await self.store.query(self.index, vector, top_k=fetch, filter=filter)
            best: dict[str, ScoredChunk] = {}
            for r in results:
                document_id = str(r.metadata.get("document_id", r.id))
                if document_id not in best:
                    best[document_id] = ScoredChunk(r.id, r.score)
                    if len(best) == top_k:
                        return list(best.items())
            if not fill or len(results) < fetch or fetch >= top_k * MAX_DENSE_REFETCH:
                return list(best.items())
            fetch *= 2

    def _chunks_per_document(self) -> float:
        """Mean chunks per document, between 1 and :data:`MAX_CHUNK_OVERFETCH` (cached per catalog
        state, which is looked at most once a second: in a database each look is a round trip,
        and the totals come from its ``stats`` row, not a count over the chunks)."""
        now = time.monotonic()
        if now - self._overfetch_checked < 1.0:
            return self._overfetch[1]
        self._overfetch_checked = now
        generation = self.catalog.generation()
        if self._overfetch[0] != generation:
            documents, chunks = self.catalog.chunk_totals()
            ratio = chunks / documents if documents else 1.0
            self._overfetch = (generation, max(1.0, min(MAX_CHUNK_OVERFETCH, ratio)))
        return self._overfetch[1]

    def _sparse(
        self, view: View | None, query: str, top_k: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[str, ScoredChunk]]:
        if view is None:
            self.sparse.refresh(self.catalog)
        return self.sparse.search(query, top_k, _allowed(filter), view.sparse if view else None)

    async def _hybrid(
        self,
        view: View | None,
        query: str,
        query_vector: Callable[[], Awaitable[list[float]]],
        top_k: int,
        filter: Mapping[str, Any] | None,
        depth: int,
    ) -> list[tuple[str, ScoredChunk]]:
        n = max(top_k, depth)
        vector: list[list[float]] = []
        dense: list[tuple[str, ScoredChunk]] | None = None

        async def embed() -> None:
            nonlocal dense
            vector.append(await query_vector())
            if view is None:  # the store (a database) answers while BM25 runs: one wait, not two
                dense = await self._dense(view, vector[0], n, filter)

        # BM25 runs in a thread while the query is embedded in another: the two take turns on
        # the GIL only for their Python parts, so the sparse side costs (almost) no wall time.
        if view is None:
            self.sparse.refresh(self.catalog)
        allowed = _allowed(filter)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(embed)
                sparse = await anyio.to_thread.run_sync(
                    self.sparse.search, query, n, allowed, view.sparse if view else None
                )
        except BaseExceptionGroup as group:
            # One side failed (say, the database is down): say what, not "errors in a TaskGroup".
            raise _first_leaf(group) from None
        if dense is None:
            dense = await self._dense(view, vector[0], n, filter)
        with _tracer.start_as_current_span("kb.fuse") as span:
            fused = reciprocal_rank_fusion([dense, sparse], k=RRF_K)
            span.set_attribute("kb.dense", len(dense))
            span.set_attribute("kb.sparse", len(sparse))
            span.set_attribute("kb.fused", len(fused))
        return fused[:top_k]

    async def _extension_mode(
        self,
        view: View | None,
        mode: str,
        query: str,
        query_vector: Callable[[], Awaitable[list[float]]],
        top_k: int,
        filter: Mapping[str, Any] | None,
        depth: int,
        options: Mapping[str, Any],
    ) -> list[ScoredChunk]:
        owner = next((e for e in self.extensions.values() if mode in e.modes), None)
        if owner is None:
            raise KBError(f"search mode {mode!r} is not available; modes: {', '.join(self.modes)}")

        async def seeds(k: int) -> list[ScoredChunk]:
            return _chunks(await self._hybrid(view, query, query_vector, k, filter, max(k, depth)))

        request = RetrievalRequest(query, top_k, filter, seeds, query_vector, dict(options))
        return (await owner.retrieve(mode, request))[:top_k]

    def _hydrate(self, ranked: list[ScoredChunk], include_vectors: bool) -> list[Hit]:
        chunks = {c.id: c for c in self.catalog.chunks([r.id for r in ranked], include_vectors)}
        return [Hit(chunks[r.id], r.score) for r in ranked if r.id in chunks]

    async def _rerank(self, name: str, query: str, hits: list[Hit]) -> list[Hit]:
        from toolkernel_rag.rerankers import Candidate, rerank

        if not hits:
            return hits
        with _tracer.start_as_current_span("kb.rerank") as span:
            started = time.perf_counter()
            # Candidates carry their retrieval scores: a reranker that blends them in (weighted) uses them.
            texts = self.catalog.document_texts([h.chunk.document_id for h in hits], RERANK_DOCUMENT_CHARS)
            candidates = [Candidate(texts.get(h.chunk.document_id, h.chunk.text), h.score) for h in hits]
            order = await rerank(self.reranker(name), query, candidates)
            span.set_attribute("kb.reranker", name)
            span.set_attribute("kb.candidates", len(hits))
            span.set_attribute("kb.duration_ms", (time.perf_counter() - started) * 1000)
        return [Hit(hits[i].chunk, score) for i, score in order]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[tuple[str, ScoredChunk]]], k: int = RRF_K
) -> list[tuple[str, ScoredChunk]]:
    """Fuse rankings of documents: each scores ``sum(1 / (k + rank))`` over the rankings it is in.

    Documents, not chunks, are fused: dense and sparse often pick different chunks of the same
    document, and fusing by chunk would split the document's votes between them. A document
    is shown by the chunk of the ranking that placed it highest (the first ranking on a tie).
    """
    scores: dict[str, float] = {}
    shown: dict[str, tuple[int, ScoredChunk]] = {}
    for ranking in rankings:
        for rank, (document_id, chunk) in enumerate(ranking, start=1):
            scores[document_id] = scores.get(document_id, 0.0) + 1.0 / (k + rank)
            if document_id not in shown or rank < shown[document_id][0]:
                shown[document_id] = (rank, chunk)
    order = sorted(scores.items(), key=lambda kv: -kv[1])
    return [(d, ScoredChunk(shown[d][1].id, score)) for d, score in order]


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _allowed(filter: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], bool] | None:
    """The sparse index's test for a chunk's metadata under ``filter`` (``None``: every chunk)."""
    parsed = coerce_filter(filter)
    return None if parsed is None else (lambda meta: matches(parsed, meta))


def _chunks(ranked: list[tuple[str, ScoredChunk]]) -> list[ScoredChunk]:
    return [chunk for _, chunk in ranked]


class _ExtensionContext:
    """What one extension sees of the knowledge base (:class:`toolkernel.knowledge.KBContext`)."""

    def __init__(self, kb: KnowledgeBase, extension: str) -> None:
        self._kb = kb
        self._extension = extension

    @property
    def name(self) -> str:
        return self._kb.name

    @property
    def directory(self) -> Path:
        if self._kb.location.directory is None:
            raise KBError(
                f"knowledge base {self._kb.location} lives in a database and has no directory: "
                f"extension {self._extension!r} must keep its state with save_state/load_state"
            )
        path = self._kb.directory / EXTENSIONS_DIR / self._extension
        if self._kb.writable:  # a reader never writes into the knowledge base, not even a folder
            path.mkdir(parents=True, exist_ok=True)
        return path

    async def load_state(self, key: str, *, unless: str | None = None) -> ExtensionState | None:
        _check_state_key(key)
        found = await anyio.to_thread.run_sync(self._kb.catalog.load_blob, self._extension, key, unless)
        return None if found is None else ExtensionState(found[0], found[1])

    async def save_state(self, key: str, data: bytes) -> str:
        _check_state_key(key)
        self._kb.require_writable(f"saving the state of extension {self._extension!r}")
        return await anyio.to_thread.run_sync(self._kb.catalog.save_blob, self._extension, key, data)

    async def append_segment(self, key: str, data: bytes) -> int:
        _check_state_key(key)
        self._kb.require_writable(f"saving the state of extension {self._extension!r}")
        return await anyio.to_thread.run_sync(self._kb.catalog.append_segment, self._extension, key, data)

    async def load_segments(self, key: str, *, after: int = 0) -> list[StateSegment]:
        _check_state_key(key)
        found = await anyio.to_thread.run_sync(self._kb.catalog.load_segments, self._extension, key, after)
        return [StateSegment(sequence, data) for sequence, data in found]

    async def replace_segments(self, key: str, first: int, last: int, data: bytes) -> None:
        _check_state_key(key)
        if not 0 < first <= last:
            raise ValueError(f"segments {first}..{last}: expected 0 < first <= last")
        self._kb.require_writable(f"saving the state of extension {self._extension!r}")
        await anyio.to_thread.run_sync(
            self._kb.catalog.replace_segments, self._extension, key, first, last, data
        )

    async def generation(self) -> int:
        return await anyio.to_thread.run_sync(self._kb.catalog.generation)

    async def nearest(
        self,
        vectors: Sequence[Sequence[float]],
        top_k: int,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> list[list[ScoredChunk]]:
        kb = self._kb
        view = kb._current_view()
        if view is not None and view.dense is not None:
            dense = view.dense
            return [
                [ScoredChunk(r.id, r.score) for r in dense.query(list(v), top_k, filter)] for v in vectors
            ]
        if filter is None and kb.location.directory is not None:
            # The embedded writer: a scan of the catalog, or its index (see toolkernel_rag.neighbours).
            found = await anyio.to_thread.run_sync(kb.neighbour_search.nearest, vectors, top_k)
            return [[ScoredChunk(i, s) for i, s in row] for row in found]
        out = []
        for vector in vectors:
            results = await kb.store.query(kb.index, list(vector), top_k=top_k, filter=filter)
            out.append([ScoredChunk(r.id, r.score) for r in results])
        return out

    @property
    def embedder(self) -> str:
        return self._kb.manifest.embedder.name

    @property
    def dimension(self) -> int:
        return self._kb.manifest.embedder.dimension

    @property
    def kernel(self) -> Kernel:
        return self._kb.kernel

    async def load_chunks(self, ids: Sequence[str], *, include_vectors: bool = False) -> list[ChunkRecord]:
        return [c.record(include_vectors) for c in self._kb.catalog.chunks(ids, include_vectors)]

    def matches(self, filter: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> bool:
        return filter is None or matches(filter, metadata)


def _check_state_key(key: str) -> None:
    if not key or "/" in key or key.startswith("."):
        raise ValueError(f"extension state key {key!r}: a file-like name without '/' or a leading '.'")


# -- manifests --------------------------------------------------------------------------------


async def _new_manifest(
    name: str,
    kernel: Kernel,
    embedder: str | None,
    embedder_options: Mapping[str, Any] | None,
    store: str | None,
    store_options: Mapping[str, Any] | None,
    chunker: Mapping[str, Any] | None,
    store_spec: StoreSpec | None = None,
) -> Manifest:
    """A new knowledge base's manifest; ``store_spec`` when the backend fixes the store itself."""
    settings = rag_settings(kernel)
    embedder_name = embedder or settings.embedder
    if embedder_options is None and embedder is None:
        embedder_options = settings.embedder_options
    try:
        made = shared_embedder(kernel, embedder_name, dict(embedder_options or {}))
    except LookupError as exc:
        raise KBError(f"--embedder {embedder_name!r}: {_message(exc)}") from None
    if store_spec is None:
        store_name = store or settings.store
        if store_name not in kernel.vector_stores:
            raise KBError(
                f"--store {store_name!r}: no vector store of that name "
                f"(installed: {', '.join(sorted(kernel.vector_stores)) or 'none'})"
            )
        options = dict(store_options if store_options is not None else settings.store_options)
        if store_name == DEFAULT_STORE and not options:
            options = {"path": STORE_DIR}
        store_spec = StoreSpec(name=store_name, index=name.replace(".", "-"), options=options)
    chunker_spec = dict(chunker) if chunker is not None else default_chunker(settings)
    if chunker_spec.get("length") == "tokens" and "tokenizer" not in chunker_spec:
        from toolkernel_rag.chunking import known_tokenizer

        if known_tokenizer(embedder_name):
            chunker_spec["tokenizer"] = embedder_name
        elif chunker is None and settings.chunk_length == "tokens":
            # No tokenizer known for this embedder: size the default in characters (~4 per token).
            chunker_spec.update(length="characters", size=1000, overlap=120)
    manifest = Manifest(
        name=name,
        embedder=EmbedderSpec(
            name=embedder_name, dimension=made.dimension, options=dict(embedder_options or {})
        ),
        chunker=chunker_spec,
        store=store_spec,
    )
    # Check the chunker's options now, not on the first document.
    probe = dict(chunker_spec)
    kind = probe.pop("name")
    try:
        kernel.chunker("recursive" if kind == "auto" else kind, **probe)
    except LookupError as exc:
        raise KBError(f"--chunker {kind!r}: {_message(exc)}") from None
    return manifest


def _message(exc: BaseException) -> str:
    """An exception's message without the quotes ``KeyError`` adds."""
    return str(exc.args[0]) if exc.args else type(exc).__name__


def _no_kb(directory: Path, name_or_path: str | Path) -> KBError:
    return KBError(
        f"no knowledge base at {str(directory)!r}: create it with "
        f"'toolkernel kb ingest SOURCE --kb {name_or_path}'"
    )


def _make_directory(directory: Path) -> bool:
    """Make the knowledge base's directory; whether it did not exist before."""
    existed = directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    return not existed


def _is_directory(path: str) -> bool:
    return Path(path).is_dir()


def _remove_unfinished(directory: Path) -> None:
    """Remove a directory a failed creation left, unless something else finished creating it."""
    import shutil

    if read_manifest(directory) is None:
        shutil.rmtree(directory, ignore_errors=True)


_embedders: weakref.WeakKeyDictionary[Kernel, dict[str, Embedder]] = weakref.WeakKeyDictionary()


def manifest_chunker(
    kernel: Kernel,
    spec: Mapping[str, Any],
    kind: str,
    language: str | None,
    cache: dict[str, Chunker],
) -> Chunker:
    """The chunker a manifest's chunker ``spec`` gives a document of ``kind`` (made once into ``cache``).

    A function of the manifest alone, so Ray workers cut documents exactly as the local pipeline does.
    """
    from toolkernel_rag.chunking import chunker_for

    options = dict(spec)
    name = options.pop("name")
    if name == "auto":
        name = chunker_for(kind)
        if name == "code" and language:
            options["language"] = language
    key = f"{name}:{options.get('language', '')}" if name == "code" else name
    if key not in cache:
        cache[key] = kernel.chunker(name, **options)
    return cache[key]


def shared_embedder(kernel: Kernel, name: str, options: Mapping[str, Any]) -> Embedder:
    """The embedder ``name`` with ``options``, made once per kernel: every knowledge base a process
    opens (a writer, then a reader, or one per tenant) shares the loaded model."""
    key = json.dumps([name, dict(options)], sort_keys=True, default=str)
    made = _embedders.setdefault(kernel, {})
    if key not in made:
        made[key] = kernel.embedder(name, **options)
    return made[key]


def rag_settings(kernel: Kernel) -> RagSettings:
    """``[plugins.rag]`` when this plugin is loaded in ``kernel``, else the defaults."""
    if "rag" in kernel.settings_models:
        found = kernel.settings("rag")
        if isinstance(found, RagSettings):
            return found
    return RagSettings()


def default_chunker(settings: RagSettings) -> dict[str, Any]:
    """The chunker spec a new knowledge base records, from the settings.

    The default is sized in the embedder's tokens: MiniLM reads 256 tokens, [CLS] and [SEP] included.
    """
    return {
        "name": settings.chunker,
        "size": settings.chunk_size,
        "overlap": settings.chunk_overlap,
        "length": settings.chunk_length,
    }


def _check_agrees(
    where_is: str,
    manifest: Manifest,
    embedder: str | None,
    store: str | None,
    chunker: Mapping[str, Any] | None,
) -> None:
    where = f"knowledge base {where_is!r}"
    if embedder is not None and embedder != manifest.embedder.name:
        raise KBError(
            f"{where} was embedded with {manifest.embedder.name!r}; searching or adding with {embedder!r} "
            "would compare vectors of different models. Use the same embedder or ingest into a new one"
        )
    if store is not None and store != manifest.store.name:
        raise KBError(f"{where} keeps its vectors in store {manifest.store.name!r}, not {store!r}")
    if chunker is not None:
        wanted = {k: v for k, v in chunker.items() if v is not None}
        recorded = {k: manifest.chunker.get(k) for k in wanted}
        if recorded != wanted:
            raise KBError(
                f"{where} was chunked with {manifest.chunker}; asked for {dict(chunker)}. "
                "Ingest into a new knowledge base to chunk differently"
            )


def _store_options(kb: KnowledgeBase) -> dict[str, Any]:
    options = dict(kb.manifest.store.options)
    path = options.get("path")
    if isinstance(path, str) and not Path(path).is_absolute():
        options["path"] = str(kb.directory / path)
    return options
