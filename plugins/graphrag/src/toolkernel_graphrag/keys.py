"""Entity keys: what a chunk's surface forms, title, links and document names become in the graph.

The writer turns each chunk into its keys once, when it ingests it; a server turns a query's
surface forms into keys with the same rules (:meth:`EntityKeys.key`) to find where to start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkernel_graphrag.links import document_keys, extract_links
from toolkernel_graphrag.normalise import normalise
from toolkernel_graphrag.phrases import sub_phrases
from toolkernel_graphrag.settings import GraphSettings

KEY_MEMO = 8_192
"""Surface forms whose keys are remembered (names repeat across chunks; normalising is the slow
part). The memo is emptied when full, so what it holds does not grow with the corpus."""


@dataclass(frozen=True)
class ChunkInput:
    """A chunk as the graph needs it: its text, its document, and what a filter may test."""

    id: str
    document_id: str
    text: str
    title: str | None = None
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    vector: Sequence[float] | None = None


class EntityKeys:
    """Keys of surface forms under one graph's normalisation and aliases (memoised, bounded)."""

    def __init__(self, settings: GraphSettings) -> None:
        self.settings = settings
        self._key_of: dict[str, str] = {}
        self._keys_of: dict[str, tuple[str, ...]] = {}

    def key(self, surface: str) -> str:
        """The entity key of a surface form."""
        found = self._key_of.get(surface)
        if found is None:
            found = normalise(surface, self.settings.normalisation, self.settings.alias_keys())
            if len(self._key_of) >= KEY_MEMO:
                self._key_of.clear()
            self._key_of[surface] = found
        return found

    def keys(self, surface: str) -> tuple[str, ...]:
        """The keys a surface form links under: its own and, with ``subphrases``, those of its
        shorter runs ("President Richard Nixon" also links as "Richard Nixon")."""
        found = self._keys_of.get(surface)
        if found is None:
            spans = sub_phrases(surface) if self.settings.subphrases else [surface]
            found = tuple(dict.fromkeys(k for k in map(self.key, spans) if k))
            if len(self._keys_of) >= KEY_MEMO:
                self._keys_of.clear()
            self._keys_of[surface] = found
        return found

    def title_keys(self, title: str) -> tuple[str, ...]:
        """The keys a document's title answers to: the title, and its head before a comma
        ("Summerlin, Nevada" is also "Summerlin", the way encyclopaedias disambiguate places)."""
        heads = [title]
        if "," in title:
            heads.append(title.split(",", 1)[0])
        return tuple(dict.fromkeys(k for k in map(self.key, heads) if k))

    def of_chunk(self, chunk: ChunkInput, surfaces: Sequence[str]) -> tuple[list[str], list[str]]:
        """A chunk's entity keys (sorted) and, among them, its document's title keys (sorted): every
        entity its text names, its title, the targets of its links, and its own document's names."""
        keys = {k for surface in surfaces for k in self.keys(surface)}
        title_keys = self.title_keys(chunk.title) if chunk.title else ()
        keys.update(title_keys)
        keys.update(extract_links(chunk.text))
        keys.update(document_keys(chunk.document_id, chunk.source))
        return sorted(keys), sorted(set(title_keys))
