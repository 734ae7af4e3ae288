"""Ingestion: read sources, chunk, embed in batches, write the store and the catalog, follow deletions.

Incremental and idempotent: a document whose content hash the catalog already holds as
``done`` is skipped; a changed one has its old chunks removed from the store (by
``document_id``) before the new ones go in; documents of a source that are gone are
deleted. Crash-safe: documents are marked ``pending`` (committed) before the store is
written and ``done`` with their chunks in one transaction after; chunk ids are
``<document id>#<n>``, so a rerun after ``kill -9`` rewrites the pending documents in place
and the count comes out as a clean run's. Extensions are caught up from the catalog at the
end of every run (at least once; a document's chunks replace what an extension held).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from toolkernel.knowledge import DocumentChunks, IngestBatch, KBExtension
from toolkernel_rag.catalog import StoredChunk
from toolkernel_rag.kb import KnowledgeBase, rag_settings
from toolkernel_rag.seen_ids import SeenIds
from toolkernel_rag.sources import Document, SourceProblem, SourceReader

if TYPE_CHECKING:
    from toolkernel.chunkers import Chunker

_tracer = trace.get_tracer("toolkernel_rag")

Progress = Callable[["IngestReport"], None]
"""Called with the report so far: once the work is counted, after every document read and every batch."""


@dataclass
class IngestReport:
    """What a run did."""

    total: int = 0
    """Documents the sources hold, counted before any is read (a file, or a line of a ``.jsonl``)."""
    seen: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    problems: list[SourceProblem] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0
    chunk_seconds: float = 0.0
    store_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    """The process's peak resident memory so far (MiB), measured at the end of the run."""
    memory_mb: int = 0
    """The ``ingest_memory_mb`` the run was sized for."""

    @property
    def done(self) -> int:
        """Documents finished: written, or found unchanged."""
        return self.added + self.updated + self.unchanged

    def summary(self) -> dict[str, Any]:
        return {
            "documents": self.seen,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
            "chunks": self.chunks,
            "skipped": len(self.problems),
            "seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "chunk_seconds": round(self.chunk_seconds, 3),
            "store_seconds": round(self.store_seconds, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "memory_mb": self.memory_mb,
        }


async def ingest(
    kb: KnowledgeBase,
    sources: Sequence[str],
    *,
    batch_chunks: int = 256,
    memory_mb: int | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Bring ``kb`` in line with ``sources``; returns what changed and what was skipped.

    Documents are chunked, embedded and written about ``batch_chunks`` chunks at a time, and
    never more than 1/32 of ``memory_mb`` (default ``[plugins.rag] ingest_memory_mb``) of
    document text at a time (and a window of at most as much read ahead). Nothing the run
    holds grows with the corpus: sources are walked one directory at a time, the catalog is
    asked for one window's hashes at a time, the ids read are kept on disk (:class:`SeenIds`),
    and the BM25 index is written from the catalog page by page at the end.

    ``kb`` must be open writable (it holds the writer lock).
    """
    kb.require_writable("ingest")
    report = IngestReport(memory_mb=memory_mb or rag_settings(kb.kernel).ingest_memory_mb)
    batch_bytes = report.memory_mb * 1024 * 1024 // 32
    started = time.perf_counter()
    with _tracer.start_as_current_span("kb.ingest") as span:
        readers = [SourceReader(source, kb.kernel.readers) for source in sources]
        report.total = sum(reader.count() for reader in readers)  # the work, before any of it
        if progress is not None:
            progress(report)
        kb.catalog.start_bulk_load()
        for source, reader in zip(sources, readers, strict=True):
            seen = SeenIds()
            try:
                await _ingest_source(kb, source, reader, seen, batch_chunks, batch_bytes, report, progress)
                await finish_source(kb, reader, seen, report)
            finally:
                seen.close()
            if progress is not None:
                progress(report)
        await finish_run(kb, report, started, span)
    return report


async def _ingest_source(
    kb: KnowledgeBase,
    source: str,
    reader: SourceReader,
    seen: SeenIds,
    batch_chunks: int,
    batch_bytes: int,
    report: IngestReport,
    progress: Progress | None,
) -> None:
    """Read one source a window of documents at a time and write what changed in batches.

    The catalog is asked for the hashes of each window's documents only, and the ids read go
    to ``seen`` (on disk): what this holds is one window and one batch, whatever the source's size.
    """
    pending: list[Document] = []
    pending_known: dict[str, tuple[str, str]] = {}
    pending_chunks = pending_bytes = 0
    for window in _windows(_qualified(kb, reader), WINDOW_DOCUMENTS, batch_bytes):
        known = kb.catalog.hashes_of([d.id for d in window])
        for document in window:
            if not seen.add(document.id):
                report.problems.append(
                    SourceProblem(f"{source}: {document.id}", "repeats a document id; the first was kept")
                )
                continue
            report.seen += 1
            report.total = max(report.total, report.seen)  # a reader may yield more than counted
            before = known.get(document.id)
            if before == (document.hash, "done"):
                report.unchanged += 1
                if progress is not None:
                    progress(report)
                continue
            pending.append(document)
            if before is not None:
                pending_known[document.id] = before
            pending_chunks += max(1, len(document.text) // 800)
            pending_bytes += len(document.text)
            if pending_chunks >= batch_chunks or pending_bytes >= batch_bytes:
                await _write(kb, pending, pending_known, report)
                pending, pending_known, pending_chunks, pending_bytes = [], {}, 0, 0
                if progress is not None:
                    progress(report)
    if pending:
        await _write(kb, pending, pending_known, report)


WINDOW_DOCUMENTS = 256
"""Documents read ahead at most, so the catalog is asked for their hashes in one query."""


def _qualified(kb: KnowledgeBase, reader: SourceReader) -> Iterator[Document]:
    """The documents of ``reader`` with their ids in the knowledge base (qualified by the source's key)."""
    key: str | None = None
    for document in reader.documents():
        if key is None:  # given on the first document, so a missing source gets none
            key = kb.catalog.source_key(reader.location)
        document.id = reader.qualified_id(key, document)
        yield document


def _windows(documents: Iterator[Document], most: int, most_bytes: int) -> Iterator[list[Document]]:
    """``documents`` in lists of at most ``most`` documents, cut when their text reaches ``most_bytes``."""
    window: list[Document] = []
    size = 0
    for document in documents:
        window.append(document)
        size += len(document.text)
        if len(window) >= most or size >= most_bytes:
            yield window
            window, size = [], 0
    if window:
        yield window


async def finish_source(kb: KnowledgeBase, reader: SourceReader, seen: SeenIds, report: IngestReport) -> None:
    """After every document of a source was read: collect its problems, delete what is gone from it.

    What is gone is found by paging through the catalog's ids of the source against ``seen``.
    """
    report.problems.extend(reader.problems)
    if _source_missing(reader):
        return
    deleted, after = 0, ""
    while page := kb.catalog.source_ids(reader.location, after, GONE_PAGE):
        gone = seen.unseen(page)
        if gone:
            await _delete(kb, gone)
            deleted += len(gone)
        after = page[-1]
    if deleted:
        report.deleted += deleted
        kb.catalog.forget_source(reader.location)


GONE_PAGE = 1024
"""Catalog ids compared with the ids read at a time, when looking for documents gone from a source."""


async def finish_run(kb: KnowledgeBase, report: IngestReport, started: float, span: trace.Span) -> None:
    """After every source: end the bulk load, catch extensions up, refresh the BM25 index, time the run."""
    kb.catalog.finish_bulk_load()
    if await catch_up_extensions(kb):
        kb.catalog.bump_generation()  # readers reload the extensions' state they follow
    kb.sparse.refresh(kb.catalog)  # saved for this generation: servers start without a rebuild
    report.seconds = time.perf_counter() - started
    report.peak_rss_mb = peak_rss_mb()
    for key, value in report.summary().items():
        span.set_attribute(f"kb.{key}", value)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB.

    ``VmHWM`` where Linux offers it: ``getrusage``'s ``ru_maxrss`` survives ``exec``, so a process
    started by a large parent would report the parent's size.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _source_missing(reader: SourceReader) -> bool:
    """A source that vanished entirely is reported, not taken as 'delete every document'."""
    return any(p.where == reader.source and p.reason == "does not exist" for p in reader.problems)


async def _write(
    kb: KnowledgeBase, documents: list[Document], known: dict[str, tuple[str, str]], report: IngestReport
) -> None:
    t0 = time.perf_counter()
    chunks = chunk_documents(documents, kb.chunker, kb.sparse.terms)
    report.chunk_seconds += time.perf_counter() - t0
    await begin_write(kb, documents, known, report)
    with _tracer.start_as_current_span("kb.embed") as span:
        t2 = time.perf_counter()
        vectors = await kb.embedder.embed([c.text for c in chunks]) if chunks else []
        report.embed_seconds += time.perf_counter() - t2
        span.set_attribute("kb.texts", len(chunks))
        span.set_attribute("kb.duration_ms", (time.perf_counter() - t2) * 1000)
    await finish_write(kb, documents, chunks, vectors, known, report)


def chunk_documents(
    documents: Sequence[Document],
    chunker: Callable[[str, str | None], Chunker],
    terms: Callable[[str], str],
) -> list[StoredChunk]:
    """The chunks of ``documents`` as the catalog stores them (without vectors yet).

    Chunk ids are ``<document id>#<n>``, so a document written again replaces its chunks in
    place. ``chunker(kind, language)`` gives the chunker of a document (the knowledge base's,
    from its manifest); ``terms`` gives a chunk's BM25 terms. Ray workers call this too.
    """
    chunks: list[StoredChunk] = []
    for document in documents:
        language = document.metadata.get("language") if document.kind == "code" else None
        pieces = chunker(document.kind, language).chunk(document.text)
        for seq, piece in enumerate(pieces):
            meta: dict[str, Any] = {**document.metadata, **piece.metadata}
            if document.page_starts:
                meta["page"] = bisect.bisect_right(document.page_starts, piece.start)
                meta["last_page"] = bisect.bisect_right(document.page_starts, max(piece.start, piece.end - 1))
            meta["document_id"] = document.id
            meta["chunk_index"] = seq
            chunks.append(
                StoredChunk(
                    id=f"{document.id}#{seq}",
                    document_id=document.id,
                    seq=seq,
                    start=piece.start,
                    end=piece.end,
                    text=piece.text,
                    metadata=meta,
                    vector=None,
                    terms=terms(piece.text),
                )
            )
    return chunks


async def begin_write(
    kb: KnowledgeBase,
    documents: Sequence[Document],
    known: Mapping[str, tuple[str, str]],
    report: IngestReport,
    document_terms: Sequence[str] | None = None,
) -> None:
    """Mark ``documents`` pending (committed) and remove the old chunks of changed ones from the store.

    Done before any new chunk reaches the store, so a run killed after this finds them
    pending and writes them again. ``document_terms``: their BM25 terms when already made.
    """
    t0 = time.perf_counter()
    terms = document_terms if document_terms is not None else [kb.sparse.terms(d.text) for d in documents]
    # Old chunks of changed (or half-written) documents leave the store before new ones arrive.
    stale = [d.id for d in documents if d.id in known]
    kb.catalog.mark_pending(
        (d.id, d.source, d.hash, d.metadata, d.text, t) for d, t in zip(documents, terms, strict=True)
    )
    if stale and not kb.vectors_in_catalog:
        await kb.store.delete(kb.index, filter={"document_id": {"$in": stale}})
    report.store_seconds += time.perf_counter() - t0


async def finish_write(
    kb: KnowledgeBase,
    documents: Sequence[Document],
    chunks: Sequence[StoredChunk],
    vectors: Sequence[list[float]],
    known: Mapping[str, tuple[str, str]],
    report: IngestReport,
) -> None:
    """Write the chunks and their vectors to the store, then commit the documents as done with them."""
    t3 = time.perf_counter()
    if chunks and not kb.vectors_in_catalog:
        await kb.store.upsert(
            kb.index, [c.id for c in chunks], vectors, metadata=[store_metadata(c.metadata) for c in chunks]
        )
    stored = [
        StoredChunk(c.id, c.document_id, c.seq, c.start, c.end, c.text, c.metadata, v, c.terms)
        for c, v in zip(chunks, vectors, strict=True)
    ]
    kb.catalog.commit_documents([d.id for d in documents], stored)
    report.store_seconds += time.perf_counter() - t3
    report.chunks += len(stored)
    for d in documents:
        if d.id in known:
            report.updated += 1
        else:
            report.added += 1


def store_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata as every store accepts it: lists of scalars only (the header path stays a list)."""
    return {k: v for k, v in meta.items() if not (isinstance(v, list) and not v)}


async def remove_documents(kb: KnowledgeBase, document_ids: Sequence[str]) -> int:
    """Remove documents from the store, the catalog, the BM25 index and every open extension.

    ``kb`` must be open writable (it holds the writer lock).

    :raises KBError: an id the knowledge base does not hold (nothing is removed then).
    """
    kb.require_writable("remove")
    ids = list(dict.fromkeys(document_ids))
    kb.require_documents(ids)
    locations = kb.catalog.locations_of(ids)
    await _delete(kb, ids)
    for location in locations:
        kb.catalog.forget_source(location)
    if await forget_in_extensions(kb):
        kb.catalog.bump_generation()  # readers reload the extensions' state they follow
    kb.sparse.refresh(kb.catalog)
    return len(ids)


async def forget_in_extensions(kb: KnowledgeBase) -> bool:
    """Send every open extension the deletions it has not seen, and nothing else.

    A removal costs what it removes: documents an extension has not been sent yet (an ingest
    with ``--no-extensions``, an extension enabled later) wait for the next ingest's catch-up,
    instead of a one-document removal feeding the extension the whole knowledge base.
    Returns whether any extension was sent anything.
    """
    sent = False
    for name, extension in kb.extensions.items():
        with kb.extension_lock(name):
            sent = await _forget(kb, name, extension) or sent
    return sent


async def _delete(kb: KnowledgeBase, document_ids: list[str]) -> None:
    for first in range(0, len(document_ids), 256):
        part = document_ids[first : first + 256]
        if not kb.vectors_in_catalog:
            await kb.store.delete(kb.index, filter={"document_id": {"$in": part}})
        kb.catalog.delete_documents(part)


async def catch_up_extensions(kb: KnowledgeBase, batch_documents: int = 64) -> bool:
    """Send every open extension the documents it has not seen at their current hash, and the deletions.

    Returns whether any extension was sent anything.
    """
    sent = False
    for name, extension in kb.extensions.items():
        # One writer at a time catches an extension up, from the state the last one left
        # (on PostgreSQL several writers may run at once).
        with kb.extension_lock(name):
            sent = await _catch_up(kb, name, extension, batch_documents) or sent
    if kb.location.directory is not None:
        kb.release_neighbour_search()
    return sent


async def _forget(kb: KnowledgeBase, name: str, extension: KBExtension) -> bool:
    """Send ``extension`` the documents it holds that are gone (the caller holds its lock)."""
    forgotten = kb.catalog.extension_forgotten(name)
    if forgotten:
        await extension.on_ingest(IngestBatch(deleted=tuple(forgotten)))
        kb.catalog.set_extension_state(name, [], forgotten)
    return bool(forgotten)


async def _catch_up(kb: KnowledgeBase, name: str, extension: KBExtension, batch_documents: int) -> bool:
    """Feed ``extension`` what changed since the state recorded for it (the caller holds its lock).

    The documents to send are read from the catalog a batch at a time (those after the last
    one sent, by id, whose hash the extension does not hold), so a catch-up holds one batch,
    never every document's hash.
    """
    sent, after = await _forget(kb, name, extension), ""
    while part := kb.catalog.extension_changes(name, after, batch_documents):
        by_document: dict[str, list[StoredChunk]] = {d: [] for d, _ in part}
        for chunk in kb.catalog.document_chunks(list(by_document)):
            by_document[chunk.document_id].append(chunk)
        batch = IngestBatch(
            upserted=tuple(
                DocumentChunks(d, tuple(c.record() for c in chunks)) for d, chunks in by_document.items()
            )
        )
        await extension.on_ingest(batch)
        kb.catalog.set_extension_state(name, part, [])
        sent, after = True, part[-1][0]
    return sent
