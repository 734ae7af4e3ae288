"""Hook implementations of toolkernel-openai: registers the ``openai`` embedder provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.embedders import Embedder
    from toolkernel.registries import EmbedderRegistry, SettingsRegistry
    from toolkernel_openai.options import OpenAIOptions


def _factory(model: str, settings: OpenAIOptions) -> Embedder:
    """Build ``openai/<model>`` from its validated settings, importing httpx only now."""
    from toolkernel_openai.embedder import OpenAIEmbedder

    return OpenAIEmbedder(model, settings)


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Read ``[plugins.openai]`` and ``TOOLKERNEL_OPENAI_*`` into :class:`OpenAIOptions`."""
    from toolkernel_openai.options import OpenAIOptions

    registry.add("openai", OpenAIOptions)


@hookimpl
def register_embedders(registry: EmbedderRegistry) -> None:
    """Add the ``openai`` provider: ``openai/<model>`` for any OpenAI-compatible embeddings API."""
    registry.add("openai", _factory, settings="openai")
