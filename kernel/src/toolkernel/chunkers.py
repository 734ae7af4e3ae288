"""The chunker contract: split one document's text into passages sized for an embedder.

A plugin registers chunkers through ``register_chunkers``; a knowledge base picks one by
name and records it (with its options) in its manifest, so every chunk of a knowledge base
is cut the same way. Chunking is CPU-bound and fast next to embedding, so ``chunk`` is an
ordinary synchronous call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage: its text, where it sits in the document, and metadata the chunker adds.

    ``start`` and ``end`` are character offsets into the text given to
    :meth:`Chunker.chunk` (``text[start:end] == chunk.text``). ``metadata`` holds what the
    chunker knows about the passage, such as the markdown header path (``headers``); the
    knowledge base merges it over the document's own metadata.
    """

    text: str
    start: int
    end: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Chunker(Protocol):
    """Splits a document into :class:`Chunk` s, in document order."""

    @property
    def name(self) -> str:
        """The name the chunker is registered under."""

    def describe(self) -> dict[str, Any]:
        """The name and every option in force, JSON-serializable: what a manifest records."""

    def chunk(self, text: str) -> list[Chunk]:
        """The passages of ``text`` in order; an empty or blank text gives no chunk."""


ChunkerFactory = Callable[..., Chunker]
"""``factory(**options) -> Chunker``: what ``register_chunkers`` registries hold."""
