"""The knowledge-base extension contract: plugins that keep their own index beside a knowledge base.

A knowledge base (``toolkernel-rag``) chunks, embeds and indexes documents and serves a
``search`` tool. An extension registered through ``register_kb_extensions`` follows the
same ingestion and adds to the same server:

* **ingestion** — after each batch of changed documents is stored, the extension receives
  every chunk of those documents (id, document id, text, metadata, vector) and the ids of
  deleted documents (:meth:`KBExtension.on_ingest`). Delivery is at least once: a run
  killed midway delivers the batch again, and a document's chunks always *replace* what
  the extension held for it. An extension that was disabled for a run (``toolkernel kb
  ingest --no-<name>``) is caught up on the next run it takes part in.
* **retrieval** — each name in :attr:`KBExtension.modes` becomes a value of ``search``'s
  ``mode`` argument; :meth:`KBExtension.retrieve` gets the query, ``top_k``, the effective
  filter (server-side mandatory filter, the model's filter and the tenant's, already
  merged) and a way to obtain hybrid seeds, and returns chunk ids with scores, which
  ``search`` hydrates, reranks if asked and returns.
* **tools** — :meth:`KBExtension.tools` adds tools to the knowledge base's server. It
  receives the knowledge base's search *as that server serves it* (:class:`ServedSearch`):
  the server's mandatory filter and the request's tenant are joined to whatever filter the
  tool passes, so an extension's tool narrows results the way ``search`` does, never wider.

State the extension persists goes through :meth:`KBContext.save_state` and comes back through
:meth:`KBContext.load_state`: named blobs the knowledge base keeps wherever it keeps itself (files
in its directory on the embedded backend, a table of its schema on PostgreSQL), so deleting the
knowledge base deletes them too, and a server on another host reads what a writer saved.
State that grows with the corpus goes in *segments* instead (:meth:`KBContext.append_segment`,
:meth:`KBContext.load_segments`, :meth:`KBContext.replace_segments`): each batch writes only what
it changed, so a writer never holds nor rewrites the whole index, and a server reads only the
segments it has not seen. :attr:`KBContext.directory` remains for extensions whose knowledge
bases are directories.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.context import ToolContext
    from toolkernel.tools import Tool
    from toolkernel.vectors import Metadata

__all__ = [
    "ChunkRecord",
    "DocumentChunks",
    "ExtensionState",
    "IngestBatch",
    "KBContext",
    "KBExtension",
    "KBExtensionFactory",
    "RetrievalRequest",
    "RetrievedChunk",
    "ScoredChunk",
    "SeedSource",
    "ServedSearch",
    "StateSegment",
]


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One stored chunk, as a knowledge base keeps it.

    ``metadata`` is the document's metadata (``path``, ``title``, ``mtime``, front matter…)
    merged with the chunk's own (``chunk_index``, ``headers``…), the same values the filter
    language tests. ``vector`` is ``None`` when a caller did not ask for vectors.
    """

    id: str
    document_id: str
    text: str
    metadata: Metadata
    vector: list[float] | None = None


@dataclass(frozen=True, slots=True)
class DocumentChunks:
    """Every chunk of one new or changed document, in document order."""

    document_id: str
    chunks: tuple[ChunkRecord, ...]


@dataclass(frozen=True, slots=True)
class IngestBatch:
    """What one step of ingestion changed: documents (re)written and documents deleted."""

    upserted: tuple[DocumentChunks, ...] = ()
    deleted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    """A chunk id and its score under some retrieval mode; higher is better."""

    id: str
    score: float


SeedSource = Callable[[int], Awaitable[list[ScoredChunk]]]
"""``await seeds(k)``: the ``k`` best chunks by the knowledge base's hybrid retrieval, same filter."""


@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """One ``search`` call routed to an extension's mode.

    :param query: the model's query text.
    :param top_k: how many chunks to return (already over-fetched when a reranker follows).
    :param filter: the effective Mongo-style filter (mandatory, model and tenant filters
        joined by ``$and``), or ``None``; every returned chunk must satisfy it.
    :param seeds: hybrid retrieval under the same filter, for seed-and-expand methods.
    :param query_vector: the query embedded by the knowledge base's embedder (computed once,
        on first await).
    """

    query: str
    top_k: int
    filter: Mapping[str, Any] | None
    seeds: SeedSource
    query_vector: Callable[[], Awaitable[list[float]]]
    options: Mapping[str, Any] = field(default_factory=dict)
    """Mode-specific options a caller passed (``KnowledgeBase.search(options=...)``); validate them."""


@dataclass(frozen=True, slots=True)
class RetrievedChunk:
    """A search result: the stored chunk (without its vector) and its score, best first."""

    chunk: ChunkRecord
    score: float


@runtime_checkable
class ServedSearch(Protocol):
    """The knowledge base's search as one server serves it, for an extension's tools.

    ``filter`` is joined by ``$and`` with the server's mandatory filter and the tenant the
    request resolves to (from ``ctx``), exactly as the ``search`` tool's filter is; ``mode``
    is any ``search`` mode; ``options`` reach an extension's mode as
    :attr:`RetrievalRequest.options`.
    """

    async def __call__(
        self,
        ctx: ToolContext,
        query: str,
        *,
        top_k: int,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        options: Mapping[str, Any] | None = None,
    ) -> list[RetrievedChunk]:
        """The ``top_k`` best chunks for ``query``; errors are the ``search`` tool's errors."""


@runtime_checkable
class KBContext(Protocol):
    """What a knowledge base tells an extension when it opens it."""

    @property
    def name(self) -> str:
        """The knowledge base's name."""

    @property
    def directory(self) -> Path:
        """A directory of this extension's own inside the knowledge base (created on first use).

        Only a knowledge base that is a directory has one; others raise an error saying to use
        :meth:`save_state` and :meth:`load_state`, which work everywhere. Only the knowledge
        base's writer may write there; servers (readers) only read.
        """

    async def load_state(self, key: str, *, unless: str | None = None) -> ExtensionState | None:
        """The blob saved under ``key``, or ``None`` if there is none; its ``data`` is ``None``
        when its version is still ``unless`` (a cheap check a server makes before reloading)."""

    async def save_state(self, key: str, data: bytes) -> str:
        """Replace the blob under ``key`` atomically (readers see the old or the new one, whole);
        returns its new version. Writers that catch this extension up hold a lock while they
        do, so two ingests never interleave their saves."""

    async def append_segment(self, key: str, data: bytes) -> int:
        """Add ``data`` as the newest segment of the segmented state ``key``, atomically (readers
        see it whole or not at all); returns its sequence number, greater than every earlier one.

        A segment holds what one batch changed; it should replace what it names (documents,
        chunks) rather than add to it, so that reading a segment twice does no harm
        (:meth:`replace_segments` relies on it). Only the writer that holds this extension's
        lock appends."""

    async def load_segments(self, key: str, *, after: int = 0) -> list[StateSegment]:
        """The segments of ``key`` numbered above ``after``, oldest first (``[]``: nothing new, or
        no such state): a server that read up to ``after`` reads only what came since."""

    async def replace_segments(self, key: str, first: int, last: int, data: bytes) -> None:
        """Replace the segments of ``key`` numbered ``first`` to ``last`` with one segment holding
        ``data`` (what they held, merged), numbered ``last``, atomically: compaction.

        A reader that had read some of them reads the merged segment again, which is why
        segments must be safe to replay. The writer holding this extension's lock calls it."""

    async def generation(self) -> int:
        """The knowledge base's generation: it moves on whenever documents are written or an
        extension's state is published, and stays put while a writer catches extensions up, so
        an extension can tell which of its records were computed against which documents."""

    async def nearest(
        self,
        vectors: Sequence[Sequence[float]],
        top_k: int,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> list[list[ScoredChunk]]:
        """For each of ``vectors``, the ``top_k`` stored chunks most similar to it (cosine, best
        first), found by the knowledge base itself — its store's search, or a writer's scan of
        its own vectors — so an extension needs no copy of the vectors to find a chunk's
        neighbours. Ask for a batch at once: a backend may share one scan among them."""

    @property
    def embedder(self) -> str:
        """The ``provider/model`` the knowledge base embeds with."""

    @property
    def dimension(self) -> int:
        """Length of every chunk vector."""

    @property
    def kernel(self) -> Kernel:
        """The kernel the knowledge base was opened with: its plugins' settings (the user's
        ``toolkernel.toml``, ``kernel.settings(name)``) and registries (entity extractors…)."""

    async def load_chunks(self, ids: Sequence[str], *, include_vectors: bool = False) -> list[ChunkRecord]:
        """The stored chunks with these ids, in the order given; unknown ids are left out."""

    def matches(self, filter: Mapping[str, Any] | None, metadata: Mapping[str, Any]) -> bool:
        """Whether a chunk with ``metadata`` satisfies ``filter`` (``None`` matches everything)."""


@dataclass(frozen=True, slots=True)
class ExtensionState:
    """A named blob an extension saved (:meth:`KBContext.load_state`)."""

    version: str
    """Changes whenever the blob is replaced: compare it to know whether to reload."""
    data: bytes | None
    """The blob; ``None`` when it is still the version the caller said it holds."""


@dataclass(frozen=True, slots=True)
class StateSegment:
    """One segment of an extension's segmented state (:meth:`KBContext.load_segments`)."""

    sequence: int
    """Its number: segments are applied in this order, and a reader remembers the last it read."""
    data: bytes


@runtime_checkable
class KBExtension(Protocol):
    """An index of its own, fed by ingestion, queried as extra ``search`` modes.

    A server (a reader) opens its extensions again whenever the knowledge base moves on, so
    they load their state afresh. An extension that follows its state by itself — it reads
    what writers appended since it last looked, e.g. :meth:`KBContext.load_segments` with
    ``after`` — sets the class attribute ``follows_state = True``: the server then keeps it
    open, and opens it again only when a writer reset its state (``toolkernel kb repair``).
    """

    @property
    def modes(self) -> Collection[str]:
        """``search`` modes this extension answers (e.g. ``{"graph"}``); may be empty."""

    async def on_ingest(self, batch: IngestBatch) -> None:
        """Take in a batch of changed and deleted documents (at least once; replace, never append)."""

    async def retrieve(self, mode: str, request: RetrievalRequest) -> list[ScoredChunk]:
        """The best chunks for ``request`` under ``mode``, best first, at most ``request.top_k``."""

    def tools(self, search: ServedSearch) -> Sequence[Tool]:
        """Tools to add to the knowledge base's MCP server (may be empty); ``search`` is how they
        query the knowledge base within the server's mandatory and tenant filters."""

    async def aclose(self) -> None:
        """Flush and release what the extension holds open."""


KBExtensionFactory = Callable[[KBContext], KBExtension]
"""``factory(context) -> KBExtension``: what ``register_kb_extensions`` registries hold."""
