"""The embedder contract: text in, vectors out, addressed as ``provider/model``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

from toolkernel.errors import ConfigError

__all__ = [
    "Embedder",
    "EmbedderFactory",
    "caller_shows_progress",
    "progress_shown_by_caller",
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


_caller_shows_progress: ContextVar[bool] = ContextVar("toolkernel_caller_shows_progress", default=False)


@contextlib.contextmanager
def progress_shown_by_caller() -> Iterator[None]:
    """Within this block the caller shows progress (or was asked to show none): embedders log no
    progress lines of their own. ``kb ingest`` runs in one, so ``--quiet`` is quiet."""
    token = _caller_shows_progress.set(True)
    try:
        yield
    finally:
        _caller_shows_progress.reset(token)


def caller_shows_progress() -> bool:
    """Whether an embedder should keep its progress lines to itself (see :func:`progress_shown_by_caller`)."""
    return _caller_shows_progress.get()
