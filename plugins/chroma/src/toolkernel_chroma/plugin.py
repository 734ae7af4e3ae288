"""Registers the ``chroma`` vector store; the store module (and chromadb) load only when one is made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import VectorStoreRegistry
    from toolkernel.vectors import VectorStore


def create_store(**options: Any) -> VectorStore:
    """Make a :class:`~toolkernel_chroma.store.ChromaStore` (options ``host``/``port`` or ``path``, …)."""
    from toolkernel_chroma.store import ChromaStore

    return ChromaStore(**options)


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Offer Chroma (a server or an embedded database) as the ``chroma`` vector store."""
    registry.add("chroma", create_store)
