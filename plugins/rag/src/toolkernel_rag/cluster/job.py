"""The driver of ``kb ingest --engine ray``: plans the work, runs the Ray Data pipeline, writes, finishes.

The driver walks the sources and counts the documents (as the local pipeline does), reads
the catalog's hashes once and ships them to the workers, then streams the pipeline's output:
a document found unchanged is counted, a changed one is written (embedded backend: here,
``begin_write`` then ``finish_write`` per batch, as the local pipeline writes; PostgreSQL:
already committed by a writer actor). Deletions, extensions and the BM25 index are then
brought up to date by the local pipeline's own ``finish_source`` and ``finish_run``.

Crash safety is the local pipeline's: a document is marked pending (committed) before its
chunks reach the store and done with them in one transaction; chunk ids are
``<document id>#<n>``. A driver killed midway leaves done documents done and the rest
pending or absent, and the next run (on Ray or not) writes exactly those.
"""

from __future__ import annotations

import pickle
import queue
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from opentelemetry import propagate, trace

from toolkernel_rag.cluster.workers import (
    EmbedActor,
    JobSpec,
    KernelRecipe,
    PgWriteActor,
    Piece,
    SourcePlan,
    read_and_chunk,
)
from toolkernel_rag.ingestion import (
    IngestReport,
    Progress,
    begin_write,
    finish_run,
    finish_source,
    finish_write,
)
from toolkernel_rag.kb import KnowledgeBase, rag_settings
from toolkernel_rag.layout import KBError
from toolkernel_rag.seen_ids import SeenIds
from toolkernel_rag.sources import SourceProblem, SourceReader

if TYPE_CHECKING:
    from toolkernel_rag.cluster.connect import RaySession

_tracer = trace.get_tracer("toolkernel_rag")

FILES_PER_TASK = 16
"""Files one reading task reads: small enough to spread a directory over the cluster."""
BLOCK_BYTES = 256 * 1024
"""Ray Data's block size target for the job (documents with their chunks and vectors)."""
READ_CPUS = 0.5
"""CPUs a reading task reserves (Ray's accounting: reading waits on disk as much as it computes)."""
WRITER_CPUS = 0.25
"""CPUs a PostgreSQL writer actor reserves: it mostly waits on the database."""


@dataclass(frozen=True)
class RayOptions:
    """How the job uses the cluster (``kb ingest --engine ray`` options)."""

    actors: int = 2
    """Embedding actors (each loads the model once)."""
    batch_size: int = 32
    """Documents per batch an actor embeds (and a PostgreSQL writer commits)."""
    gpus_per_actor: float = 0.0
    cpus_per_actor: float = 1.0
    writers: int = 1
    """PostgreSQL backend: writer actors committing side by side."""
    stall_timeout: float = 600.0
    """Seconds without any batch coming out of the pipeline before the job is given up as stuck."""

    def check(self) -> None:
        """One-line errors for options no cluster can run."""
        if self.actors < 1:
            raise KBError(f"--actors must be at least 1, got {self.actors}")
        if self.batch_size < 1:
            raise KBError(f"--batch-size must be at least 1, got {self.batch_size}")
        if self.gpus_per_actor < 0:
            raise KBError(f"--gpus-per-actor must be 0 or more, got {self.gpus_per_actor}")
        if self.writers < 1:
            raise KBError(f"--writers must be at least 1, got {self.writers}")


async def ingest_on_ray(
    kb: KnowledgeBase,
    sources: Sequence[str],
    session: RaySession,
    options: RayOptions,
    *,
    progress: Progress | None = None,
) -> IngestReport:
    """Bring ``kb`` in line with ``sources`` on the Ray cluster of ``session``; as :func:`ingest` does.

    ``kb`` must be open writable (on the embedded backend it holds the writer lock).
    """
    options.check()
    kb.require_writable("ingest")
    if options.writers > 1 and not kb.vectors_in_catalog:
        raise KBError(
            f"--writers {options.writers}: only a PostgreSQL home has writer actors; "
            "an embedded knowledge base is written by the driver, which holds its writer lock"
        )
    session.check_resources(options)
    report = IngestReport(memory_mb=rag_settings(kb.kernel).ingest_memory_mb)
    started = time.perf_counter()
    with _tracer.start_as_current_span("kb.ingest") as span:
        span.set_attribute("kb.engine", "ray")
        span.set_attribute("kb.actors", options.actors)
        with _tracer.start_as_current_span("kb.plan"):
            readers = [SourceReader(source, kb.kernel.readers) for source in sources]
            report.total = sum(reader.count() for reader in readers)
            plans, rows, known_by_source = _plan(kb, readers)
        if progress is not None:
            progress(report)
        kb.catalog.start_bulk_load()
        spec = _job_spec(kb, session, plans, known_by_source)
        stream = _Stream(_pipeline(spec, rows, options, kb.vectors_in_catalog), options.stall_timeout)
        seen = [SeenIds() for _ in readers]
        try:
            try:
                await _consume(kb, stream, readers, known_by_source, seen, report, progress)
            finally:
                stream.close()
            for reader, ids in zip(readers, seen, strict=True):
                await finish_source(kb, reader, ids, report)
        finally:
            for ids in seen:
                ids.close()
        await finish_run(kb, report, started, span)
    if progress is not None:
        progress(report)
    return report


def _plan(
    kb: KnowledgeBase, readers: list[SourceReader]
) -> tuple[list[SourcePlan], list[dict[str, Any]], list[dict[str, tuple[str, str]]]]:
    """Each source's key and hashes, and one row per file for the reading tasks."""
    from pathlib import Path

    plans: list[SourcePlan] = []
    rows: list[dict[str, Any]] = []
    known_by_source: list[dict[str, tuple[str, str]]] = []
    for index, reader in enumerate(readers):
        files = reader.walked()
        known_by_source.append(kb.catalog.hashes(reader.location))
        key = kb.catalog.source_key(reader.location) if files else ""
        plans.append(SourcePlan(reader.source, reader.location, key, Path(reader.location).is_file()))
        rows.extend({"source": index, "path": str(path), "relative": rel} for path, rel in files)
    return plans, rows, known_by_source


def _job_spec(
    kb: KnowledgeBase,
    session: RaySession,
    plans: list[SourcePlan],
    known_by_source: list[dict[str, tuple[str, str]]],
) -> JobSpec:
    import ray

    known: dict[str, tuple[str, str]] = {}
    for hashes in known_by_source:
        known.update(hashes)
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    manifest = kb.manifest
    home = kb.location.url or ""
    return JobSpec(
        recipe=KernelRecipe.of(kb.kernel),
        chunker=dict(manifest.chunker),
        sparse_language=manifest.sparse.language,
        embedder=manifest.embedder.name,
        embedder_options=dict(manifest.embedder.options),
        dimension=manifest.embedder.dimension,
        sources=tuple(plans),
        known=ray.put(known),
        trace_carrier=carrier,
        kb=kb.location.name if home else "",
        home=home,
    )


def _pipeline(spec: JobSpec, rows: list[dict[str, Any]], options: RayOptions, workers_write: bool) -> Any:
    """The Ray Data pipeline: read+chunk tasks, the embedding actor pool, PostgreSQL writers if any."""
    import ray.data

    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # written in the order the local pipeline writes
    context.enable_progress_bars = False  # the ingest's own progress goes to stderr
    context.print_on_execution_start = False
    # Small blocks: a reading task's output is cut into blocks of a few dozen documents, so
    # every actor gets work, progress moves batch by batch, and a lost block is little to redo.
    context.target_max_block_size = BLOCK_BYTES
    # Ray Data warns when the first stage starts with fewer blocks than actors; reading tasks
    # stream their output in blocks of ROWS_PER_BATCH documents, which reach every actor.
    warnings.filterwarnings("ignore", message="The minimum number of concurrent actors")
    blocks = max(1, -(-len(rows) // FILES_PER_TASK))
    dataset: Any = ray.data.from_items(
        rows or [{"source": 0, "path": "", "relative": ""}], override_num_blocks=blocks
    )
    if not rows:
        dataset = dataset.limit(0)
    # Reading tasks reserve less than an actor, which also keeps Ray Data from fusing them into
    # the actors: they run as tasks of their own and a large file streams to every actor.
    dataset = dataset.map_batches(
        read_and_chunk,
        batch_format="numpy",
        batch_size=FILES_PER_TASK,
        fn_kwargs={"spec": spec},
        num_cpus=READ_CPUS,
    )
    dataset = dataset.map_batches(
        EmbedActor,
        batch_format="numpy",
        batch_size=options.batch_size,
        fn_constructor_kwargs={"spec": spec, "cpus": options.cpus_per_actor},
        compute=ray.data.ActorPoolStrategy(size=options.actors),
        num_cpus=options.cpus_per_actor,
        num_gpus=options.gpus_per_actor or None,
    )
    if workers_write:
        dataset = dataset.map_batches(
            PgWriteActor,
            batch_format="numpy",
            batch_size=options.batch_size,
            fn_constructor_kwargs={"spec": spec},
            compute=ray.data.ActorPoolStrategy(size=options.writers),
            num_cpus=WRITER_CPUS,
        )
    return dataset


class _Stream:
    """The pipeline's output batches, pulled by a thread so every wait on them has a timeout."""

    _END = object()

    def __init__(self, dataset: Any, timeout: float) -> None:
        self.timeout = timeout
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=4)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pull, args=(dataset,), name="ray-ingest", daemon=True)
        self._thread.start()

    def _pull(self, dataset: Any) -> None:
        try:
            for batch in dataset.iter_batches(batch_format="numpy", batch_size=None):
                while not self._stop.is_set():
                    try:
                        self._queue.put(batch, timeout=1.0)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
            self._queue.put(self._END)
        except BaseException as exc:
            self._queue.put(exc)

    def next(self) -> Any:
        """The next batch, ``None`` at the end; raises what the pipeline raised, or a timeout."""
        try:
            item = self._queue.get(timeout=self.timeout)
        except queue.Empty:
            raise KBError(
                f"--engine ray: no batch came out of the Ray pipeline in {self.timeout:.0f} s; "
                "is the cluster short of CPUs for the actors?"
            ) from None
        if item is self._END:
            return None
        if isinstance(item, BaseException):
            raise KBError(f"--engine ray: the Ray pipeline failed: {_one_line(item)}") from item
        return item

    def close(self) -> None:
        self._stop.set()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _rows(batch: Any) -> Iterator[tuple[str, Any]]:
    for status, payload in zip(batch["status"], batch["payload"], strict=True):
        yield str(status), pickle.loads(payload)


async def _consume(
    kb: KnowledgeBase,
    stream: _Stream,
    readers: list[SourceReader],
    known_by_source: list[dict[str, tuple[str, str]]],
    seen: list[SeenIds],
    report: IngestReport,
    progress: Progress | None,
) -> None:
    """Count, dedupe and (embedded backend) write what the pipeline yields, batch by batch."""
    while True:
        batch = await anyio.to_thread.run_sync(stream.next)
        if batch is None:
            return
        pieces: list[Piece] = []
        for status, row in _rows(batch):
            if status == "problem":
                index, problem = row
                readers[index].problems.append(problem)
                continue
            if status == "changed":
                index, document_id = row.source, row.document.id
            elif status == "written":
                index, document_id = row[0], row[1]
            else:
                index, document_id = row
            if not seen[index].add(document_id):
                where = f"{readers[index].source}: {document_id}"
                readers[index].problems.append(
                    SourceProblem(where, "repeats a document id; the first was kept")
                )
                continue
            report.seen += 1
            report.total = max(report.total, report.seen)
            if status == "unchanged":
                report.unchanged += 1
            elif status == "written":
                report.updated += int(row[2])
                report.added += int(not row[2])
                report.chunks += row[3]
                report.chunk_seconds += row[4]
                report.embed_seconds += row[5]
            else:
                pieces.append(row)
                report.chunk_seconds += row.chunk_seconds
                report.embed_seconds += row.embed_seconds
        if pieces:
            await _write(kb, pieces, known_by_source, report)
        if progress is not None:
            progress(report)


async def _write(
    kb: KnowledgeBase,
    pieces: list[Piece],
    known_by_source: list[dict[str, tuple[str, str]]],
    report: IngestReport,
) -> None:
    """The driver's write of embedded documents: the local pipeline's, one batch at a time."""
    known: dict[str, tuple[str, str]] = {}
    for piece in pieces:
        found = known_by_source[piece.source].get(piece.document.id)
        if found is not None:
            known[piece.document.id] = found
    documents = [p.document for p in pieces]
    chunks = [c for p in pieces for c in p.chunks]
    vectors = [v for p in pieces for v in (p.vectors or [])]
    with _tracer.start_as_current_span("kb.write") as span:
        await begin_write(kb, documents, known, report, [p.terms for p in pieces])
        await finish_write(kb, documents, chunks, vectors, known, report)
        span.set_attribute("kb.documents", len(documents))
        span.set_attribute("kb.chunks", len(chunks))
