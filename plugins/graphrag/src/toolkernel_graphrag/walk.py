"""A query's walk: restart at the hybrid search's seeds and the query's entities, rank by
personalized PageRank, fuse with the seed ranking.

The seeds carry what retrieval already knows; the walk adds chunks one entity away from them
(the second passage of a multi-hop question, which shares little vocabulary with the question).
Fusing the two rankings by reciprocal rank keeps the seeds' order where the graph has nothing
to say, which is what keeps single-hop collections such as SciFact at the seeds' quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from toolkernel_graphrag.graph import ChunkGraph
from toolkernel_graphrag.pagerank import personalized_pagerank, transition_matrix
from toolkernel_graphrag.settings import WalkSettings

SCORE_DIGITS = 12
"""Scores are compared at this many significant digits, then by chunk id: rankings do not depend
on the order in which chunks entered the graph (floating-point sums differ in the last bits)."""


@dataclass(frozen=True)
class Ranked:
    """A chunk and its fused score, best first."""

    chunk_id: str
    score: float


def _rounded(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    if scale == 0.0:
        return values
    return np.round(values / scale, SCORE_DIGITS)


FILTERED_TRANSITIONS = 8
"""Transition matrices restricted by a filter that are kept between queries (a server's mandatory
filter, a tenant's, repeat on every call; restricting the matrix costs more than the walk)."""


class GraphWalker:
    """Ranks chunks for a query over one :class:`ChunkGraph`; keeps the transitions between queries."""

    def __init__(self, graph: ChunkGraph, settings: WalkSettings | None = None) -> None:
        self.graph = graph
        self.settings = settings or WalkSettings()
        self._transitions: sp.csr_array | None = None
        self._filtered: dict[bytes, sp.csr_array] = {}

    def _transitions_for(self, allowed: npt.NDArray[np.bool_] | None) -> sp.csr_array:
        adjacency = self.graph.adjacency()
        if allowed is None:
            if self._transitions is None or self._transitions.shape != adjacency.shape:
                self._transitions = transition_matrix(adjacency)
            return self._transitions
        key = np.packbits(allowed).tobytes()
        found = self._filtered.get(key)
        if found is None or found.shape != adjacency.shape:
            nodes = np.ones(adjacency.shape[0], dtype=bool)
            nodes[: len(allowed)] = allowed
            found = transition_matrix(adjacency, nodes)
            if len(self._filtered) >= FILTERED_TRANSITIONS:
                self._filtered.pop(next(iter(self._filtered)))
            self._filtered[key] = found
        return found

    def invalidate(self) -> None:
        """Forget cached transitions after the graph changed."""
        self._transitions = None
        self._filtered.clear()

    def pagerank(
        self,
        seeds: Sequence[str],
        query_entities: Sequence[str] = (),
        allowed: npt.NDArray[np.bool_] | None = None,
    ) -> npt.NDArray[np.float64]:
        """Personalized PageRank over the chunk slots, restarting at ``seeds`` (best first) and at the
        entity keys the query names; chunks outside ``allowed`` (a mask over slots) score zero."""
        graph, walk = self.graph, self.settings
        adjacency = graph.adjacency()
        restart_chunks = np.zeros(adjacency.shape[0])
        for rank, chunk_id in enumerate(seeds[: walk.seeds]):
            slot = graph.slot(chunk_id)
            if slot is not None and (allowed is None or allowed[slot]):
                restart_chunks[slot] += 1.0 / (rank + 1)
        restart_entities = np.zeros(adjacency.shape[0])
        for key in dict.fromkeys(query_entities):
            node = graph.entity_node(key)
            if node is not None:
                # HippoRAG 2's node specificity: an entity many chunks name says little about the query.
                restart_entities[node] = 1.0 / graph.document_frequency(key)
                continue
            # An entity only one chunk names links nothing, but the query still points at that chunk.
            for slot in graph.entity_slots(key):
                if allowed is None or allowed[slot]:
                    restart_entities[slot] = 1.0
        restart = np.zeros(adjacency.shape[0])
        if restart_chunks.sum() > 0:
            restart += (1 - walk.entity_seed_share) * restart_chunks / restart_chunks.sum()
        if restart_entities.sum() > 0:
            # Normalised only when above 1: generic entities (1/df each) keep little of the share.
            restart += walk.entity_seed_share * restart_entities / max(1.0, restart_entities.sum())
        scores = personalized_pagerank(self._transitions_for(allowed), restart, walk.damping)
        chunk_scores = scores[: graph.slot_count].copy()
        if allowed is not None:
            chunk_scores[~allowed] = 0.0
        return chunk_scores

    def rank(
        self,
        seeds: Sequence[str],
        query_entities: Sequence[str] = (),
        allowed: npt.NDArray[np.bool_] | None = None,
        top_k: int = 10,
    ) -> list[Ranked]:
        """The ``top_k`` best documents, each as one chunk: by PageRank score, or (``fusion="rrf"``)
        the walk's order of documents fused with the seeds' by reciprocal rank.

        A document ranks where its best chunk does, in the walk as in the seeds (which are the
        hybrid search's documents), and is shown by the chunk of the ranking that placed it
        highest: fusing chunks would split a document's votes between its chunks.
        """
        graph, k = self.graph, self.settings.fusion_k
        scores = _rounded(self.pagerank(seeds, query_entities, allowed))
        by_walk: dict[str, tuple[int, str]] = {}
        walk_scores: dict[str, float] = {}
        for slot, name in self._top(scores, max(top_k, len(seeds)) * 2):
            document = graph.document_at(slot)
            if document not in by_walk:
                by_walk[document] = (len(by_walk), name)
                walk_scores[document] = float(scores[slot])
        if self.settings.fusion == "pagerank":
            best = list(by_walk.items())[:top_k]
            return [Ranked(name, walk_scores[document]) for document, (_, name) in best]
        fused: dict[str, float] = {}
        shown: dict[str, tuple[int, str]] = {}
        for document, (rank, name) in by_walk.items():
            fused[document] = 1.0 / (k + rank + 1)
            shown[document] = (rank, name)
        for rank, chunk_id in enumerate(seeds):
            seed = graph.slot(chunk_id)
            if seed is None or (allowed is not None and not allowed[seed]):
                continue
            document = graph.document_at(seed)
            fused[document] = fused.get(document, 0.0) + 1.0 / (k + rank + 1)
            if document not in shown or rank < shown[document][0]:
                shown[document] = (rank, chunk_id)
        ordered = sorted(fused.items(), key=lambda item: (-round(item[1], SCORE_DIGITS), item[0]))
        return [Ranked(shown[document][1], score) for document, score in ordered[:top_k]]

    def _top(self, scores: npt.NDArray[np.float64], depth: int) -> list[tuple[int, str]]:
        """The ``depth`` best-scoring live chunks as ``(slot, chunk id)``: score, then chunk id."""
        positive = np.flatnonzero(scores > 0)
        if len(positive) > depth:
            # Everything scoring at least the depth-th best score, so ties at the cut are all kept.
            cut = np.partition(scores[positive], len(positive) - depth)[len(positive) - depth]
            positive = positive[scores[positive] >= cut]
        named = [(int(s), name) for s in positive if (name := self.graph.chunk_at(int(s))) is not None]
        named.sort(key=lambda item: (-scores[item[0]], item[1]))
        return named[:depth]
