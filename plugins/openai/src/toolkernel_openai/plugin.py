"""Hook implementations of toolkernel-openai: registers the ``openai`` embedder provider."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.embedders import Embedder
    from toolkernel.registries import EmbedderRegistry


def _factory(model: str, **options: Any) -> Embedder:
    """Build ``openai/<model>``, importing httpx only when an embedder is actually made."""
    from toolkernel_openai.embedder import openai_embedder

    return openai_embedder(model, **options)


@hookimpl
def register_embedders(registry: EmbedderRegistry) -> None:
    """Add the ``openai`` provider: ``openai/<model>`` for any OpenAI-compatible embeddings API."""
    registry.add("openai", _factory)
