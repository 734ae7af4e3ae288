"""A server's copy of the document postings of the terms it searched lately, for one generation.

BM25 in SQL scores every posting of every query term and groups them by document, which grows
with the corpus; most of a query's postings belong to common terms that the previous queries
asked for too. A server thus keeps each searched term's postings as arrays (documents as
numbers into a list of ids) and scores them with numpy. The cache holds one catalog
generation: every writing transaction bumps it, and a search that reads another generation
drops the whole cache, so what is scored is always one committed state. It is a cache only:
it holds at most :data:`MAX_CACHED_POSTINGS` postings, least recently used terms go first, and
a server rebuilds it from the database.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MAX_CACHED_POSTINGS = 4_000_000
"""Postings a server keeps at most (12 bytes each: document number, tf and length as int32)."""


@dataclass(frozen=True)
class TermPostings:
    """One term's document postings: document numbers (into :attr:`Snapshot.names`), tf, lengths."""

    documents: npt.NDArray[np.int32]
    tf: npt.NDArray[np.int32]
    lengths: npt.NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.documents)


@dataclass(frozen=True)
class Snapshot:
    """What a search scores with: the generation, the document ids its numbers stand for, and
    the postings of its terms (a term in no document has none)."""

    generation: int
    names: Sequence[str]
    postings: dict[str, TermPostings]


class PostingsCache:
    """Term postings of one generation, least recently used first out; safe from several threads."""

    def __init__(self, limit: int = MAX_CACHED_POSTINGS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._names: list[str] = []
        self._numbers: dict[str, int] = {}
        self._terms: OrderedDict[str, TermPostings] = OrderedDict()
        self._size = 0

    @property
    def generation(self) -> int | None:
        """The generation the cache holds (``None`` before a first search)."""
        return self._generation

    def cached(self, terms: Iterable[str]) -> tuple[int | None, dict[str, TermPostings]]:
        """The generation held and the postings of those ``terms`` it holds."""
        with self._lock:
            found = {t: self._terms[t] for t in terms if t in self._terms}
            for term in found:
                self._terms.move_to_end(term)
            return self._generation, found

    def add(
        self,
        generation: int,
        fetched: Iterable[tuple[str, Sequence[str], Sequence[int], Sequence[int]]],
        cached: dict[str, TermPostings],
        held: int | None,
    ) -> Snapshot | None:
        """The postings ``fetched`` at ``generation`` (``(term, documents, tfs, lengths)``) with the
        ``cached`` ones read before from generation ``held``; ``None`` if those are of another.

        A newer generation than the one held empties the cache first; postings of an older
        one (a search that raced a writer) are scored but not kept.
        """
        with self._lock:
            if self._generation is None or generation > self._generation:
                self._reset(generation)
            if cached and held != generation:
                return None
            if generation != self._generation:  # older than the cache: numbered apart, not kept
                names: list[str] = []
                numbers: dict[str, int] = {}
                return Snapshot(
                    generation,
                    names,
                    {t: _postings(d, tf, n, names, numbers) for t, d, tf, n in fetched},
                )
            postings = dict(cached)
            for term, documents, tf, lengths in fetched:
                found = postings[term] = _postings(documents, tf, lengths, self._names, self._numbers)
                if len(found) <= self.limit:
                    self._keep(term, found)
            return Snapshot(generation, self._names, postings)

    def _reset(self, generation: int) -> None:
        # A new list: a search still scoring with the old one keeps its numbers.
        self._generation = generation
        self._names = []
        self._numbers = {}
        self._terms.clear()
        self._size = 0

    def _keep(self, term: str, postings: TermPostings) -> None:
        old = self._terms.pop(term, None)
        if old is not None:
            self._size -= len(old)
        self._terms[term] = postings
        self._size += len(postings)
        while self._size > self.limit:
            _, evicted = self._terms.popitem(last=False)
            self._size -= len(evicted)


def _postings(
    documents: Sequence[str],
    tf: Sequence[int],
    lengths: Sequence[int],
    names: list[str],
    numbers: dict[str, int],
) -> TermPostings:
    """Postings with their documents numbered into ``names`` (new ones appended)."""
    out = np.empty(len(documents), dtype=np.int32)
    for i, document in enumerate(documents):
        number = numbers.get(document)
        if number is None:
            number = numbers[document] = len(names)
            names.append(document)
        out[i] = number
    return TermPostings(out, np.asarray(tf, dtype=np.int32), np.asarray(lengths, dtype=np.int32))
