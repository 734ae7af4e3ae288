"""The toolkernel-qdrant plugin: registers the ``qdrant`` vector store (Qdrant loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import VectorStoreRegistry


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add the ``qdrant`` store: a server or Qdrant Cloud by URL, or embedded in-process."""
    from toolkernel_qdrant.settings import create_store

    registry.add("qdrant", create_store)
