"""The toolkernel-chroma plugin: registers the ``chroma`` vector store (chromadb loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import VectorStoreRegistry


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add the ``chroma`` store: a Chroma server by ``host``/``port``, or an embedded database by ``path``."""
    from toolkernel_chroma.settings import create_store

    registry.add("chroma", create_store)
