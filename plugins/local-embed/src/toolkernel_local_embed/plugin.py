"""Hook implementations of toolkernel-local-embed: registers the ``local`` embedder provider."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.embedders import Embedder
    from toolkernel.registries import EmbedderRegistry


def _factory(model: str, **options: Any) -> Embedder:
    """Build ``local/<model>``; the model's runtime is checked now and loaded on first use."""
    from toolkernel_local_embed.embedder import local_embedder

    return local_embedder(model, **options)


@hookimpl
def register_embedders(registry: EmbedderRegistry) -> None:
    """Add the ``local`` provider: offline CPU models shipped in Python packages (``local/<model>``)."""
    registry.add("local", _factory)
