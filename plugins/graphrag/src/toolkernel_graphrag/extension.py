"""The knowledge-base extension: keeps the chunk graph beside a knowledge base and answers
``search`` with ``mode="graph"`` (entity graph, personalized PageRank) and ``mode="mastra"``
(Mastra's similarity graph and random walks, for comparison), and adds Mastra's ``graph_rag``
tool to the knowledge base's server.

Ingestion hands over every chunk of each changed document and the ids of deleted ones. The
writer does not hold the graph: for each batch it finds every chunk's entity keys and its
nearest neighbours (a search of the knowledge base's own dense index, :meth:`KBContext.nearest`)
and appends what the batch changed as one segment of the extension's segmented state
(:meth:`KBContext.append_segment`: a file in the embedded knowledge base, a row in
PostgreSQL), so a killed run loses nothing the knowledge base will not deliver again, and its
memory does not grow with the corpus. Every :data:`MERGE_WINDOW` segments it merges the ones it
wrote into one. A server assembles the graph from the segments and, at most every
:data:`REFRESH_SECONDS`, reads the segments written since.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Never

import anyio.to_thread
import numpy as np
import numpy.typing as npt

from toolkernel.knowledge import ChunkRecord, IngestBatch, KBContext, RetrievalRequest, ScoredChunk
from toolkernel_graphrag import segments
from toolkernel_graphrag.graph import ChunkGraph, ChunkInput, entry
from toolkernel_graphrag.keys import EntityKeys
from toolkernel_graphrag.mastra import mastra_query
from toolkernel_graphrag.segments import DocumentLine, GraphStateError, Segment
from toolkernel_graphrag.settings import GraphSettings, MastraSettings, WalkSettings
from toolkernel_graphrag.walk import GraphWalker

if TYPE_CHECKING:
    from toolkernel.entities import EntityExtractor
    from toolkernel.knowledge import ServedSearch
    from toolkernel.tools import Tool

GRAPH_KEY = "graph"
"""The segmented state the graph is kept in (``extensions/graph/graph.segments/`` in a KB directory)."""

LEGACY_KEY = "graph.npz"
"""Where the graph was one blob before segments: read when there are no segments, migrated by a writer."""

REFRESH_SECONDS = 1.0
"""How often a server asks whether a writer appended segments."""

MERGE_WINDOW = 32
"""Segments a writer merges into one once it has written that many (a merge holds their text)."""

CANDIDATES = 2
"""Neighbours kept per chunk, in multiples of ``knn``: the extra ones complete other chunks' lists
(a chunk written later that is closer to one of them than its own list's last)."""

FILTER_CACHE = 32
"""Filters whose allowed-chunk masks are kept between queries (a server's mandatory filter repeats)."""


def _title(metadata: Mapping[str, Any]) -> str | None:
    title = metadata.get("title")
    return str(title) if title else None


def _source(metadata: Mapping[str, Any]) -> str | None:
    for key in ("path", "source", "url"):
        value = metadata.get(key)
        if value:
            return str(value)
    return None


def chunk_input(record: ChunkRecord) -> ChunkInput:
    """A stored chunk as the graph reads it."""
    return ChunkInput(
        id=record.id,
        document_id=record.document_id,
        text=record.text,
        title=_title(record.metadata),
        source=_source(record.metadata),
        metadata=dict(record.metadata),
        vector=record.vector,
    )


class GraphExtension:
    """A :class:`~toolkernel.knowledge.KBExtension` holding one knowledge base's chunk graph."""

    modes: Collection[str] = ("graph", "mastra")
    follows_state = True
    """A server keeps this extension open as the knowledge base moves on: :meth:`refresh` reads
    only the segments appended since it last looked (reopening would read every segment again)."""

    def __init__(
        self,
        context: KBContext,
        extractor: EntityExtractor,
        settings: GraphSettings | None = None,
        walk: WalkSettings | None = None,
        mastra: MastraSettings | None = None,
    ) -> None:
        self.context = context
        self.extractor = extractor
        self.settings = settings or GraphSettings()
        self.walk = walk or WalkSettings()
        self.mastra = mastra or MastraSettings()
        self._graph: ChunkGraph | None = None
        self._sequence = 0
        """The last segment the loaded graph holds."""
        self._checked = -math.inf
        self._keys = EntityKeys(self.settings)
        self._written: list[tuple[int, bytes]] = []
        """Segments this writer appended since its last merge (at most :data:`MERGE_WINDOW`)."""
        self._migrated = False
        self._walker: GraphWalker | None = None
        self._masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._lock = anyio.Lock()

    @property
    def graph(self) -> ChunkGraph:
        """The graph as last loaded (:meth:`refresh` loads it)."""
        if self._graph is None:
            raise GraphStateError(f"the graph of knowledge base {self.context.name!r} is not loaded")
        return self._graph

    async def refresh(self) -> ChunkGraph:
        """The graph with every segment a writer appended (checked every :data:`REFRESH_SECONDS`).

        Only segments not yet read are read; they are decoded in a worker thread and applied
        here, between two awaits, so a query never sees a graph half updated.
        """
        now = time.monotonic()
        if self._graph is not None and now - self._checked < REFRESH_SECONDS:
            return self._graph
        self._checked = now
        found = await self.context.load_segments(GRAPH_KEY, after=self._sequence)
        if self._graph is None and not found and self._sequence == 0:
            legacy = await self._legacy()
            if legacy is not None:
                graph = ChunkGraph(self.settings)
                graph.apply([c for line in legacy for c in line.chunks or ()])
                self._install(graph)
                return graph
        decoded = await anyio.to_thread.run_sync(self._decode, [(s.sequence, s.data) for s in found])
        graph = self._graph if self._graph is not None else ChunkGraph(self.settings)
        for sequence, segment in decoded:
            covers = segment.first if segment.first is not None else sequence
            if covers > self._sequence + 1:
                self._refuse(
                    GraphStateError(
                        f"{self._where()}: segments {self._sequence + 1} to {covers - 1} are missing"
                    )
                )
            for line in segment.lines:
                graph.apply(line.chunks or (), delete_documents=(line.document_id,))
            self._sequence = sequence
        if graph is not self._graph:
            self._install(graph)
        elif decoded:
            self.walker.invalidate()
            self._masks.clear()
        return graph

    def _decode(self, found: list[tuple[int, bytes]]) -> list[tuple[int, Segment]]:
        out = []
        for sequence, data in found:
            try:
                out.append((sequence, segments.decode(data, self.settings, self._where(sequence))))
            except GraphStateError as exc:
                self._refuse(exc)
        return out

    async def _legacy(self) -> list[DocumentLine] | None:
        """The lines of a graph saved whole before segments (``graph.npz``), ``None`` if there is none."""
        state = await self.context.load_state(LEGACY_KEY)
        if state is None or not state.data:
            return None
        data = state.data
        try:
            return await anyio.to_thread.run_sync(
                lambda: segments.legacy_lines(data, self.settings, self._where(legacy=True))
            )
        except GraphStateError as exc:
            self._refuse(exc)

    def _refuse(self, exc: GraphStateError) -> Never:
        """Raise ``exc`` as one line naming the command that rebuilds the graph from the catalog
        (re-ingesting does nothing: the catalog says every document is already in the graph)."""
        raise GraphStateError(f"{exc}: run 'toolkernel kb repair --kb {self._kb_argument()}'") from None

    def _where(self, sequence: int | None = None, *, legacy: bool = False) -> str:
        """The saved graph (or one segment of it) as an error names it: a path when the knowledge
        base is a directory."""
        try:
            directory = self.context.directory
        except Exception:
            what = "the graph" if sequence is None else f"segment {sequence} of the graph"
            return f"{what} of knowledge base {self.context.name!r}"
        if legacy:
            return str(directory / LEGACY_KEY)
        folder = directory / f"{GRAPH_KEY}.segments"
        return str(folder if sequence is None else folder / f"{sequence:016d}")

    def _kb_argument(self) -> str:
        """What ``--kb`` takes to reach this knowledge base: its directory, else its name."""
        try:
            return str(self.context.directory.parent.parent)
        except Exception:
            return self.context.name

    def _install(self, graph: ChunkGraph) -> None:
        self._graph = graph
        self._walker = GraphWalker(graph, self.walk)
        self._masks.clear()

    @property
    def walker(self) -> GraphWalker:
        """The walker over :attr:`graph`."""
        graph = self.graph
        assert self._walker is not None
        assert self._walker.graph is graph
        return self._walker

    async def on_ingest(self, batch: IngestBatch) -> None:
        """Append one segment: the keys and neighbours of every chunk of the upserted documents,
        and the deleted documents; merge this writer's segments every :data:`MERGE_WINDOW`."""
        records = [chunk for document in batch.upserted for chunk in document.chunks]
        surfaces = await self.extractor.extract([r.text for r in records]) if records else []
        async with self._lock:
            # The caller holds this extension's write lock: segments are appended one writer at a time.
            await self._migrate()
            generation = await self.context.generation()
            entries: dict[str, list[Any]] = {d.document_id: [] for d in batch.upserted}
            chunks = [chunk_input(r) for r in records]
            neighbours = await self._neighbours(chunks)
            for chunk, found, near in zip(chunks, surfaces, neighbours, strict=True):
                entries[chunk.document_id].append(entry(chunk, found, self._keys, near, generation))
            lines = [DocumentLine(d, None) for d in batch.deleted if d not in entries]
            lines += [DocumentLine(d, tuple(chunks)) for d, chunks in entries.items()]
            data = segments.encode(self.settings, lines)
            sequence = await self.context.append_segment(GRAPH_KEY, data)
            self._written.append((sequence, data))
            self._checked = -math.inf  # a search in this process reads the new segment at once
            if len(self._written) >= MERGE_WINDOW:
                await self._merge_written()

    async def _neighbours(self, chunks: list[ChunkInput]) -> list[list[tuple[str, float]]]:
        """Each chunk's nearest chunks, found by the knowledge base itself (one request for the
        batch), ``CANDIDATES * knn`` of them, by similarity (rounded) then chunk id."""
        k = self.settings.knn
        if k == 0 or not chunks:
            return [[] for _ in chunks]
        missing = [c.id for c in chunks if c.vector is None]
        if missing:
            raise ValueError(
                f"every chunk needs a vector (similarity edges, knn={k}); none for {missing[:3]}"
            )
        hits = await self.context.nearest([c.vector or () for c in chunks], CANDIDATES * k + 1)
        out = []
        for chunk, found in zip(chunks, hits, strict=True):
            near = [(h.id, round(h.score, segments.SIMILARITY_DECIMALS)) for h in found if h.id != chunk.id]
            near.sort(key=lambda n: (-n[1], n[0]))
            out.append(near[: CANDIDATES * k])
        return out

    async def _merge_written(self) -> None:
        """Merge the segments this writer appended into one, if no other writer appended between them."""
        written, self._written = self._written, []
        sequences = [sequence for sequence, _ in written]
        if len(written) < 2 or sequences != list(range(sequences[0], sequences[-1] + 1)):
            return
        where = self._where(sequences[0])
        merged = segments.merge(self.settings, [data for _, data in written], sequences[0], where)
        await self.context.replace_segments(GRAPH_KEY, sequences[0], sequences[-1], merged)

    async def _migrate(self) -> None:
        """A writer's first batch: a graph saved whole before segments becomes the first segment."""
        if self._migrated:
            return
        self._migrated = True
        legacy = await self._legacy()
        if legacy is None:
            return
        if not await self.context.load_segments(GRAPH_KEY, after=0):  # not migrated by a killed run
            await self.context.append_segment(GRAPH_KEY, segments.encode(self.settings, legacy))
        await self.context.save_state(LEGACY_KEY, b"")

    def _allowed(self, filter: Mapping[str, Any] | None) -> npt.NDArray[np.bool_] | None:
        """Which chunk rows satisfy the effective filter (``None``: all of them)."""
        if not filter:
            return None
        key = json.dumps(filter, sort_keys=True, default=str)
        mask = self._masks.get(key)
        if mask is None:
            graph = self.graph
            mask = np.array(
                [
                    graph.chunk_at(slot) is not None and self.context.matches(filter, graph.metadata(slot))
                    for slot in range(graph.slot_count)
                ],
                dtype=bool,
            )
            if len(self._masks) >= FILTER_CACHE:
                self._masks.pop(next(iter(self._masks)))
            self._masks[key] = mask
        return mask

    async def retrieve(self, mode: str, request: RetrievalRequest) -> list[ScoredChunk]:
        """``graph``: seeds and query entities walked by personalized PageRank; ``mastra``: Mastra's walk."""
        if mode == "mastra":
            return await self._mastra(request)
        if mode != "graph":
            raise ValueError(f"toolkernel-graphrag answers modes graph and mastra, not {mode!r}")
        graph = await self.refresh()
        seeds = await request.seeds(self.walk.seeds)
        if seeds and not len(graph):
            raise self._empty_graph()
        [surfaces] = await self.extractor.extract([request.query])
        entities = [graph.key(s) for s in surfaces]
        allowed = self._allowed(request.filter)
        ranked = self.walker.rank([s.id for s in seeds], entities, allowed, request.top_k)
        return [ScoredChunk(r.chunk_id, r.score) for r in ranked]

    def _empty_graph(self) -> GraphStateError:
        return GraphStateError(
            f"the graph of knowledge base {self.context.name!r} is empty while it holds documents: "
            "re-ingest them with toolkernel-graphrag installed (toolkernel kb ingest without --no-graph)"
        )

    async def _mastra(self, request: RetrievalRequest) -> list[ScoredChunk]:
        """Mastra's GraphRAG tool: dense top ``top_k`` under the filter, a similarity graph over them,
        random walks with restart from each (seeded by the query, so repeatable)."""
        defaults = self.mastra.model_dump(by_alias=True)
        options = MastraSettings.model_validate({**defaults, **dict(request.options)})
        query = await request.query_vector()
        graph = await self.refresh()
        [hits] = await self.context.nearest([query], request.top_k, filter=request.filter)
        ids = [h.id for h in hits if graph.slot(h.id) is not None]
        if not ids:
            if not len(graph) and await request.seeds(1):
                raise self._empty_graph()
            return []
        stored = {c.id: c.vector for c in await self.context.load_chunks(ids, include_vectors=True)}
        ids = [i for i in ids if stored.get(i) is not None]
        vectors = np.asarray([stored[i] for i in ids], dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        hits_walked = mastra_query(
            vectors,
            query,
            top_k=request.top_k,
            random_walk_steps=options.random_walk_steps,
            restart_prob=options.restart_prob,
            threshold=options.threshold,
        )
        return [ScoredChunk(ids[h.index], h.score) for h in hits_walked]

    def tools(self, search: ServedSearch) -> Sequence[Tool]:
        """``graph_rag``, Mastra's GraphRAG tool, over the server's search in ``mastra`` mode."""
        from toolkernel_graphrag.tool import graph_rag_tool

        return [graph_rag_tool(search, self.mastra)]

    async def aclose(self) -> None:
        """Merge what this writer appended since its last merge; drop the graph."""
        if self._written:
            await self._merge_written()
        self._graph = None
        self._sequence = 0
        self._walker = None


def open_graph_extension(context: KBContext) -> GraphExtension:
    """The ``graph`` extension of a knowledge base, with ``[plugins.graphrag]`` settings and the
    entity extractor they name.

    Settings and extractors come from the kernel the knowledge base was opened with, so the
    user's ``toolkernel.toml`` reaches the graph; a kernel without this plugin's settings
    declared gets the defaults.
    """
    from toolkernel_graphrag.phrases import PhraseExtractor
    from toolkernel_graphrag.settings import GraphRAGSettings

    kernel = context.kernel
    settings = kernel.settings("graphrag") if "graphrag" in kernel.settings_models else GraphRAGSettings()
    if not isinstance(settings, GraphRAGSettings):
        settings = GraphRAGSettings()
    name = settings.build.extractor
    extractor: EntityExtractor = PhraseExtractor() if name == "phrases" else kernel.entity_extractor(name)
    return GraphExtension(context, extractor, settings.build, settings.walk, settings.mastra)
