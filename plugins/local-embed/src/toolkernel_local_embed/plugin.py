"""Hook implementations of toolkernel-local-embed: registers the ``local`` embedder provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkernel import hookimpl

if TYPE_CHECKING:
    from toolkernel.embedders import Embedder
    from toolkernel.registries import EmbedderRegistry, SettingsRegistry
    from toolkernel_local_embed.options import LocalOptions


def _factory(model: str, settings: LocalOptions) -> Embedder:
    """Build ``local/<model>``; the model's runtime is checked now and loaded on first use."""
    from toolkernel_local_embed.embedder import local_embedder_from_options

    return local_embedder_from_options(model, settings)


@hookimpl
def register_settings(registry: SettingsRegistry) -> None:
    """Read ``[plugins.local]`` and ``TOOLKERNEL_LOCAL_*`` into :class:`LocalOptions`."""
    from toolkernel_local_embed.options import LocalOptions

    registry.add("local", LocalOptions)


@hookimpl
def register_embedders(registry: EmbedderRegistry) -> None:
    """Add the ``local`` provider: offline CPU models shipped in Python packages (``local/<model>``)."""
    registry.add("local", _factory, settings="local")
