"""What a reader searches: one catalog generation's indexes, moved forward off the request path and swapped.

A :class:`View` holds the BM25 index and (for an embedded store) the dense matrix of one
catalog generation, both read in one SQLite read transaction, so they always agree. A
:class:`Follower` thread polls the catalog's generation (one indexed read every
:data:`POLL_SECONDS`) and, when it moved, makes the next view from the current one and what
changed (:meth:`~toolkernel_rag.catalog.Catalog.changes`): the new chunks become one more
BM25 segment and rows appended to the dense matrix, removed chunks are masked. That costs
the change, not the knowledge base: at 100,000 chunks a one-document ingest shows in well
under a second. The first view is the writer's saved index brought forward the same way
(built from the catalog only when nothing usable is saved). The view is swapped in with one
assignment: a search takes the view once and uses it throughout, so it never mixes two
generations, and never waits for the next one. Documents appear to readers only once the
writer has committed them whole (the catalog commits a document's chunks in one
transaction), so a reader never sees a half-written document.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkernel._logging import get_logger
from toolkernel_rag.catalog import Catalog
from toolkernel_rag.dense import VectorMatrix
from toolkernel_rag.postings import SparseState

if TYPE_CHECKING:
    from toolkernel_rag.kb import KnowledgeBase

POLL_SECONDS = 0.5
"""How often a reader checks whether the catalog moved on (a finished ingest shows within ~1 s)."""
MIN_REBUILD_SECONDS = 1.0
"""At least this long between two rebuilds, so an ingest's many commits do not keep a reader busy."""

_log = get_logger("toolkernel_rag.view")


@dataclass(frozen=True, slots=True)
class View:
    """One catalog generation's indexes; never changed once made."""

    generation: int
    sparse: SparseState
    dense: VectorMatrix | None
    """The exact dense matrix, when the vectors' store is embedded (the writer's alone)."""


class Follower:
    """Keeps a reader's :attr:`view` at the catalog's latest generation, from a thread of its own."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self._kb = kb
        # Its own connection: a rebuild's long read never holds up the searches' catalog reads.
        self._catalog = Catalog(kb.embedded_catalog.path, writable=False)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.view = View(-1, SparseState.empty(), None)

    def load_first(self) -> None:
        """Build the first view (before a server says it is ready)."""
        self.view = self._build()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="toolkernel-kb-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._catalog.close()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                if self._catalog.generation() != self.view.generation:
                    self.view = self._build()
                    self._stop.wait(MIN_REBUILD_SECONDS)
            except Exception as exc:  # keep serving the last view; say why once per try
                _log.warning("kb.refresh_failed", kb=self._kb.name, error=str(exc))
                self._stop.wait(MIN_REBUILD_SECONDS)

    def _build(self) -> View:
        """The view of the catalog's generation: the current one moved forward, else a new one."""
        kb, catalog, view = self._kb, self._catalog, self.view
        with catalog.reading():
            generation = catalog.generation()
            changes = (
                None
                if view.generation < 0
                else catalog.changes(view.sparse.generation, view.sparse.max_rowid)
            )
            if changes is not None:
                sparse = kb.embedded_sparse.forward(catalog, view.sparse, changes)
                dense = None
                if view.dense is not None:
                    dense = view.dense.apply(catalog, generation, view.dense.max_rowid, changes.removed)
            else:
                sparse = kb.embedded_sparse.prepare(catalog)
                dense = (
                    VectorMatrix.load(catalog, generation, kb.manifest.embedder.dimension)
                    if kb.embedded_store
                    else None
                )
        return View(generation, sparse, dense)
