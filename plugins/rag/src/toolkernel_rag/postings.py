"""BM25 kept incrementally: term-frequency postings in immutable segments, scored at query time.

A :class:`Segment` holds the chunks of a range of catalog rowids (and the documents those
chunks belong to): for chunks and for documents each, term-frequency postings by term
(:class:`Postings`, CSC: for every term the rows that hold it and how often) and every row's
length. Chunk rowids only grow (:meth:`toolkernel_rag.catalog.Catalog.commit_documents`), so
a new generation's chunks form a new segment after the others, and a removed chunk is a
tombstone: a row marked dead. :class:`SparseState` is one generation: its segments and which
rows are alive.

Scores are not stored: BM25 depends on the whole live corpus (N, each term's document
frequency, the average length), which every change moves. A query computes, per query term
and vectorised over that term's postings, bm25s's ``lucene`` score from the global N, df and
average length: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` times
``tf / (tf + k1 (1 - b + b len / avgdl))``, summed over the query's terms (a repeated term
counts again, as in bm25s). That is exactly what a fresh bm25s build of the live rows scores
(computed in float64 here, float32 in bm25s: equal up to rounding), and the rows keep the
order of their rowids, so ties rank as in a fresh build.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Postings:
    """Term-frequency postings of one side (chunks or documents) of a segment, by term."""

    terms: list[str]
    """The segment's own vocabulary: term ``i`` is ``terms[i]``."""
    indptr: Ints
    """Term ``i``'s postings are ``rows[indptr[i]:indptr[i + 1]]`` (ascending) and ``tf[…]``."""
    rows: Int32s
    tf: Int32s
    lengths: Int32s
    """Each row's number of terms (BM25's document length)."""
    lookup: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lookup", {t: i for i, t in enumerate(self.terms)})

    @property
    def size(self) -> int:
        return len(self.lengths)

    def check(self) -> None:
        """:raises ValueError: the arrays do not fit together (a damaged file)."""
        if (
            len(self.indptr) != len(self.terms) + 1
            or int(self.indptr[-1]) != len(self.rows)
            or len(self.tf) != len(self.rows)
            or (len(self.rows) and int(self.rows.max()) >= self.size)
        ):
            raise ValueError("postings arrays do not fit together")

    def of(self, term: str) -> tuple[Int32s, Int32s] | None:
        """``(rows, tf)`` of ``term``, or ``None`` when no row of this segment holds it."""
        index = self.lookup.get(term)
        if index is None:
            return None
        start, end = int(self.indptr[index]), int(self.indptr[index + 1])
        return self.rows[start:end], self.tf[start:end]


class PostingsBuilder:
    """Postings built row by row from term strings, holding each row's term ids, not its text."""

    def __init__(self) -> None:
        self._vocabulary = _Vocabulary()
        self._terms: array[int] = array("i")
        self._lengths: array[int] = array("i")

    def add(self, terms: str) -> None:
        tokens = terms.split()
        self._terms.extend(map(self._vocabulary.__getitem__, tokens))
        self._lengths.append(len(tokens))

    def build(self) -> Postings:
        lengths = np.frombuffer(self._lengths, dtype=np.int32).copy() if self._lengths else _int32(0)
        terms = np.frombuffer(self._terms, dtype=np.int32) if self._terms else _int32(0)
        n_rows, n_terms = len(lengths), len(self._vocabulary)
        rows = np.repeat(np.arange(n_rows, dtype=np.int64), lengths)
        keys, tf = np.unique(terms.astype(np.int64) * max(n_rows, 1) + rows, return_counts=True)
        by_term = keys // max(n_rows, 1)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(by_term, minlength=n_terms), out=indptr[1:])
        vocabulary = list(self._vocabulary)
        self._vocabulary, self._terms, self._lengths = _Vocabulary(), array("i"), array("i")
        return Postings(
            vocabulary, indptr, (keys % max(n_rows, 1)).astype(np.int32), tf.astype(np.int32), lengths
        )


class _Vocabulary(dict[str, int]):
    """Term -> id, a new term getting the next id when first looked up (one dict lookup per token)."""

    def __missing__(self, term: str) -> int:
        self[term] = index = len(self)
        return index


def _int32(n: int) -> Int32s:
    return np.zeros(n, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class Segment:
    """The chunks of a range of rowids and their documents (each document's chunks are all here)."""

    rowids: Ints
    """Catalog rowids of the chunks, ascending."""
    ids: list[str]
    metadata_raw: list[Any]
    """Each chunk's metadata, as JSON text (read from the catalog: a writer never parses it) or parsed."""
    chunks: Postings
    documents: list[str]
    """Document ids, in the order of their first chunk."""
    document_terms: Postings
    document_indptr: Ints
    """Document ``d``'s chunks are ``document_chunks[document_indptr[d]:document_indptr[d + 1]]``."""
    document_chunks: Int32s

    @cached_property
    def metadata(self) -> list[dict[str, Any]]:
        """Each chunk's metadata, parsed once (a segment is shared by every later generation)."""
        return [json.loads(m) if isinstance(m, str) else m for m in self.metadata_raw]

    def check(self) -> None:
        """:raises ValueError: the parts do not fit together (a damaged file)."""
        self.chunks.check()
        self.document_terms.check()
        n, d = len(self.rowids), len(self.documents)
        if (
            len(self.ids) != n
            or len(self.metadata_raw) != n
            or self.chunks.size != n
            or self.document_terms.size != d
            or len(self.document_indptr) != d + 1
            or int(self.document_indptr[-1]) != len(self.document_chunks)
            or len(self.document_chunks) != n
        ):
            raise ValueError("segment parts do not fit together")


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk as a segment is built from it."""

    rowid: int
    id: str
    document_id: str
    terms: str
    metadata: str
    """As the catalog stores it (JSON)."""


def build_segment(
    rows: Iterable[ChunkRow], document_terms: Callable[[Sequence[str]], Mapping[str, str]]
) -> Segment:
    """A segment of ``rows`` (in rowid order); ``document_terms`` gives the terms of documents by id."""
    rowids: array[int] = array("q")
    ids: list[str] = []
    metadata: list[str] = []
    chunks = PostingsBuilder()
    first_seen: dict[str, list[int]] = {}
    for row in rows:
        first_seen.setdefault(row.document_id, []).append(len(ids))
        rowids.append(row.rowid)
        ids.append(row.id)
        metadata.append(row.metadata)
        chunks.add(row.terms)
    documents = list(first_seen)
    terms = PostingsBuilder()
    for start in range(0, len(documents), 2000):
        page = documents[start : start + 2000]
        found = document_terms(page)
        for document_id in page:
            terms.add(found.get(document_id, ""))
    sizes = np.fromiter((len(c) for c in first_seen.values()), dtype=np.int64, count=len(documents))
    indptr = np.zeros(len(documents) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    members = np.fromiter((i for c in first_seen.values() for i in c), dtype=np.int32, count=int(indptr[-1]))
    return Segment(
        np.frombuffer(rowids, dtype=np.int64).copy() if rowids else np.zeros(0, dtype=np.int64),
        ids,
        metadata,
        chunks.build(),
        documents,
        terms.build(),
        indptr,
        members,
    )


def merge_segments(segments: Sequence[Segment], live: Sequence[Bools]) -> Segment:
    """One segment of the live rows of ``segments`` (``live[i]``: which chunks of segment ``i``)."""
    keep_chunks = list(live)
    keep_documents = [_document_live(s, k) for s, k in zip(segments, keep_chunks, strict=True)]
    new_chunk = _renumber(keep_chunks)
    rowids = np.concatenate([s.rowids[k] for s, k in zip(segments, keep_chunks, strict=True)])
    ids = [
        i
        for s, k in zip(segments, keep_chunks, strict=True)
        for i, keep in zip(s.ids, k, strict=True)
        if keep
    ]
    metadata = [
        m
        for s, k in zip(segments, keep_chunks, strict=True)
        for m, keep in zip(s.metadata_raw, k, strict=True)
        if keep
    ]
    documents = [
        d
        for s, k in zip(segments, keep_documents, strict=True)
        for d, keep in zip(s.documents, k, strict=True)
        if keep
    ]
    sizes: list[Ints] = []
    members: list[Ints] = []
    for s, kd, renumbered in zip(segments, keep_documents, new_chunk, strict=True):
        counts = np.diff(s.document_indptr)
        sizes.append(counts[kd])
        owner = np.repeat(np.arange(len(s.documents)), counts)
        members.append(renumbered[s.document_chunks[kd[owner]]])
    indptr = np.zeros(len(documents) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64), out=indptr[1:])
    return Segment(
        rowids,
        ids,
        metadata,
        _merge_postings([s.chunks for s in segments], keep_chunks),
        documents,
        _merge_postings([s.document_terms for s in segments], keep_documents),
        indptr,
        (np.concatenate(members) if members else np.zeros(0, dtype=np.int64)).astype(np.int32),
    )


def _document_live(segment: Segment, chunk_live: Bools) -> Bools:
    """A document is alive while its chunks are (they are replaced and removed together)."""
    if not len(segment.documents):
        return np.zeros(0, dtype=bool)
    return chunk_live[segment.document_chunks[segment.document_indptr[:-1]]]


def _renumber(keeps: Sequence[Bools]) -> list[Ints]:
    """For every part, each kept row's new number across all parts (``-1`` for a dropped row)."""
    out: list[Ints] = []
    offset = 0
    for keep in keeps:
        numbers = np.full(len(keep), -1, dtype=np.int64)
        numbers[keep] = offset + np.arange(int(keep.sum()))
        offset += int(keep.sum())
        out.append(numbers)
    return out


def _merge_postings(parts: Sequence[Postings], keeps: Sequence[Bools]) -> Postings:
    vocabulary: dict[str, int] = {}
    terms_out: list[Ints] = []
    rows_out: list[Ints] = []
    tf_out: list[Int32s] = []
    renumbered = _renumber(keeps)
    for part, keep, numbers in zip(parts, keeps, renumbered, strict=True):
        mapping = np.fromiter(
            (vocabulary.setdefault(t, len(vocabulary)) for t in part.terms),
            dtype=np.int64,
            count=len(part.terms),
        )
        term_of = np.repeat(mapping, np.diff(part.indptr))
        kept = keep[part.rows] if len(part.rows) else np.zeros(0, dtype=bool)
        terms_out.append(term_of[kept])
        rows_out.append(numbers[part.rows[kept]])
        tf_out.append(part.tf[kept])
    terms = np.concatenate(terms_out) if terms_out else np.zeros(0, dtype=np.int64)
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
    tf = np.concatenate(tf_out) if tf_out else _int32(0)
    n_rows = sum(int(k.sum()) for k in keeps)
    order = np.argsort(terms * max(n_rows, 1) + rows, kind="stable")
    counts = np.bincount(terms, minlength=len(vocabulary))
    # Terms no live row holds any more are dropped from the vocabulary.
    used = np.flatnonzero(counts)
    remap = np.full(len(vocabulary), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    names = list(vocabulary)
    indptr = np.zeros(len(used) + 1, dtype=np.int64)
    np.cumsum(counts[used], out=indptr[1:])
    lengths = (
        np.concatenate([p.lengths[k] for p, k in zip(parts, keeps, strict=True)]) if parts else _int32(0)
    )
    return Postings(
        [names[i] for i in used], indptr, rows[order].astype(np.int32), tf[order].astype(np.int32), lengths
    )


@dataclass(frozen=True, eq=False)
class _Side:
    """Chunks or documents of every segment, as one row space (segment after segment)."""

    postings: list[Postings]
    offsets: list[int]
    live: Bools
    lengths: Int32s
    count: int
    average: float
    norms: dict[tuple[float, float], Floats] = field(default_factory=dict)

    @classmethod
    def of(cls, postings: list[Postings], live: Bools) -> _Side:
        offsets: list[int] = []
        start = 0
        for p in postings:
            offsets.append(start)
            start += p.size
        lengths = np.concatenate([p.lengths for p in postings]) if postings else _int32(0)
        count = int(live.sum())
        total = int(lengths[live].sum(dtype=np.int64)) if count else 0
        return cls(postings, offsets, live, lengths, count, total / count if count else 0.0)

    def scores(self, terms: Sequence[str], k1: float, b: float) -> Floats:
        """BM25 (lucene) of every row for ``terms`` over the live rows; dead rows score 0."""
        out = np.zeros(len(self.live), dtype=np.float64)
        if not self.count:
            return out
        cache: dict[str, tuple[Ints, Floats] | None] = {}
        for term in terms:
            if term not in cache:
                cache[term] = self._term(term, k1, b)
            found = cache[term]
            if found is not None:
                out[found[0]] += found[1]
        return out

    def _term(self, term: str, k1: float, b: float) -> tuple[Ints, Floats] | None:
        rows_parts: list[npt.NDArray[np.integer[Any]]] = []
        tf_parts: list[Int32s] = []
        for postings, offset in zip(self.postings, self.offsets, strict=True):
            found = postings.of(term)
            if found is not None:
                rows_parts.append(found[0] + offset if offset else found[0])
                tf_parts.append(found[1])
        if not rows_parts:
            return None
        rows = rows_parts[0] if len(rows_parts) == 1 else np.concatenate(rows_parts)
        tf = (tf_parts[0] if len(tf_parts) == 1 else np.concatenate(tf_parts)).astype(np.float64)
        if self.count != len(self.live):  # tombstones
            alive = self.live[rows]
            rows, tf = rows[alive], tf[alive]
        df = len(rows)
        if not df:
            return None
        idf = math.log(1 + (self.count - df + 0.5) / (df + 0.5))
        return rows.astype(np.int64), idf * tf / (tf + self._norms(k1, b)[rows])

    def _norms(self, k1: float, b: float) -> Floats:
        """Every row's ``k1 (1 - b + b len / avgdl)``, computed once per generation."""
        key = (k1, b)
        if key not in self.norms:
            self.norms[key] = np.asarray(k1 * (1 - b + b * self.lengths / self.average), dtype=np.float64)
        return self.norms[key]


@dataclass(frozen=True, eq=False)
class SparseState:
    """One catalog generation's BM25 index: segments in rowid order, which chunks are alive.

    Never changed once made: :meth:`apply` makes the next generation's, sharing the segments.
    """

    generation: int
    max_rowid: int
    """The highest chunk rowid the segments cover: the next generation's new chunks are above it."""
    segments: tuple[Segment, ...]
    chunk_live: Bools
    chunks: _Side = field(init=False)
    documents: _Side = field(init=False)
    rowids: Ints = field(init=False)
    ids: list[str] = field(init=False)
    metadata: list[dict[str, Any]] = field(init=False)
    document_ids: list[str] = field(init=False)
    document_indptr: Ints = field(init=False)
    document_chunks: Ints = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        segments = self.segments
        set_(self, "chunks", _Side.of([s.chunks for s in segments], self.chunk_live))
        first = [
            s.document_chunks[s.document_indptr[:-1]].astype(np.int64) + o
            for s, o in zip(segments, self.chunks.offsets, strict=True)
        ]
        document_live = self.chunk_live[np.concatenate(first)] if first else np.zeros(0, dtype=bool)
        set_(self, "documents", _Side.of([s.document_terms for s in segments], document_live))
        set_(
            self,
            "rowids",
            np.concatenate([s.rowids for s in segments]) if segments else np.zeros(0, np.int64),
        )
        set_(self, "ids", [i for s in segments for i in s.ids])
        set_(self, "metadata", [m for s in segments for m in s.metadata])
        set_(self, "document_ids", [d for s in segments for d in s.documents])
        indptr = [np.zeros(1, dtype=np.int64)]
        members: list[Ints] = []
        total = 0
        for s, offset in zip(segments, self.chunks.offsets, strict=True):
            indptr.append(s.document_indptr[1:] + total)
            total += int(s.document_indptr[-1])
            members.append(s.document_chunks.astype(np.int64) + offset)
        set_(self, "document_indptr", np.concatenate(indptr))
        set_(self, "document_chunks", np.concatenate(members) if members else np.zeros(0, np.int64))

    @classmethod
    def empty(cls) -> SparseState:
        return cls(-1, 0, (), np.zeros(0, dtype=bool))

    @property
    def dead(self) -> Ints:
        """Rowids of the chunks the segments hold that are no longer alive."""
        return self.rowids[~self.chunk_live]

    def apply(self, generation: int, added: Segment | None, removed: Sequence[int]) -> SparseState:
        """The next generation: ``removed`` chunk rowids dead, ``added`` (rowids above
        :attr:`max_rowid`) appended."""
        live = self.chunk_live.copy()
        if len(removed):
            gone = np.asarray(removed, dtype=np.int64)
            live[np.isin(self.rowids, gone)] = False
        segments = self.segments
        max_rowid = self.max_rowid
        if added is not None and len(added.rowids):
            segments = (*segments, added)
            live = np.concatenate([live, np.ones(len(added.rowids), dtype=bool)])
            max_rowid = max(max_rowid, int(added.rowids[-1]))
        return SparseState(generation, max_rowid, segments, live)

    def compacted(self, keep_first: bool = True) -> SparseState:
        """The same index with its segments after the first (or all of them) merged into one,
        dead rows dropped."""
        start = 1 if keep_first and len(self.segments) > 1 else 0
        offsets = self.chunks.offsets
        lives = [self.chunk_live[o : o + len(s.rowids)] for s, o in zip(self.segments, offsets, strict=True)]
        merged = merge_segments(self.segments[start:], lives[start:])
        segments = (*self.segments[:start], merged)
        live = np.concatenate([*lives[:start], np.ones(len(merged.rowids), dtype=bool)])
        return SparseState(self.generation, self.max_rowid, segments, live)

    def document_rows(self, document: int) -> Ints:
        """The chunk rows of document row ``document``."""
        return self.document_chunks[self.document_indptr[document] : self.document_indptr[document + 1]]
