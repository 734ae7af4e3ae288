"""The knowledge-base extension: keeps the chunk graph beside a knowledge base and answers
``search`` with ``mode="graph"`` (entity graph, personalized PageRank) and ``mode="mastra"``
(Mastra's similarity graph and random walks, for comparison), and adds Mastra's ``graph_rag``
tool to the knowledge base's server.

Ingestion hands over every chunk of each changed document and the ids of deleted ones; the
graph replaces what it held for those documents and is saved as the knowledge base's state of
this extension after every batch (:meth:`KBContext.save_state`: a file in the embedded
knowledge base, a row in PostgreSQL), so a killed run loses nothing the knowledge base will
not deliver again. A server checks the saved version at most every :data:`REFRESH_SECONDS`
and reloads the graph when a writer replaced it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import numpy as np
import numpy.typing as npt

from toolkernel.knowledge import IngestBatch, KBContext, RetrievalRequest, ScoredChunk
from toolkernel_graphrag.graph import ChunkGraph, ChunkInput, GraphStateError
from toolkernel_graphrag.mastra import mastra_query
from toolkernel_graphrag.settings import GraphSettings, MastraSettings, WalkSettings
from toolkernel_graphrag.walk import GraphWalker

if TYPE_CHECKING:
    from toolkernel.entities import EntityExtractor
    from toolkernel.knowledge import ServedSearch
    from toolkernel.tools import Tool

GRAPH_KEY = "graph.npz"
"""The state key the graph is saved under (the file name it always had in a KB directory)."""

REFRESH_SECONDS = 1.0
"""How often a server asks whether a writer saved a newer graph."""

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


class GraphExtension:
    """A :class:`~toolkernel.knowledge.KBExtension` holding one knowledge base's chunk graph."""

    modes: Collection[str] = ("graph", "mastra")

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
        self._version: str | None = None
        self._checked = -math.inf
        self._walker: GraphWalker | None = None
        self._masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._lock = anyio.Lock()

    @property
    def graph(self) -> ChunkGraph:
        """The graph as last loaded (:meth:`refresh` loads it)."""
        if self._graph is None:
            raise GraphStateError(f"the graph of knowledge base {self.context.name!r} is not loaded")
        return self._graph

    async def refresh(self, *, force: bool = False) -> ChunkGraph:
        """The saved graph, reloaded when a writer replaced it (checked every :data:`REFRESH_SECONDS`)."""
        now = time.monotonic()
        if self._graph is not None and not force and now - self._checked < REFRESH_SECONDS:
            return self._graph
        state = await self.context.load_state(GRAPH_KEY, unless=self._version)
        self._checked = now
        if state is None:
            if self._graph is None or self._version is not None:
                self._install(ChunkGraph(self.settings), None)
        elif state.data is not None:
            data, where = state.data, self._where()
            try:
                graph = await anyio.to_thread.run_sync(lambda: ChunkGraph.loads(data, self.settings, where))
            except GraphStateError as exc:
                # Rebuilt from the catalog by kb repair; re-ingesting does nothing (the catalog
                # says every document is already in the graph).
                raise GraphStateError(
                    f"{str(exc).split('; rebuild')[0]}: run 'toolkernel kb repair --kb {self._kb_argument()}'"
                ) from None
            self._install(graph, state.version)
        return self.graph

    def _where(self) -> str:
        """The saved graph, as an error names it: its file when the knowledge base is a directory."""
        try:
            return str(self.context.directory / GRAPH_KEY)
        except Exception:
            return f"the graph of knowledge base {self.context.name!r}"

    def _kb_argument(self) -> str:
        """What ``--kb`` takes to reach this knowledge base: its directory, else its name."""
        try:
            return str(self.context.directory.parent.parent)
        except Exception:
            return self.context.name

    def _install(self, graph: ChunkGraph, version: str | None) -> None:
        self._graph, self._version = graph, version
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
        """Replace the chunks of every upserted document, drop deleted documents, save."""
        records = [chunk for document in batch.upserted for chunk in document.chunks]
        surfaces = await self.extractor.extract([r.text for r in records]) if records else []
        chunks = [
            ChunkInput(
                id=r.id,
                document_id=r.document_id,
                text=r.text,
                title=_title(r.metadata),
                source=_source(r.metadata),
                metadata=dict(r.metadata),
                vector=r.vector,
            )
            for r in records
        ]
        replaced = set(batch.deleted) | {d.document_id for d in batch.upserted}
        async with self._lock:
            # Start from what the last writer saved: the caller holds this extension's write lock.
            graph = await self.refresh(force=True)

            def apply() -> bytes:
                # The matrix is assembled when a query first needs it, not after every batch.
                graph.apply(chunks, surfaces, delete_documents=replaced)
                return graph.dumps()

            data = await anyio.to_thread.run_sync(apply)
            self._version = await self.context.save_state(GRAPH_KEY, data)
            self.walker.invalidate()
            self._masks.clear()

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
        query = np.asarray(await request.query_vector(), dtype=np.float32)
        graph = await self.refresh()
        slots, vectors = graph.nearest(query, request.top_k, self._allowed(request.filter))
        if not len(slots):
            if not len(graph) and await request.seeds(1):
                raise self._empty_graph()
            return []
        hits = mastra_query(
            vectors,
            query.tolist(),
            top_k=request.top_k,
            random_walk_steps=options.random_walk_steps,
            restart_prob=options.restart_prob,
            threshold=options.threshold,
        )
        return [ScoredChunk(graph.chunk_at(int(slots[h.index])) or "", h.score) for h in hits]

    def tools(self, search: ServedSearch) -> Sequence[Tool]:
        """``graph_rag``, Mastra's GraphRAG tool, over the server's search in ``mastra`` mode."""
        from toolkernel_graphrag.tool import graph_rag_tool

        return [graph_rag_tool(search, self.mastra)]

    async def aclose(self) -> None:
        """Nothing stays open: the graph is saved after every batch."""
        self._graph = None
        self._version = None
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
