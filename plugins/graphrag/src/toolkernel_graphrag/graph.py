"""The chunk graph: chunks linked through the entities, titles and links they share, plus weak kNN edges.

Nodes are chunks and entity keys (the HippoRAG 2 shape: passages meet through the entities
they mention). A chunk is joined to every entity its text names, to its own document's title
and to the targets of its links; a document is reachable under its id and source path, so a
link to it and a mention of its title both lead there. Edge weights are the entity's inverse
document frequency, so an entity every chunk names ("American") links nothing while a rare
one links strongly. Similarity edges join each chunk to its nearest neighbours by cosine, with
a small weight: they restate what the vectors know and only break ties.

Every change goes through :meth:`ChunkGraph.apply`, which adds, replaces and removes chunks by
id; the matrix is then reassembled from per-chunk state, so a graph updated incrementally
equals, edge for edge, one built from scratch on the same chunks.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from toolkernel.errors import ToolkernelError
from toolkernel_graphrag.links import document_keys, extract_links
from toolkernel_graphrag.normalise import Normalisation, normalise
from toolkernel_graphrag.phrases import sub_phrases
from toolkernel_graphrag.settings import GraphSettings

FORMAT_VERSION = 1
KEY_MEMO = 1_000_000
"""Surface forms whose keys are remembered (names repeat across chunks; normalising is the slow part)."""
SIMILARITY_DECIMALS = 4
"""Cosine similarities are rounded so that matrix products of any shape give the same kNN lists."""
KNN_SAMPLE = 1024
"""Columns sampled per block to bound each row's k-th best similarity from below (kNN candidates)."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Vectors = npt.NDArray[np.float32]


class GraphStateError(ToolkernelError, RuntimeError):
    """The persisted graph cannot be read: missing, from another format version, or inconsistent."""


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


@dataclass
class _Slot:
    chunk_id: str
    document_id: str
    metadata: dict[str, Any]
    entities: list[int]
    titles: list[int]
    metadata_json: str | None = None
    """``metadata`` as saved, encoded on the first save: later saves re-encode only new chunks."""


class ChunkGraph:
    """Chunks and entity keys, kept per chunk so any change reassembles the same matrix."""

    def __init__(self, settings: GraphSettings | None = None) -> None:
        self.settings = settings or GraphSettings()
        self._slots: list[_Slot | None] = []
        self._slot_of: dict[str, int] = {}
        self._free: list[int] = []
        self._entity_keys: list[str] = []
        self._entity_of: dict[str, int] = {}
        self._df: list[int] = []
        self._title_df: list[int] = []
        self._vectors: Vectors | None = None
        self._knn: IntArray | None = None
        self._knn_sim: npt.NDArray[np.float32] | None = None
        self._adjacency: sp.csr_array | None = None
        self._keys_of: dict[str, tuple[str, ...]] = {}
        self._key_of: dict[str, str] = {}
        self._entity_node: IntArray = np.zeros(0, dtype=np.int64)
        self._postings: sp.csr_array | None = None
        # Chunk-entity pairs of every placed chunk, appended in placement order; a released chunk's
        # pairs are marked dead (each chunk's pairs are contiguous), so assembling needs no loop.
        self._pair_slot = np.zeros(0, dtype=np.int64)
        self._pair_entity = np.zeros(0, dtype=np.int64)
        self._pair_alive = np.zeros(0, dtype=bool)
        self._pairs_of: dict[int, tuple[int, int]] = {}
        self._pending: list[tuple[int, list[int]]] = []
        # Entity keys only grow: the saved list is kept encoded, and a save encodes only new keys.
        self._entities_json: list[str] = []
        self._entities_encoded = 0

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
        return entry.metadata if entry is not None else {}

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
        found = self._key_of.get(surface)
        if found is None:
            found = normalise(surface, self.settings.normalisation, self.settings.alias_keys())
            if len(self._key_of) < KEY_MEMO:
                self._key_of[surface] = found
        return found

    def keys(self, surface: str) -> tuple[str, ...]:
        """The keys a surface form links under: its own and, with ``subphrases``, those of its
        shorter runs ("President Richard Nixon" also links as "Richard Nixon"), memoised."""
        found = self._keys_of.get(surface)
        if found is None:
            spans = sub_phrases(surface) if self.settings.subphrases else [surface]
            found = tuple(dict.fromkeys(k for k in map(self.key, spans) if k))
            if len(self._keys_of) < KEY_MEMO:
                self._keys_of[surface] = found
        return found

    def title_keys(self, title: str) -> tuple[str, ...]:
        """The keys a document's title answers to: the title, and its head before a comma
        ("Summerlin, Nevada" is also "Summerlin", the way encyclopaedias disambiguate places)."""
        heads = [title]
        if "," in title:
            heads.append(title.split(",", 1)[0])
        return tuple(dict.fromkeys(k for k in map(self.key, heads) if k))

    # -- changing --------------------------------------------------------------------------

    def apply(
        self,
        upserts: Sequence[ChunkInput] = (),
        surfaces: Sequence[Sequence[str]] = (),
        *,
        delete_chunks: Iterable[str] = (),
        delete_documents: Iterable[str] = (),
    ) -> None:
        """Remove chunks (by id or by document), then add or replace ``upserts``.

        ``surfaces[i]`` are the entity surface forms an extractor found in ``upserts[i]``.
        A chunk that is already present is replaced, which is how an edited document comes in.
        """
        if len(surfaces) != len(upserts):
            raise ValueError(f"{len(upserts)} chunks but {len(surfaces)} entity lists")
        documents = set(delete_documents)
        gone = {cid for cid in delete_chunks if cid in self._slot_of}
        if documents:
            gone |= {e.chunk_id for e in self._slots if e is not None and e.document_id in documents}
        gone |= {c.id for c in upserts if c.id in self._slot_of}
        freed = sorted(self._slot_of[cid] for cid in gone)
        for slot in freed:
            self._release(slot)
        added = [self._place(chunk, found) for chunk, found in zip(upserts, surfaces, strict=True)]
        if self.settings.knn > 0 or any(c.vector is not None for c in upserts):
            self._store_vectors(freed, added, upserts)
        if self.settings.knn > 0:
            self._update_neighbours(freed, added)
        self._adjacency = None

    def _release(self, slot: int) -> None:
        entry = self._slots[slot]
        assert entry is not None
        for e in entry.entities:
            self._df[e] -= 1
        for e in entry.titles:
            self._title_df[e] -= 1
        del self._slot_of[entry.chunk_id]
        self._slots[slot] = None
        self._flush_pairs()
        start, count = self._pairs_of.pop(slot)
        self._pair_alive[start : start + count] = False
        self._free.append(slot)

    def _place(self, chunk: ChunkInput, surfaces: Sequence[str]) -> int:
        keys = {k for surface in surfaces for k in self.keys(surface)}
        title_keys = self.title_keys(chunk.title) if chunk.title else ()
        keys.update(title_keys)
        keys.update(extract_links(chunk.text))
        keys.update(document_keys(chunk.document_id, chunk.source))
        entities = sorted(self._entity(k) for k in keys)
        titles = sorted(self._entity_of[k] for k in set(title_keys))
        for e in entities:
            self._df[e] += 1
        for e in titles:
            self._title_df[e] += 1
        self._free.sort()
        slot = self._free.pop(0) if self._free else len(self._slots)
        entry = _Slot(chunk.id, chunk.document_id, dict(chunk.metadata), entities, titles)
        if slot == len(self._slots):
            self._slots.append(entry)
        else:
            self._slots[slot] = entry
        self._slot_of[chunk.id] = slot
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

    # -- similarity edges ------------------------------------------------------------------

    def nearest(
        self, query: Vectors, k: int, allowed: npt.NDArray[np.bool_] | None = None
    ) -> tuple[IntArray, Vectors]:
        """The ``k`` live chunk rows (within ``allowed``) whose vectors are most similar to ``query``,
        most similar first (ties: lower row), and their unit vectors: one product over the rows in
        place, no copy of every vector."""
        if self._vectors is None:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        usable = np.fromiter((e is not None for e in self._slots), dtype=bool, count=len(self._slots))
        usable = usable[: self._vectors.shape[0]]
        if allowed is not None:
            usable &= allowed[: len(usable)]
        rows = np.flatnonzero(usable)
        sims = (self._vectors @ query)[rows]
        top = rows[np.argsort(-sims, kind="stable")[:k]]
        return top, self._vectors[top]

    def _store_vectors(self, freed: list[int], added: list[int], chunks: Sequence[ChunkInput]) -> None:
        """Keep each chunk's unit vector in its row (similarity edges and Mastra's walk use them)."""
        missing = [c.id for c in chunks if c.vector is None]
        if missing:
            raise ValueError(
                f"every chunk needs a vector (similarity edges, knn={self.settings.knn}); "
                f"none for {missing[:3]}"
            )
        if self._vectors is None:
            dimension = len(chunks[0].vector or ())
            self._vectors = np.zeros((0, dimension), dtype=np.float32)
        dimension = self._vectors.shape[1]
        for chunk in chunks:
            if len(chunk.vector or ()) != dimension:
                raise ValueError(
                    f"chunk {chunk.id!r}: vector of dimension {len(chunk.vector or ())}, "
                    f"the graph holds {dimension}"
                )
        self._vectors = _rows(self._vectors, len(self._slots), 0.0)
        for slot in freed:
            self._vectors[slot] = 0.0
        for slot, chunk in zip(added, chunks, strict=True):
            vector = np.asarray(chunk.vector, dtype=np.float32)
            norm = float(np.linalg.norm(vector))
            self._vectors[slot] = vector / norm if norm > 0 else vector

    def _update_neighbours(self, freed: list[int], added: list[int]) -> None:
        """Keep every live chunk's k nearest neighbours exact after slots were freed and filled."""
        k = self.settings.knn
        size = len(self._slots)
        if self._knn is None or self._knn_sim is None:
            self._knn = np.full((0, k), -1, dtype=np.int64)
            self._knn_sim = np.zeros((0, k), dtype=np.float32)
        self._knn = _rows(self._knn, size, -1)
        self._knn_sim = _rows(self._knn_sim, size, 0.0)
        for slot in freed:
            self._knn[slot] = -1
            self._knn_sim[slot] = 0.0
        live = np.array([e is not None for e in self._slots], dtype=bool)
        changed = set(freed) | set(added)
        stale = {int(s) for s in np.flatnonzero(np.isin(self._knn, list(changed)).any(axis=1)) if live[s]}
        # A chunk whose list lost a member is recomputed whole; new chunks too.
        recompute = sorted((stale | set(added)) & set(np.flatnonzero(live).tolist()))
        rank = self._id_rank()
        self._recompute_neighbours(recompute, live, rank)
        # Every other live chunk may only gain a new chunk as a closer neighbour.
        others = np.flatnonzero(live & ~np.isin(np.arange(size), recompute))
        if added and len(others):
            self._merge_new_neighbours(others, np.array(sorted(added), dtype=np.int64), rank)

    def _id_rank(self) -> IntArray:
        """Each slot's position in chunk-id order (free slots last): the tie-break of equal similarities."""
        ids = [e.chunk_id if e is not None else "\U0010ffff" for e in self._slots]
        rank = np.empty(len(ids), dtype=np.int64)
        rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
        return rank

    def _store_best(self, slots: IntArray, candidates: IntArray, sims: FloatArray, rank: IntArray) -> None:
        """Keep the k best candidates per row: higher rounded similarity first, then smaller chunk id."""
        assert self._knn is not None
        assert self._knn_sim is not None
        k = self.settings.knn
        tiebreak = np.where(candidates >= 0, rank[np.maximum(candidates, 0)], np.iinfo(np.int64).max)
        order = np.lexsort((tiebreak, -sims), axis=1)[:, :k]
        best = np.take_along_axis(candidates, order, axis=1)
        best_sims = np.take_along_axis(sims, order, axis=1)
        valid = np.isfinite(best_sims) & (best >= 0)
        width = best.shape[1]
        self._knn[slots] = -1
        self._knn_sim[slots] = 0.0
        self._knn[slots, :width] = np.where(valid, best, -1)
        self._knn_sim[slots, :width] = np.where(valid, best_sims, 0.0)

    def _recompute_neighbours(self, rows: list[int], live: npt.NDArray[np.bool_], rank: IntArray) -> None:
        """Each row's k nearest live chunks, exactly, one float32 product per block of rows.

        The k-th best similarity over a sample of the columns is a lower bound of the k-th best
        over all of them, so every column at least that similar (less the rounding reach) is a
        candidate: a comparison and a ``nonzero`` over the block instead of selecting within every
        row, and typically ten times k candidates per row, which are then ordered exactly.
        """
        assert self._vectors is not None
        k = self.settings.knn
        columns = np.flatnonzero(live)
        width = min(k, len(columns) - 1)
        block = 512
        # Every slot live (a fresh build): the vectors themselves, no copy.
        live_vectors_t = (self._vectors if len(columns) == len(self._vectors) else self._vectors[columns]).T
        sample = np.arange(0, len(columns), max(1, len(columns) // KNN_SAMPLE))
        reach = 2 * 10.0**-SIMILARITY_DECIMALS
        for start in range(0, len(rows), block):
            part = np.array(rows[start : start + block], dtype=np.int64)
            if width <= 0:
                self._store_best(part, np.full((len(part), 0), -1), np.zeros((len(part), 0)), rank)
                continue
            raw = self._vectors[part] @ live_vectors_t
            own = np.searchsorted(columns, part)
            raw[np.arange(len(part)), own] = -np.inf  # not its own neighbour (every row is a live column)
            if len(sample) > width:
                sampled = raw[:, sample]
                lower = np.partition(sampled, len(sample) - width, axis=1)[:, len(sample) - width]
            else:
                lower = np.full(len(part), -np.inf, dtype=raw.dtype)
            r, c = np.nonzero(raw >= (lower - reach)[:, None])
            counts = np.bincount(r, minlength=len(part))
            offsets = np.arange(len(r)) - np.repeat(np.cumsum(counts) - counts, counts)
            candidates = np.full((len(part), int(counts.max())), -1, dtype=np.int64)
            sims = np.full(candidates.shape, -np.inf)
            candidates[r, offsets] = columns[c]
            sims[r, offsets] = raw[r, c].astype(np.float64).round(SIMILARITY_DECIMALS)
            self._store_best(part, candidates, sims, rank)

    def _merge_new_neighbours(self, rows: IntArray, added: IntArray, rank: IntArray) -> None:
        assert self._knn is not None
        assert self._knn_sim is not None
        assert self._vectors is not None
        k = self.settings.knn
        block = 2048
        added_t = self._vectors[added].T
        wanted = np.zeros(len(self._vectors), dtype=bool)
        wanted[rows] = True
        # Blocks of consecutive slots: each product reads the vectors in place, with no gathered copy.
        for start in range(0, len(self._vectors), block):
            part = np.flatnonzero(wanted[start : start + block]) + start
            if not len(part):
                continue
            products = (self._vectors[start : start + block] @ added_t)[part - start]
            new_sims = np.round(products.astype(np.float64), SIMILARITY_DECIMALS)
            full = self._knn[part, k - 1] >= 0
            kth = np.where(full, self._knn_sim[part, k - 1].astype(np.float64), -np.inf)
            touched = part[(new_sims >= kth[:, None]).any(axis=1)]
            if not len(touched):
                continue
            sims_new = new_sims[(new_sims >= kth[:, None]).any(axis=1)]
            old = self._knn[touched]
            old_sims = np.where(old >= 0, self._knn_sim[touched].astype(np.float64), -np.inf)
            candidates = np.concatenate([old, np.broadcast_to(added, (len(touched), len(added)))], axis=1)
            self._store_best(touched, candidates, np.concatenate([old_sims, sims_new], axis=1), rank)

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
        if self.settings.knn > 0 and self._knn is not None and self._knn_sim is not None:
            src = np.repeat(np.arange(self._knn.shape[0]), self._knn.shape[1])
            dst = self._knn.ravel()
            sim = self._knn_sim.ravel().astype(np.float64)
            ok = (dst >= 0) & (sim > 0)
            src, dst, sim = src[ok], dst[ok], sim[ok] * self.settings.knn_weight
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

    # -- persistence -----------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the graph to ``directory/graph.npz`` in one atomic replace (state and vectors together)."""
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / "graph.tmp.npz"
        tmp.write_bytes(self.dumps())
        os.replace(tmp, directory / "graph.npz")

    def dumps(self) -> bytes:
        """The whole graph as one ``.npz`` blob (what :meth:`loads` reads back)."""
        live = [e for e in self._slots if e is not None]
        for entry in live:
            if entry.metadata_json is None:
                entry.metadata_json = _json(entry.metadata)
        header = (
            f'{{"format":{FORMAT_VERSION},"settings":{_json(self.settings.graph_identity())},'
            f'"entities":{self._encoded_entities()},'
            f'"ids":{_json([None if e is None else e.chunk_id for e in self._slots])},'
            f'"documents":{_json([e.document_id for e in live])},'
            f'"metadata":[{",".join(e.metadata_json or "" for e in live)}]}}'
        )
        self._flush_pairs()
        arrays: dict[str, npt.NDArray[Any]] = {
            "header": np.frombuffer(header.encode(), dtype=np.uint8),
            "pair_slots": self._pair_slot[self._pair_alive],
            "pair_entities": self._pair_entity[self._pair_alive],
            "title_counts": np.array([len(e.titles) for e in live], dtype=np.int64),
            "titles": np.fromiter((x for e in live for x in e.titles), dtype=np.int64),
        }
        if self._vectors is not None:
            arrays["vectors"] = self._vectors
        if self._knn is not None and self._knn_sim is not None:
            arrays.update(knn=self._knn, knn_sim=self._knn_sim)
        out = io.BytesIO()
        np.savez(out, **arrays)  # type: ignore[arg-type]
        return out.getvalue()

    def _encoded_entities(self) -> str:
        """The entity keys as a JSON list, encoding only keys added since the last save."""
        if self._entities_encoded < len(self._entity_keys):
            self._entities_json.append(_json(self._entity_keys[self._entities_encoded :])[1:-1])
            self._entities_encoded = len(self._entity_keys)
        return f"[{','.join(self._entities_json)}]"

    @classmethod
    def load(cls, directory: Path, settings: GraphSettings | None = None) -> ChunkGraph:
        """Read a graph written by :meth:`save`; the settings must be the ones it was built with."""
        path = directory / "graph.npz"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise GraphStateError(
                f"no graph at {path}: ingest the knowledge base with the graph enabled"
            ) from None
        return cls.loads(data, settings, str(path))

    @classmethod
    def loads(cls, data: bytes, settings: GraphSettings | None = None, path: str = "the graph") -> ChunkGraph:
        """Read a graph from :meth:`dumps`'s blob; ``path`` names it in errors."""
        try:
            with np.load(io.BytesIO(data)) as stored:
                arrays = {name: stored[name] for name in stored.files}
            header = json.loads(arrays["header"].tobytes())
        except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as error:
            raise GraphStateError(
                f"{path} is not a readable graph ({error}); rebuild it by re-ingesting"
            ) from None
        if header.get("format") != FORMAT_VERSION:
            raise GraphStateError(
                f"{path} has format {header.get('format')}, expected {FORMAT_VERSION}; rebuild it"
            )
        graph = cls(settings)
        if header["settings"] != graph.settings.graph_identity():
            raise GraphStateError(
                f"{path} was built with {header['settings']}, not {graph.settings.graph_identity()}; "
                "rebuild it"
            )
        graph._entity_keys = list(header["entities"])
        graph._entity_of = {k: i for i, k in enumerate(graph._entity_keys)}
        order = np.argsort(arrays["pair_slots"], kind="stable")
        pair_slots, pair_entities = arrays["pair_slots"][order], arrays["pair_entities"][order]
        df = np.bincount(pair_entities, minlength=len(graph._entity_keys))
        title_df = np.bincount(arrays["titles"], minlength=len(graph._entity_keys))
        graph._df, graph._title_df = df.tolist(), title_df.tolist()
        counts = np.bincount(pair_slots, minlength=len(header["ids"]))
        live_slots = [i for i, chunk_id in enumerate(header["ids"]) if chunk_id is not None]
        entities = _split(pair_entities, counts[live_slots])
        titles = _split(arrays["titles"], arrays["title_counts"])
        live = iter(zip(header["documents"], header["metadata"], entities, titles, strict=True))
        for slot, chunk_id in enumerate(header["ids"]):
            if chunk_id is None:
                graph._slots.append(None)
                graph._free.append(slot)
                continue
            document_id, metadata, chunk_entities, chunk_titles = next(live)
            entry = _Slot(chunk_id, document_id, metadata, chunk_entities.tolist(), chunk_titles.tolist())
            graph._slots.append(entry)
            graph._slot_of[chunk_id] = slot
            graph._pending.append((slot, entry.entities))
        graph._vectors = arrays.get("vectors")
        graph._knn = arrays.get("knn")
        graph._knn_sim = arrays.get("knn_sim")
        return graph


__all__ = ["ChunkGraph", "ChunkInput", "GraphStateError", "Normalisation"]


def _rows(array: npt.NDArray[Any], rows: int, fill: float) -> npt.NDArray[Any]:
    """``array`` with ``rows`` rows, the new ones set to ``fill``: a view of a buffer that grows by
    half again when full, so a graph built batch by batch copies its vectors a few times, not
    once a batch (each copy of a growing matrix used to leave the old one to the allocator)."""
    present = array.shape[0]
    if rows <= present:
        return array
    buffer = array.base if isinstance(array.base, np.ndarray) else None
    if (
        buffer is None
        or buffer.shape[0] < rows
        or buffer.shape[1:] != array.shape[1:]
        or buffer.dtype != array.dtype
        or buffer.ctypes.data != array.ctypes.data
        or buffer.strides != array.strides
    ):
        buffer = np.empty((max(rows, present + present // 2), *array.shape[1:]), dtype=array.dtype)
        buffer[:present] = array
    grown = buffer[:rows]
    grown[present:] = fill
    return grown


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _split(flat: IntArray, counts: IntArray) -> list[IntArray]:
    """``flat`` cut into consecutive runs of ``counts`` elements."""
    if not len(counts):
        return []
    return np.split(flat, np.cumsum(counts)[:-1])
