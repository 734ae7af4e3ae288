"""A server's copy of the document postings of the most frequent and the lately searched terms.

BM25 in SQL scores every posting of every query term and groups them by document, which grows
with the corpus; most of a query's postings belong to common terms. A server thus keeps terms'
postings as arrays (documents as numbers into a list of ids) and scores them with numpy. The
cache holds one catalog generation at a time, of one history of the knowledge base (the
identity of its ``stats`` table: a knowledge base deleted and created again, or restored from a
dump, counts its generations anew), so what is scored is always one committed state:
when the database moves on, the cache is moved on with it by the documents the generations in
between changed (:meth:`PostingsCache.move_on`: their old postings out of every cached term,
their new ones in), or started over when those changes are not known or the history changed. It holds at most
:data:`MAX_CACHED_POSTINGS` postings, least recently used terms go first, and a server
rebuilds it from the database.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = Sequence[int] | npt.NDArray[np.int32]
Fetched = tuple[str, Sequence[str], Ints, Ints]
"""One term's postings as fetched: ``(term, document ids, tfs, lengths)``."""

MAX_CACHED_POSTINGS = 10_000_000
"""Postings a server keeps at most: 120 MB of arrays (document number, tf and length as int32),
besides one Python string per document id seen."""


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
    """Term postings of one generation, least recently used first out; safe from several threads.

    Postings already handed to a search are never changed: moving on replaces a term's arrays,
    and document numbers only grow, so a search scores what it was given to the end.
    """

    def __init__(self, limit: int = MAX_CACHED_POSTINGS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._history: int | None = None
        self._names: list[str] = []
        self._numbers: dict[str, int] = {}
        self._terms: OrderedDict[str, TermPostings] = OrderedDict()
        self._size = 0

    @property
    def generation(self) -> int | None:
        """The generation the cache holds (``None`` before a first search)."""
        return self._generation

    @property
    def history(self) -> int | None:
        """The knowledge base history the generation held counts in (``None`` before a first search)."""
        return self._history

    @property
    def size(self) -> int:
        """Postings held."""
        return self._size

    def terms(self) -> list[str]:
        """The terms held."""
        with self._lock:
            return list(self._terms)

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
        fetched: Iterable[Fetched],
        cached: dict[str, TermPostings],
        held: int | None,
        history: int | None = None,
    ) -> Snapshot | None:
        """The postings ``fetched`` at ``generation`` (``(term, documents, tfs, lengths)``) with the
        ``cached`` ones read before from generation ``held``; ``None`` if those are of another.

        An empty cache takes ``generation`` (of ``history``) as its own. Postings of another
        generation or history than the one held (a search that raced a writer, before the cache
        moved on) are scored but not kept.
        """
        with self._lock:
            if self._generation is None:
                self._generation, self._history = generation, history
            if cached and held != generation:
                return None
            if generation != self._generation or history != self._history:  # numbered apart, not kept
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

    def warm(self, generation: int, fetched: Iterable[Fetched], history: int | None = None) -> bool:
        """Keep the postings ``fetched`` at ``generation`` ahead of any search for them, at the
        end that leaves first (a term already held stays as it is); ``False`` if the cache holds
        another generation.

        Fetched in decreasing document frequency, the rarest of them leave first.
        """
        with self._lock:
            if self._generation is None:
                self._generation, self._history = generation, history
            if generation != self._generation or history != self._history:
                return False
            for term, documents, tf, lengths in fetched:
                if term in self._terms or self._size + len(documents) > self.limit:
                    continue
                found = _postings(documents, tf, lengths, self._names, self._numbers)
                self._terms[term] = found
                self._terms.move_to_end(term, last=False)
                self._size += len(found)
            return True

    def move_on(self, held: int, generation: int, changed: Sequence[str], fetched: Iterable[Fetched]) -> bool:
        """Bring the cache from generation ``held`` to ``generation``, whose writers changed the
        documents ``changed``: their postings leave every cached term and those ``fetched`` (their
        current postings, of any term) join the cached terms; ``False`` if the cache no longer
        holds ``held``.
        """
        with self._lock:
            if self._generation != held:
                return False
            numbers = [self._number(d) for d in changed]
            gone = np.zeros(len(self._names), dtype=bool)
            gone[numbers] = True
            new = {
                t: _postings(d, tf, n, self._names, self._numbers)
                for t, d, tf, n in fetched
                if t in self._terms  # a term searched meanwhile, at ``held``, is moved on too
            }
            for term, old in list(self._terms.items()):
                joining = new.get(term)
                stays = ~gone[old.documents]
                if joining is None and stays.all():
                    continue
                parts = [old] if joining is None else [old, joining]
                masks = [stays] if joining is None else [stays, np.ones(len(joining), dtype=bool)]
                moved = TermPostings(
                    *(
                        np.concatenate([getattr(p, field)[m] for p, m in zip(parts, masks, strict=True)])
                        for field in ("documents", "tf", "lengths")
                    )
                )
                self._terms[term] = moved  # an existing key keeps its place in the order of use
                self._size += len(moved) - len(old)
            self._generation = generation
            self._evict()
            return True

    def start_over(self, generation: int, history: int | None = None) -> None:
        """Drop everything held and hold ``generation`` of ``history``, empty."""
        with self._lock:
            # A new list: a search still scoring with the old one keeps its numbers.
            self._generation, self._history = generation, history
            self._names = []
            self._numbers = {}
            self._terms.clear()
            self._size = 0

    def _number(self, document: str) -> int:
        number = self._numbers.get(document)
        if number is None:
            number = self._numbers[document] = len(self._names)
            self._names.append(document)
        return number

    def _keep(self, term: str, postings: TermPostings) -> None:
        old = self._terms.pop(term, None)
        if old is not None:
            self._size -= len(old)
        self._terms[term] = postings
        self._size += len(postings)
        self._evict()

    def _evict(self) -> None:
        while self._size > self.limit:
            _, evicted = self._terms.popitem(last=False)
            self._size -= len(evicted)


def _postings(
    documents: Sequence[str],
    tf: Ints,
    lengths: Ints,
    names: list[str],
    numbers: dict[str, int],
) -> TermPostings:
    """Postings with their documents numbered into ``names`` (new ones appended)."""
    out: list[int] = []
    keep = out.append
    for document in documents:
        number = numbers.get(document)
        if number is None:
            number = numbers[document] = len(names)
            names.append(document)
        keep(number)
    return TermPostings(
        np.asarray(out, dtype=np.int32), np.asarray(tf, dtype=np.int32), np.asarray(lengths, dtype=np.int32)
    )
