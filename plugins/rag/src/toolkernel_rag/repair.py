"""Derived data checked on every writer open and rebuilt from the catalog: the vector store,
the BM25 index, extensions' state.

The catalog holds every chunk's text, metadata, terms and vector, so everything else can be
rebuilt from it without re-embedding. A writer (under the writer lock) rebuilds an embedded
store whose files changed since the last writer closed it (:mod:`toolkernel_rag.store_seal`),
compares the store's vector count with the catalog's when it opens and restores what is
missing; ``kb repair`` rebuilds every piece from scratch. A catalog that is missing or damaged
cannot be rebuilt: that is an error naming it.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkernel.vectors import VectorStoreError
from toolkernel_rag import store_seal
from toolkernel_rag.layout import EXTENSIONS_DIR, KBError

if TYPE_CHECKING:
    from toolkernel_rag.kb import KnowledgeBase


@dataclass
class RepairReport:
    """What :func:`repair` rebuilt."""

    vectors: int = 0
    chunks: int = 0
    extensions: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        return {"vectors": self.vectors, "chunks": self.chunks, "extensions": list(self.extensions)}


def repair_hint(kb: KnowledgeBase) -> str:
    return f"toolkernel kb repair --kb {kb.directory}"


def embedded_index_dir(kb: KnowledgeBase) -> Path | None:
    """The directory of the knowledge base's index in an embedded store (``None``: not embedded)."""
    path = kb.manifest.store.options.get("path")
    if not isinstance(path, str) or kb.location.directory is None:
        return None
    root = Path(path) if Path(path).is_absolute() else kb.directory / path
    return root / kb.index


def take_store_files(kb: KnowledgeBase) -> str | None:
    """Before the writer opens an embedded store: remove its seal, and when its files changed
    since the last writer closed them, discard the index's files (rebuilt from the catalog by
    :func:`check_store`) and say which file; ``None`` when nothing is known to be wrong."""
    index_dir = embedded_index_dir(kb)
    if index_dir is None:
        return None
    damage = store_seal.breach(kb.directory, index_dir)
    store_seal.unseal(kb.directory)
    if damage is not None:
        shutil.rmtree(index_dir, ignore_errors=True)
    return damage


def seal_store_files(kb: KnowledgeBase) -> None:
    """After the writer closed an embedded store cleanly: record its files (see :func:`take_store_files`)."""
    index_dir = embedded_index_dir(kb)
    if index_dir is not None:
        store_seal.seal(kb.directory, index_dir)


async def check_store(kb: KnowledgeBase, damage: str | None = None) -> None:
    """Open the writer's vector store and make it hold exactly the catalog's vectors.

    Documents still ``pending`` (a killed run) are left out of the comparison: the next
    ingest rewrites them. What it reads costs what changed, not the catalog's size: the
    pending documents from an index of them alone, the catalog's count from the row its
    triggers keep (counted again only when the store disagrees with it). A store that cannot
    be opened is refused with the repair command.
    ``damage`` (from :func:`take_store_files`, whose files are gone) is said with the repair.
    """
    try:
        await kb.store.create_index(kb.index, kb.manifest.embedder.dimension, "cosine")
        stored = await _count_done(kb)
    except VectorStoreError as exc:
        if "in use by another process" in str(exc):
            raise
        raise KBError(f"{_store_where(kb)} cannot be opened ({exc}): run '{repair_hint(kb)}'") from None
    except Exception as exc:  # an engine's own error on damaged files
        raise KBError(f"{_store_where(kb)} is damaged ({exc}): run '{repair_hint(kb)}'") from None
    catalog = kb.embedded_catalog
    expected = catalog.kept_done_vectors()
    if stored != expected:  # the kept count is trusted only when it agrees: else counted again
        expected = catalog.recount_done_vectors()
    if stored != expected or damage is not None:
        restored = await rebuild_store(kb, drop=stored > expected and kb.embedded_store)
        cause = damage or f"it held {stored} of the catalog's {expected} vectors"
        print(f"repaired {_store_where(kb)}: {cause}; {restored} restored from the catalog", file=sys.stderr)


async def _count_done(kb: KnowledgeBase) -> int:
    pending = _pending(kb)
    if pending:
        return await kb.store.count(kb.index, {"document_id": {"$nin": pending}})
    return await kb.store.count(kb.index)


def _pending(kb: KnowledgeBase) -> list[str]:
    return kb.embedded_catalog.pending_documents()


def _store_where(kb: KnowledgeBase) -> str:
    path = kb.manifest.store.options.get("path")
    if isinstance(path, str):
        return f"the vector store at {str(kb.directory / path)!r}"
    return f"vector index {kb.index!r} of store {kb.manifest.store.name!r}"


async def rebuild_store(kb: KnowledgeBase, *, drop: bool) -> int:
    """Upsert every done chunk's vector from the catalog (after emptying the index when ``drop``)."""
    if drop:
        await kb.store.delete_index(kb.index)
        await kb.store.create_index(kb.index, kb.manifest.embedder.dimension, "cosine")
    from toolkernel_rag.ingestion import store_metadata

    restored = 0
    for batch in kb.embedded_catalog.all_vectors(done_only=True):
        await kb.store.upsert(
            kb.index,
            [chunk_id for chunk_id, _, _ in batch],
            [vector for _, vector, _ in batch],
            metadata=[store_metadata(meta) for _, _, meta in batch],
        )
        restored += len(batch)
    return restored


def wipe_embedded_store(kb: KnowledgeBase) -> None:
    """Delete the files of this knowledge base's index in an embedded store (``kb repair``: they
    are rebuilt from the catalog); other indexes of a store directory shared by path stay."""
    index_dir = embedded_index_dir(kb)
    if index_dir is not None:
        shutil.rmtree(index_dir, ignore_errors=True)


async def repair(kb: KnowledgeBase) -> RepairReport:
    """Rebuild every piece of derived data of a writable ``kb`` from its catalog."""
    from toolkernel_rag.ingestion import catch_up_extensions

    kb.require_writable("repair")
    report = RepairReport()
    report.vectors = await rebuild_store(kb, drop=True)
    kb.embedded_sparse.rebuild(kb.embedded_catalog)
    report.chunks = kb.catalog.counts()[2]
    reset_extension_dirs(kb, list(kb.extensions))
    for name in kb.extensions:
        kb.embedded_catalog.forget_extension(name)
    report.extensions = tuple(kb.extensions)
    await catch_up_extensions(kb)
    kb.catalog.bump_generation()
    kb.sparse.refresh(kb.catalog)
    return report


def reset_extension_dirs(kb: KnowledgeBase, names: list[str]) -> None:
    """Remove the named extensions' directories (their state is rebuilt from the catalog)."""
    for name in names:
        shutil.rmtree(kb.directory / EXTENSIONS_DIR / name, ignore_errors=True)
