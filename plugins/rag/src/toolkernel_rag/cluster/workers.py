"""What runs on the Ray workers: reading and chunking tasks, the embedding actor, the PostgreSQL writer.

Every stage calls the local pipeline's own code. A worker builds a kernel like the driver's
(:class:`KernelRecipe`: the same plugin modules and settings), so the same readers, chunkers
and embedder are found by the same names. Rows between stages are a ``status`` and a pickled
``payload``:

* ``unchanged``: ``(source, document id)``, the catalog holds it done at this hash;
* ``problem``: ``(source, SourceProblem)``, a file or record that was skipped;
* ``changed``: a :class:`Piece`, a document to write with its chunks (and, after the
  embedding stage, their vectors);
* ``written``: ``(source, document id, was it known, chunks, chunk seconds, embed seconds)``,
  committed by a PostgreSQL writer.
"""

from __future__ import annotations

import asyncio
import importlib
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from opentelemetry import propagate, trace

from toolkernel.embedders import progress_shown_by_caller
from toolkernel_rag.catalog import StoredChunk
from toolkernel_rag.sources import Document, SourceProblem, SourceReader, qualified_id

if TYPE_CHECKING:
    from toolkernel._kernel import Kernel
    from toolkernel.chunkers import Chunker

_tracer = trace.get_tracer("toolkernel_rag")

ROWS_PER_BATCH = 64
"""Documents a reading task hands on at a time."""

Batch = dict[str, Any]
"""A Ray Data batch in the ``numpy`` format: column name to array."""


@dataclass(frozen=True)
class KernelRecipe:
    """How to build a kernel equal to the driver's in another process: its plugin modules and settings."""

    modules: tuple[str, ...]
    settings: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, kernel: Kernel) -> KernelRecipe:
        """The recipe of ``kernel``'s loaded plugins (built-ins come by themselves).

        :raises KBError: a plugin registered as an object, which another process cannot import.
        """
        from toolkernel_rag.layout import KBError

        modules: list[str] = []
        for info in kernel.plugins():
            if info.status != "loaded" or info.origin == "built-in":
                continue
            if info.module is None or (info.name != info.module and info.origin == "registered"):
                raise KBError(
                    f"--engine ray: plugin {info.name!r} was registered as an object, not a module: "
                    "Ray workers cannot build it; register its module instead"
                )
            modules.append(info.module)
        return cls(tuple(modules), kernel.settings_tables)

    def build(self) -> Kernel:
        """A kernel with exactly these plugin modules (no entry-point discovery) and settings."""
        from toolkernel._kernel import Kernel

        return Kernel(
            load_entry_points=False,
            plugins=[importlib.import_module(m) for m in self.modules],
            settings=self.settings,
        )


@dataclass(frozen=True)
class SourcePlan:
    """One ``SOURCE`` as the workers need it: its location, its key in the catalog, whether it is a file."""

    source: str
    """As given on the command line (problems name it so)."""
    location: str
    key: str
    is_file: bool


@dataclass(frozen=True)
class JobSpec:
    """Everything a worker needs, sent once to every task and actor."""

    recipe: KernelRecipe
    chunker: dict[str, Any]
    sparse_language: str
    embedder: str
    embedder_options: dict[str, Any]
    dimension: int
    sources: tuple[SourcePlan, ...]
    known: Any
    """An object reference to ``{document id: (hash, state)}`` of every source (``ray.put`` once)."""
    trace_carrier: dict[str, str] = field(default_factory=dict)
    """The job span's context, so the workers' spans are its children."""
    kb: str = ""
    home: str = ""
    """The knowledge base and its ``postgresql://`` home, for writers on the workers."""


@dataclass(slots=True)
class Piece:
    """A changed document on its way through the stages."""

    source: int
    document: Document
    terms: str
    chunks: list[StoredChunk]
    vectors: list[list[float]] | None = None
    chunk_seconds: float = 0.0
    embed_seconds: float = 0.0
    """This document's share of its batch's embedding time (CPU-seconds of one actor)."""


class _Worker:
    """What one worker process keeps between tasks: the kernel, chunkers, the BM25 analyzer, known hashes."""

    current: _Worker | None = None

    def __init__(self, spec: JobSpec) -> None:
        from toolkernel._telemetry import configure_from_env
        from toolkernel_rag.sparse import Analyzer

        configure_from_env()
        self.spec = spec
        self.kernel = spec.recipe.build()
        self.analyzer = Analyzer(spec.sparse_language)
        self.chunkers: dict[str, Chunker] = {}
        self._known: dict[str, tuple[str, str]] | None = None

    @classmethod
    def of(cls, spec: JobSpec) -> _Worker:
        if cls.current is None or cls.current.spec != spec:
            cls.current = cls(spec)
        return cls.current

    @property
    def known(self) -> dict[str, tuple[str, str]]:
        if self._known is None:
            import ray

            self._known = ray.get(self.spec.known, timeout=300)
        return self._known

    def terms(self, text: str) -> str:
        return " ".join(self.analyzer.terms(text))

    def chunker(self, kind: str, language: str | None) -> Chunker:
        from toolkernel_rag.kb import manifest_chunker

        return manifest_chunker(self.kernel, self.spec.chunker, kind, language, self.chunkers)


def _context(spec: JobSpec) -> Any:
    return propagate.extract(spec.trace_carrier)


def _batch(statuses: list[str], payloads: list[bytes]) -> Batch:
    out = np.empty(len(payloads), dtype=object)
    out[:] = payloads
    return {"status": np.array(statuses, dtype=object), "payload": out}


def read_and_chunk(files: Batch, spec: JobSpec) -> Iterator[Batch]:
    """A Ray Data task: read files with the registered readers, skip the unchanged, chunk the rest.

    Yields every :data:`ROWS_PER_BATCH` documents, so a large file of records streams into
    the embedding actors while it is still being read.
    """
    from toolkernel_rag.ingestion import chunk_documents

    worker = _Worker.of(spec)
    statuses: list[str] = []
    payloads: list[bytes] = []
    with _tracer.start_as_current_span("kb.read", context=_context(spec)) as span:
        documents = chunks = 0
        chunk_seconds = 0.0
        for index, path, relative in zip(files["source"], files["path"], files["relative"], strict=True):
            plan = spec.sources[int(index)]
            reader = SourceReader(plan.location, worker.kernel.readers)
            seen: set[str] = set()
            for document in reader.read(Path(str(path)), str(relative)):
                document.id = qualified_id(plan.key, document.id, not document.record and plan.is_file)
                documents += 1
                if document.id in seen:  # within one file; across files the driver keeps the first
                    where = f"{plan.source}: {document.id}"
                    problem = SourceProblem(where, "repeats a document id; the first was kept")
                    statuses.append("problem")
                    payloads.append(pickle.dumps((int(index), problem)))
                elif worker.known.get(document.id) == (document.hash, "done"):
                    statuses.append("unchanged")
                    payloads.append(pickle.dumps((int(index), document.id)))
                else:
                    started = time.perf_counter()
                    pieces = chunk_documents([document], worker.chunker, worker.terms)
                    piece = Piece(int(index), document, worker.terms(document.text), pieces)
                    piece.chunk_seconds = time.perf_counter() - started
                    chunk_seconds += piece.chunk_seconds
                    chunks += len(pieces)
                    statuses.append("changed")
                    payloads.append(pickle.dumps(piece))
                seen.add(document.id)
                if len(payloads) >= ROWS_PER_BATCH:
                    yield _batch(statuses, payloads)
                    statuses, payloads = [], []
            for problem in reader.problems:
                statuses.append("problem")
                payloads.append(pickle.dumps((int(index), problem)))
        span.set_attribute("kb.files", len(files["path"]))
        span.set_attribute("kb.documents", documents)
        span.set_attribute("kb.chunks", chunks)
        span.set_attribute("kb.chunk_seconds", round(chunk_seconds, 3))
    if payloads:
        yield _batch(statuses, payloads)


def embedder_options(spec: JobSpec, cpus: float) -> dict[str, Any]:
    """The embedder's options in an actor: a ``local/`` model runs as many threads as the actor has CPUs.

    Threads change no vector, only how many cores one actor keeps busy (by default all of them,
    which on a shared node means actors fighting over the same cores).
    """
    options = dict(spec.embedder_options)
    if spec.embedder.startswith("local/") and "threads" not in options:
        options["threads"] = max(1, int(cpus))
    return options


class EmbedActor:
    """An actor of the embedding pool: loads the model once, then embeds the chunks of batch after batch."""

    def __init__(self, spec: JobSpec, cpus: float) -> None:
        from toolkernel_rag.kb import shared_embedder
        from toolkernel_rag.layout import KBError

        self.spec = spec
        worker = _Worker.of(spec)
        self.embedder = shared_embedder(worker.kernel, spec.embedder, embedder_options(spec, cpus))
        if self.embedder.dimension != spec.dimension:
            raise KBError(
                f"embedder {spec.embedder!r} makes vectors of dimension {self.embedder.dimension} on this "
                f"worker; the knowledge base holds {spec.dimension}"
            )
        self.loop = asyncio.new_event_loop()

    def __call__(self, batch: Batch) -> Batch:
        pieces: list[tuple[int, Piece]] = []
        for i, (status, payload) in enumerate(zip(batch["status"], batch["payload"], strict=True)):
            if status == "changed":
                pieces.append((i, pickle.loads(payload)))
        texts = [c.text for _, piece in pieces for c in piece.chunks]
        with _tracer.start_as_current_span("kb.embed", context=_context(self.spec)) as span:
            started = time.perf_counter()
            with progress_shown_by_caller():  # the driver shows the job's progress
                vectors = self.loop.run_until_complete(self.embedder.embed(texts)) if texts else []
            seconds = time.perf_counter() - started
            span.set_attribute("kb.texts", len(texts))
        payloads = list(batch["payload"])
        at = 0
        for i, piece in pieces:
            piece.vectors = [list(v) for v in vectors[at : at + len(piece.chunks)]]
            piece.embed_seconds = seconds * len(piece.chunks) / max(1, len(texts))
            at += len(piece.chunks)
            payloads[i] = pickle.dumps(piece)
        return _batch(list(batch["status"]), payloads)


class PgWriteActor:
    """Writes embedded documents into a knowledge base in PostgreSQL, from the worker.

    The same :func:`~toolkernel_rag.ingestion.begin_write` / ``finish_write`` as the local
    pipeline: pending first, then chunks and vectors committed with the documents in one
    transaction (documents are locked row by row, so writers run side by side). Its
    connections close with the actor's process when the pool is shut down.
    """

    def __init__(self, spec: JobSpec) -> None:
        from toolkernel_rag.kb import KnowledgeBase

        self.spec = spec
        worker = _Worker.of(spec)
        self.worker = worker
        self.loop = asyncio.new_event_loop()
        self.kb = self.loop.run_until_complete(
            KnowledgeBase.open(spec.kb, kernel=worker.kernel, home=spec.home, writable=True, extensions=False)
        )

    def __call__(self, batch: Batch) -> Batch:
        from toolkernel_rag.ingestion import IngestReport, begin_write, finish_write

        statuses = list(batch["status"])
        payloads = list(batch["payload"])
        pieces = [(i, pickle.loads(p)) for i, (s, p) in enumerate(zip(statuses, payloads, strict=True))]
        pieces = [(i, p) for i, p in pieces if statuses[i] == "changed"]
        if pieces:
            documents = [p.document for _, p in pieces]
            chunks = [c for _, p in pieces for c in p.chunks]
            vectors = [v for _, p in pieces for v in (p.vectors or [])]
            known = self.worker.known
            with _tracer.start_as_current_span("kb.write", context=_context(self.spec)) as span:
                report = IngestReport()
                self.loop.run_until_complete(
                    begin_write(self.kb, documents, known, report, [p.terms for _, p in pieces])
                )
                self.loop.run_until_complete(finish_write(self.kb, documents, chunks, vectors, known, report))
                span.set_attribute("kb.documents", len(documents))
                span.set_attribute("kb.chunks", len(chunks))
            for i, piece in pieces:
                statuses[i] = "written"
                doc = piece.document
                row = (piece.source, doc.id, doc.id in known, len(piece.chunks))
                payloads[i] = pickle.dumps((*row, piece.chunk_seconds, piece.embed_seconds))
        return _batch(statuses, payloads)
