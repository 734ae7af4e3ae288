"""The embedder contract: text in, vectors out, addressed as ``provider/model``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from toolkernel.errors import ConfigError

__all__ = [
    "Embedder",
    "EmbedderFactory",
    "split_embedder_name",
]


@runtime_checkable
class Embedder(Protocol):
    """Embeds batches of text. Implementations batch, retry and report progress themselves."""

    @property
    def name(self) -> str:
        """``provider/model``."""

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""


EmbedderFactory = Callable[..., Embedder]
"""``factory(model: str, **options) -> Embedder``."""


def split_embedder_name(name: str) -> tuple[str, str]:
    """``"provider/model"`` → ``("provider", "model")``, with an error that shows the form."""
    provider, sep, model = name.partition("/")
    if not sep or not provider or not model:
        raise ConfigError(f"embedder name {name!r} must look like 'provider/model'")
    return provider, model
