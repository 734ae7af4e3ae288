"""Hook implementations of toolkernel-graphrag (cheap imports only; numpy and scipy load when used)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.entities import EntityExtractor
    from toolkernel.knowledge import KBContext, KBExtension
    from toolkernel.registries import EntityExtractorRegistry, KBExtensionRegistry, SettingsRegistry


def _phrases() -> EntityExtractor:
    from toolkernel_graphrag.phrases import PhraseExtractor

    return PhraseExtractor()


def _graph(context: KBContext) -> KBExtension:
    from toolkernel_graphrag.extension import open_graph_extension

    return open_graph_extension(context)


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Declare ``[plugins.graphrag]``: the graph's build, walk and Mastra-mode settings."""
    from toolkernel_graphrag.settings import GraphRAGSettings

    registry.add("graphrag", GraphRAGSettings)


@hookimpl
def register_entity_extractors(registry: EntityExtractorRegistry) -> None:
    """Add ``phrases``: proper-noun phrases, quoted titles and identifiers, by rule (no model)."""
    registry.add("phrases", _phrases)


@hookimpl
def register_kb_extensions(registry: KBExtensionRegistry) -> None:
    """Add ``graph``: a chunk graph beside every knowledge base (``kb ingest --no-graph`` skips it)."""
    registry.add("graph", _graph)
