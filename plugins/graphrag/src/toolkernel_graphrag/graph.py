"""The chunk graph: chunks linked through the entities, titles and links they share, plus weak kNN edges.

Nodes are chunks and entity keys (the HippoRAG 2 shape: passages meet through the entities
they mention). A chunk is joined to every entity its text names, to its own document's title
and to the targets of its links; a document is reachable under its id and source path, so a
link to it and a mention of its title both lead there. Edge weights are the entity's inverse
document frequency, so an entity every chunk names ("American") links nothing while a rare
one links strongly. Similarity edges join each chunk to its nearest neighbours by cosine, with
a small weight: they restate what the vectors know and only break ties.

A server builds this graph from the segments ingestion wrote (:mod:`toolkernel_graphrag.segments`):
every change goes through :meth:`ChunkGraph.apply`, which replaces and removes whole documents,
and the matrix is reassembled from per-chunk state, so the order segments arrive in does not
matter. Each chunk brings the neighbours the knowledge base's dense index found for it; a
chunk's list is completed from the chunks that found *it* (a neighbour found after it was
written), and an entry to a chunk rewritten since is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from toolkernel_graphrag.keys import ChunkInput, EntityKeys
from toolkernel_graphrag.normalise import Normalisation
from toolkernel_graphrag.segments import GraphEntry, GraphStateError
from toolkernel_graphrag.settings import GraphSettings

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass
class _Slot:
    entry: GraphEntry
    entities: list[int]
    titles: list[int]

    @property
    def chunk_id(self) -> str:
        return self.entry.id

    @property
    def document_id(self) -> str:
        return self.entry.document_id


class ChunkGraph:
    """Chunks and entity keys, kept per chunk so any change reassembles the same matrix."""

    def __init__(self, settings: GraphSettings | None = None) -> None:
        self.settings = settings or GraphSettings()
        self.keys = EntityKeys(self.settings)
        self._slots: list[_Slot | None] = []
        self._slot_of: dict[str, int] = {}
        self._document_slots: dict[str, list[int]] = {}
        self._free: list[int] = []
        self._entity_keys: list[str] = []
        self._entity_of: dict[str, int] = {}
        self._df: list[int] = []
        self._title_df: list[int] = []
        self._adjacency: sp.csr_array | None = None
        self._entity_node: IntArray = np.zeros(0, dtype=np.int64)
        self._postings: sp.csr_array | None = None
        # Chunk-entity pairs of every placed chunk, appended in placement order; a released chunk's
        # pairs are marked dead (each chunk's pairs are contiguous), so assembling needs no loop.
        self._pair_slot = np.zeros(0, dtype=np.int64)
        self._pair_entity = np.zeros(0, dtype=np.int64)
        self._pair_alive = np.zeros(0, dtype=bool)
        self._pairs_of: dict[int, tuple[int, int]] = {}
        self._pending: list[tuple[int, list[int]]] = []

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slot_of)

    @property
    def slot_count(self) -> int:
        """Rows of the chunk part of the matrix (live chunks and free slots)."""
        return len(self._slots)

    @property
    def entity_count(self) -> int:
        """Entity keys that link at least two chunks."""
        return int(sum(1 for n in self._df if n >= 2))

    def chunk_ids(self) -> list[str]:
        """Every chunk in the graph, sorted."""
        return sorted(self._slot_of)

    def chunk_at(self, slot: int) -> str | None:
        """The chunk id in ``slot``, ``None`` for a free slot."""
        entry = self._slots[slot]
        return entry.chunk_id if entry is not None else None

    def document_at(self, slot: int) -> str:
        """The document of the chunk in ``slot`` (a live slot)."""
        entry = self._slots[slot]
        assert entry is not None
        return entry.document_id

    def slot(self, chunk_id: str) -> int | None:
        """The row of ``chunk_id``, ``None`` if the graph does not hold it."""
        return self._slot_of.get(chunk_id)

    def metadata(self, slot: int) -> Mapping[str, Any]:
        """What a filter tests for the chunk in ``slot``."""
        entry = self._slots[slot]
        return entry.entry.metadata if entry is not None else {}

    def entities(self, chunk_id: str) -> list[str]:
        """The entity keys of a chunk, sorted."""
        entry = self._slots[self._slot_of[chunk_id]]
        assert entry is not None
        return sorted(self._entity_keys[e] for e in entry.entities)

    def entity_node(self, key: str) -> int | None:
        """The matrix row of an entity key that links two chunks or more, else ``None``."""
        index = self._entity_of.get(key)
        if index is None:
            return None
        self.adjacency()
        node = int(self._entity_node[index])
        return node if node >= 0 else None

    def document_frequency(self, key: str) -> int:
        """How many chunks name the entity ``key``."""
        index = self._entity_of.get(key)
        return 0 if index is None else self._df[index]

    def entity_slots(self, key: str) -> list[int]:
        """The chunk rows that name the entity ``key`` (any document frequency)."""
        index = self._entity_of.get(key)
        if index is None or self._df[index] == 0:
            return []
        self.adjacency()
        assert self._postings is not None
        start, end = self._postings.indptr[index], self._postings.indptr[index + 1]
        return sorted(int(s) for s in self._postings.indices[start:end])

    def key(self, surface: str) -> str:
        """The entity key of a surface form under this graph's normalisation and aliases (memoised)."""
        return self.keys.key(surface)

    # -- changing --------------------------------------------------------------------------

    def apply(self, upserts: Sequence[GraphEntry] = (), *, delete_documents: Iterable[str] = ()) -> None:
        """Remove every chunk of ``delete_documents`` and of the documents ``upserts`` belong to,
        then add ``upserts``: a document's chunks always replace what was held for it."""
        documents = set(delete_documents) | {e.document_id for e in upserts}
        freed = sorted(s for d in documents for s in self._document_slots.pop(d, ()))
        gone = {e.id for e in upserts if e.id in self._slot_of} - {self.chunk_at(s) for s in freed}
        freed += [self._slot_of[cid] for cid in gone]  # a chunk id moved to another document
        for slot in freed:
            self._release(slot)
        for entry in upserts:
            self._place(entry)
        self._adjacency = None

    def add_chunks(self, chunks: Sequence[ChunkInput], surfaces: Sequence[Sequence[str]]) -> list[GraphEntry]:
        """Entries for ``chunks`` (``surfaces[i]``: the entity surface forms found in chunk ``i``),
        without neighbours, applied to this graph and returned: how tests and tools build a graph
        in memory."""
        if len(surfaces) != len(chunks):
            raise ValueError(f"{len(chunks)} chunks but {len(surfaces)} entity lists")
        entries = [entry(c, found, self.keys) for c, found in zip(chunks, surfaces, strict=True)]
        self.apply(entries)
        return entries

    def _release(self, slot: int) -> None:
        held = self._slots[slot]
        assert held is not None
        for e in held.entities:
            self._df[e] -= 1
        for e in held.titles:
            self._title_df[e] -= 1
        del self._slot_of[held.chunk_id]
        others = self._document_slots.get(held.document_id)
        if others is not None and slot in others:
            others.remove(slot)
        self._slots[slot] = None
        self._flush_pairs()
        start, count = self._pairs_of.pop(slot)
        self._pair_alive[start : start + count] = False
        self._free.append(slot)

    def _place(self, entry: GraphEntry) -> int:
        entities = sorted(self._entity(k) for k in entry.entities)
        titles = sorted(self._entity(k) for k in entry.titles)
        for e in entities:
            self._df[e] += 1
        for e in titles:
            self._title_df[e] += 1
        self._free.sort()
        slot = self._free.pop(0) if self._free else len(self._slots)
        held = _Slot(entry, entities, titles)
        if slot == len(self._slots):
            self._slots.append(held)
        else:
            self._slots[slot] = held
        self._slot_of[entry.id] = slot
        self._document_slots.setdefault(entry.document_id, []).append(slot)
        self._pending.append((slot, entities))
        return slot

    def _flush_pairs(self) -> None:
        """Append the pairs of chunks placed since the last flush (one concatenation per batch)."""
        if not self._pending:
            return
        start = len(self._pair_slot)
        for slot, entities in self._pending:
            self._pairs_of[slot] = (start, len(entities))
            start += len(entities)
        self._pair_slot = np.concatenate(
            [self._pair_slot, *(np.full(len(e), s, dtype=np.int64) for s, e in self._pending)]
        )
        self._pair_entity = np.concatenate(
            [self._pair_entity, *(np.asarray(e, dtype=np.int64) for _, e in self._pending)]
        )
        self._pair_alive = np.concatenate(
            [self._pair_alive, np.ones(start - len(self._pair_alive), dtype=bool)]
        )
        self._pending.clear()
        if self._pair_alive.size and self._pair_alive.mean() < 0.5:
            self._compact_pairs()

    def _compact_pairs(self) -> None:
        keep = self._pair_alive
        new_index = np.cumsum(keep) - 1
        self._pairs_of = {slot: (int(new_index[a]) if n else 0, n) for slot, (a, n) in self._pairs_of.items()}
        self._pair_slot, self._pair_entity = self._pair_slot[keep], self._pair_entity[keep]
        self._pair_alive = np.ones(len(self._pair_slot), dtype=bool)

    def _entity(self, key: str) -> int:
        index = self._entity_of.get(key)
        if index is None:
            index = len(self._entity_keys)
            self._entity_keys.append(key)
            self._entity_of[key] = index
            self._df.append(0)
            self._title_df.append(0)
        return index

    # -- the matrix ------------------------------------------------------------------------

    def adjacency(self) -> sp.csr_array:
        """The symmetric weighted adjacency over ``slot_count`` chunk rows then one row per entity key."""
        if self._adjacency is None:
            self._adjacency = self._assemble()
        return self._adjacency

    def _assemble(self) -> sp.csr_array:
        chunks = len(self._slots)
        df = np.asarray(self._df, dtype=np.float64)
        live = max(len(self._slot_of), 1)
        idf = np.where(df >= 2, np.log(live / np.maximum(df, 1.0)), 0.0)
        # A title is an explicit reference: a chunk naming another document's title points at it.
        idf *= np.where(np.asarray(self._title_df) > 0, self.settings.title_weight, 1.0)
        self._flush_pairs()
        rows, cols = self._pair_slot[self._pair_alive], self._pair_entity[self._pair_alive]
        self._postings = sp.csr_array(
            (np.ones(len(rows)), (cols, rows)), shape=(len(self._entity_keys), chunks)
        )
        weights = idf[cols]
        keep = weights > 0
        # Only entities that link two chunks or more become nodes, numbered after the chunk rows.
        linking = np.flatnonzero(idf > 0)
        self._entity_node = np.full(len(self._entity_keys), -1, dtype=np.int64)
        self._entity_node[linking] = chunks + np.arange(len(linking))
        size = chunks + len(linking)
        rows, cols, weights = rows[keep], self._entity_node[cols[keep]], weights[keep]
        parts_rows, parts_cols, parts_w = [rows, cols], [cols, rows], [weights, weights]
        if self.settings.knn > 0:
            src, dst, sim = self._neighbour_lists()
            sim = sim * self.settings.knn_weight
            knn = sp.coo_array((sim, (src, dst)), shape=(size, size)).tocsr()
            knn = knn.maximum(knn.T)
            coo = knn.tocoo()
            parts_rows.append(coo.row.astype(np.int64))
            parts_cols.append(coo.col.astype(np.int64))
            parts_w.append(coo.data)
        matrix = sp.coo_array(
            (np.concatenate(parts_w), (np.concatenate(parts_rows), np.concatenate(parts_cols))),
            shape=(size, size),
        ).tocsr()
        matrix.sum_duplicates()
        return sp.csr_array(matrix)

    def _neighbour_lists(self) -> tuple[IntArray, IntArray, FloatArray]:
        """Every live chunk's ``knn`` nearest live chunks as ``(row, neighbour row, similarity)``.

        Candidates are each chunk's own entries (found when it was written) and the reverse of
        every other chunk's (a chunk written later that found this one): the ``knn`` best by
        similarity, ties to the smaller chunk id. An entry to a chunk rewritten after the entry
        was found (a later generation) is stale and dropped, as is one to a chunk gone.
        """
        src: list[int] = []
        dst: list[int] = []
        sim: list[float] = []
        for x, held in enumerate(self._slots):
            if held is None:
                continue
            mine = held.entry
            for neighbour, similarity in zip(mine.neighbours, mine.similarities, strict=True):
                z = self._slot_of.get(neighbour)
                if z is None or z == x:
                    continue
                other = self._slots[z]
                if other is None or other.entry.generation > mine.generation:
                    continue
                src.append(x)
                dst.append(z)
                sim.append(similarity)
        a = np.asarray(src + dst, dtype=np.int64)
        b = np.asarray(dst + src, dtype=np.int64)
        w = np.asarray(sim + sim, dtype=np.float64)
        ok = w > 0
        a, b, w = a[ok], b[ok], w[ok]
        if not len(a):
            return a, b, w
        # One candidate per pair (its best similarity), then the k best per row.
        size = len(self._slots)
        pair = a * size + b
        order = np.lexsort((-w, pair))
        first = np.ones(len(order), dtype=bool)
        first[1:] = pair[order][1:] != pair[order][:-1]
        a, b, w = a[order][first], b[order][first], w[order][first]
        rank = self._id_rank()
        order = np.lexsort((rank[b], -w, a))
        a, b, w = a[order], b[order], w[order]
        starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1]])
        position = np.arange(len(a)) - np.repeat(starts, np.diff(np.r_[starts, len(a)]))
        keep = position < self.settings.knn
        return a[keep], b[keep], w[keep]

    def _id_rank(self) -> IntArray:
        """Each slot's position in chunk-id order (free slots last): the tie-break of equal similarities."""
        ids = [held.chunk_id if held is not None else "\U0010ffff" for held in self._slots]
        rank = np.empty(len(ids), dtype=np.int64)
        rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
        return rank


def entry(
    chunk: ChunkInput,
    surfaces: Sequence[str],
    keys: EntityKeys,
    neighbours: Sequence[tuple[str, float]] = (),
    generation: int = 0,
) -> GraphEntry:
    """What the graph keeps of ``chunk``: its keys (from ``surfaces``, its title, links and names),
    metadata, and nearest neighbours ``(chunk id, similarity)`` found in ``generation``."""
    entities, titles = keys.of_chunk(chunk, surfaces)
    return GraphEntry(
        chunk.id,
        chunk.document_id,
        dict(chunk.metadata),
        tuple(entities),
        tuple(titles),
        tuple(n for n, _ in neighbours),
        tuple(s for _, s in neighbours),
        generation,
    )


__all__ = ["ChunkGraph", "ChunkInput", "GraphEntry", "GraphStateError", "Normalisation", "entry"]
