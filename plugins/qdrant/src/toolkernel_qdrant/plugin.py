"""The toolkernel-qdrant plugin: registers the ``qdrant`` vector store (Qdrant loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import SettingsRegistry, VectorStoreRegistry


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add the ``qdrant`` store: a server or Qdrant Cloud by URL, or embedded in-process."""
    from toolkernel_qdrant.settings import store_from_settings

    registry.add("qdrant", store_from_settings, settings="qdrant")


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Read ``[plugins.qdrant]`` and ``TOOLKERNEL_QDRANT_*`` into :class:`QdrantSettings`."""
    from toolkernel_qdrant.settings import QdrantSettings

    registry.add("qdrant", QdrantSettings)
