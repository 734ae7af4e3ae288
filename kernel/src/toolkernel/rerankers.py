"""The reranker contract: re-score retrieved passages against a query."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

__all__ = [
    "Reranker",
    "RerankerFactory",
]


@runtime_checkable
class Reranker(Protocol):
    """Scores each passage's relevance to ``query``; higher is more relevant."""

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order."""


RerankerFactory = Callable[..., Reranker]
"""``factory(**options) -> Reranker``."""
