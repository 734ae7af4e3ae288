"""The entity-extractor contract: find the names of things in passages, so passages that name the
same thing can be linked (a knowledge graph over a knowledge base's chunks is built this way).

An extractor returns surface forms as written ("The Beatles", "IL-6"); folding them into one
key per entity (case, plurals, aliases) is the graph's job, so every extractor gets the same
normalisation. ``extract`` is async because an extractor may call a model over the network;
one that computes on the CPU should run its batch in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class EntityExtractor(Protocol):
    """Finds entity mentions in texts."""

    @property
    def name(self) -> str:
        """The name the extractor is registered under."""

    def describe(self) -> dict[str, Any]:
        """The name and every option in force, JSON-serializable: what a graph records it was built with."""

    async def extract(self, texts: Sequence[str]) -> list[list[str]]:
        """One list per text, in order: the entity surface forms it mentions, each once."""


EntityExtractorFactory = Callable[..., EntityExtractor]
"""``factory(**options) -> EntityExtractor``: what ``register_entity_extractors`` registries hold."""
