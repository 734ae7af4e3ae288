"""The toolkernel-chroma plugin: registers the ``chroma`` vector store (chromadb loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.registries import SettingsRegistry, VectorStoreRegistry


@hookimpl
def register_vector_stores(registry: VectorStoreRegistry) -> None:
    """Add the ``chroma`` store: a Chroma server by ``host``/``port``, or an embedded database by ``path``."""
    from toolkernel_chroma.settings import store_from_settings

    registry.add("chroma", store_from_settings, settings="chroma")


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Read ``[plugins.chroma]`` and ``TOOLKERNEL_CHROMA_*`` into :class:`ChromaSettings`."""
    from toolkernel_chroma.settings import ChromaSettings

    registry.add("chroma", ChromaSettings)
