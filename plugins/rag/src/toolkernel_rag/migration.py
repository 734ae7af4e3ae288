"""Bringing a knowledge base written by an older toolkernel-rag up to date.

Document ids used to be relative to their source, so equal paths under two sources were one
document. :func:`qualify_document_ids` gives every source its key and every document the id
``<source key>/<relative id>``: the catalog is rewritten in one transaction that also flags
the vector store as stale, then the store is rebuilt from the vectors the catalog keeps (no
re-embedding). A run killed midway leaves the flag set, and the next writer rebuilds again.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from toolkernel.vectors import IndexNotFoundError
from toolkernel_rag.catalog import source_key_for
from toolkernel_rag.ingestion import catch_up_extensions, store_metadata
from toolkernel_rag.kb import KnowledgeBase
from toolkernel_rag.sources import qualified_id

REBUILD_BATCH = 512
"""Chunks read from the catalog and written to the store at a time while rebuilding it."""


async def bring_up_to_date(kb: KnowledgeBase) -> bool:
    """Migrate ``kb``'s document ids and rebuild its store if either is due; ``True`` when anything was."""
    if not (kb.catalog.needs_id_migration() or kb.catalog.store_stale()):
        return False
    if kb.catalog.needs_id_migration():
        qualify_document_ids(kb)
    await rebuild_store(kb)
    await catch_up_extensions(kb)
    kb.catalog.bump_generation()  # readers and the BM25 index see the new ids
    kb.sparse.refresh(kb.catalog)
    return True


def qualify_document_ids(kb: KnowledgeBase) -> None:
    """Rewrite the catalog's document and chunk ids as ``<source key>/<relative id>`` (one transaction)."""
    documents = kb.embedded_catalog.legacy_documents()
    keys = {s.location: s.key for s in kb.catalog.sources()}
    taken = set(keys.values())
    for location in sorted({location for _, location in documents} - set(keys)):
        keys[location] = source_key_for(location, taken)
        taken.add(keys[location])
    per_location: dict[str, int] = {}
    for _, location in documents:
        per_location[location] = per_location.get(location, 0) + 1
    renames = [
        (old, qualified_id(keys[location], old, per_location[location] == 1 and _named_after(location, old)))
        for old, location in documents
    ]
    kb.embedded_catalog.qualify_ids(keys, renames)


def _named_after(location: str, document_id: str) -> bool:
    """An older catalog named a one-file source's only document after the file."""
    return Path(location).name == document_id


async def rebuild_store(kb: KnowledgeBase) -> None:
    """Empty the vector index and fill it again from the catalog's chunks and vectors."""
    with contextlib.suppress(IndexNotFoundError):
        await kb.store.delete_index(kb.index)
    await kb.store.create_index(kb.index, kb.manifest.embedder.dimension, "cosine")
    for chunks in kb.embedded_catalog.chunk_batches(REBUILD_BATCH):
        chunks = [c for c in chunks if c.vector is not None]
        if chunks:
            await kb.store.upsert(
                kb.index,
                [c.id for c in chunks],
                [c.vector for c in chunks if c.vector is not None],
                metadata=[store_metadata(c.metadata) for c in chunks],
            )
    kb.embedded_catalog.set_store_fresh()
