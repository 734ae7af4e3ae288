"""The sparse index beside the vectors: BM25 over Snowball-stemmed terms, kept incrementally.

Every chunk's terms are computed once at ingestion and kept in the catalog. The index is
term-frequency postings in segments (:mod:`toolkernel_rag.postings`), scored at query time
with bm25s's ``lucene`` BM25 over the whole live corpus. Only the writer (holding the
knowledge base's writer lock) saves it under ``sparse/``: when the catalog's generation
moves it reads only what changed (:meth:`~toolkernel_rag.catalog.Catalog.changes`: chunks
above the highest rowid saved, and tombstones), writes the new chunks as one more segment
and records the removed ones as dead, then replaces ``index.json`` (which names the
segments and the dead rowids) in one rename, so a reader sees the old index or the new one,
whole. When dead and newer rows reach half the first segment, or there are more than
:data:`MAX_SEGMENTS`, it merges them into one (Lucene's way), so a one-document ingest writes
a few kilobytes whatever the knowledge base's size. A reader loads the saved segments and
brings them forward with the catalog's changes itself, so it never waits for the writer; it
builds in memory from the catalog only when nothing usable is saved, and never writes.
Filters are applied by walking the BM25 ranking best-first and testing each chunk's metadata
with the kernel's reference filter semantics, so every store's operators work.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkernel.knowledge import ScoredChunk
from toolkernel_rag.layout import SparseSpec
from toolkernel_rag.postings import Segment, SparseState, build_segment
from toolkernel_rag.postings_files import SEGMENT_FILE, load_segment, save_segment, write_catalog_segment

if TYPE_CHECKING:
    from toolkernel_rag.catalog import Catalog, Changes

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_INDEX = "index.json"
_OLD_STATE = "state.json"
"""What format 2 (whole bm25s matrices, rewritten on every change) saved: replaced on the next write."""
_FORMAT = 3
"""Bumped when what the saved index holds changes (3: term-frequency postings in segments)."""
MAX_SEGMENTS = 12
"""Segments a saved index (or a reader's) holds at most before they are merged."""


class Analyzer:
    """Text → BM25 terms: lowercase, words of two or more characters, stop words out, stemmed."""

    def __init__(self, language: str) -> None:
        import Stemmer  # type: ignore[import-not-found]
        from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]

        self._stemmer = Stemmer.Stemmer(language)
        self._stop = frozenset(STOPWORDS_EN) if language == "english" else frozenset()

    def terms(self, text: str) -> list[str]:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in self._stop]
        return list(self._stemmer.stemWords(words))


@dataclass(frozen=True)
class _Saved:
    """What ``index.json`` says: the generation, the highest rowid, the segments and dead rowids."""

    generation: int
    max_rowid: int
    segments: list[dict[str, Any]]
    dead: list[int]

    @property
    def rows(self) -> list[int]:
        return [int(s["rows"]) for s in self.segments]


class SparseIndex:
    """BM25 over a knowledge base's chunks, kept in step with its catalog.

    :meth:`search` may run in a worker thread; :meth:`refresh` belongs to the thread that owns
    the catalog.
    """

    def __init__(self, directory: Path, spec: SparseSpec, *, writable: bool = True) -> None:
        self.directory = directory
        self.spec = spec
        self.writable = writable
        self.analyzer = Analyzer(spec.language)
        self._loaded = SparseState.empty()
        self._written = -1
        """The generation the writer saved last (its index is loaded on the first search)."""
        self._catalog: Catalog | None = None

    def terms(self, text: str) -> str:
        """The terms of ``text`` as the catalog stores them (space-separated)."""
        return " ".join(self.analyzer.terms(text))

    def _spec_state(self) -> dict[str, Any]:
        """What the saved postings were built with: a change (say, of the language) rebuilds them."""
        return {"format": _FORMAT, **self.spec.model_dump()}

    def warm(self, report: Callable[[str], None]) -> None:
        """Nothing to start: a reader loads the whole saved index at its first search."""

    def close(self) -> None:
        """Nothing runs in the background."""

    def refresh(self, catalog: Catalog) -> None:
        """Bring the index up to the catalog's generation.

        A reader brings what it holds (or the saved index) forward in memory. The writer saves
        the generation's changes as a new segment (or the whole index when nothing usable is
        saved) and loads it only when it searches.
        """
        self._catalog = catalog
        if not self.writable:
            if catalog.generation() != self._loaded.generation:
                with catalog.reading():
                    self._loaded = self.prepare(catalog, self._loaded)
            return
        if catalog.generation() != self._written:
            self._save(catalog, rebuild=False)

    def rebuild(self, catalog: Catalog) -> None:
        """Build from the catalog whatever is saved (``kb repair``), and use it."""
        self._catalog = catalog
        if self.writable:
            self._save(catalog, rebuild=True)
        else:
            with catalog.reading():
                self._loaded = self.build(catalog)

    def _in_use(self) -> SparseState:
        """The index a search without a view uses: the writer loads what it saved, once."""
        if self._written != self._loaded.generation and self._written >= 0:
            loaded = self.saved()
            if loaded is None and self._catalog is not None:  # damaged since it was written
                self._save(self._catalog, rebuild=True)
                loaded = self.saved()
            if loaded is not None:
                self._loaded = loaded
        return self._loaded

    def prepare(self, catalog: Catalog, held: SparseState | None = None) -> SparseState:
        """The index of the catalog's generation (call inside :meth:`Catalog.reading`): ``held`` (or
        the saved index) brought forward by the catalog's changes, else built from the catalog."""
        for base in (held, None):
            base = base if base is not None and base.generation >= 0 else self.saved()
            changes = None if base is None else catalog.changes(base.generation, base.max_rowid)
            if base is not None and changes is not None:
                return self.forward(catalog, base, changes)
        return self.build(catalog)

    def forward(self, catalog: Catalog, base: SparseState, changes: Changes) -> SparseState:
        """``base`` moved to ``changes.generation``: the chunks above its rowids added as a segment,
        the removed ones dead; segments merged when there are too many."""
        if changes.generation == base.generation:
            return base
        added = None
        if changes.max_rowid > base.max_rowid:
            added = build_segment(catalog.chunk_rows(base.max_rowid), self._document_terms(catalog))
        moved = base.apply(changes.generation, added, changes.removed)
        if len(moved.segments) > MAX_SEGMENTS:
            moved = moved.compacted(keep_first=_small_tail(moved.chunks.offsets, len(moved.rowids)))
        return moved

    def build(self, catalog: Catalog) -> SparseState:
        """The whole index from the catalog, in memory (a reader calls it inside
        :meth:`Catalog.reading`; the writer keeps the terms it had to analyse)."""
        generation = catalog.generation()
        segment = build_segment(catalog.chunk_rows(), self._document_terms(catalog))
        rows = segment.rowids
        return SparseState(generation, catalog.max_rowid(), (segment,), np.ones(len(rows), dtype=bool))

    def _document_terms(self, catalog: Catalog) -> Callable[[Sequence[str]], Mapping[str, str]]:
        """Documents' terms by id, analysed from their text where an older catalog kept none (the
        writer then keeps them)."""

        def terms(document_ids: Sequence[str]) -> Mapping[str, str]:
            found = catalog.terms_of(document_ids)
            analysed: list[tuple[str, str]] = []
            out: dict[str, str] = {}
            for document_id in document_ids:
                known = found.get(document_id)
                if known is None:
                    row = catalog.document(document_id)
                    known = self.terms(row[1]) if row is not None else ""
                    if row is not None and row[0].state == "done":
                        analysed.append((document_id, known))
                out[document_id] = known
            if analysed and self.writable:
                catalog.set_document_terms(analysed)
            return out

        return terms

    # -- the saved index ------------------------------------------------------------------

    def saved(self) -> SparseState | None:
        """The saved index when every file of it loads, else ``None`` (a writer replacing a
        segment meanwhile is retried)."""
        for _ in range(3):
            manifest = self._manifest()
            if manifest is None:
                return None
            try:
                segments = tuple(load_segment(self.directory / s["name"]) for s in manifest.segments)
            except Exception:  # any damage (missing, truncated, garbled), or replaced meanwhile
                if self._manifest() == manifest:
                    return None
                continue
            if [len(s.rowids) for s in segments] != manifest.rows:
                return None
            rowids = np.concatenate([s.rowids for s in segments]) if segments else np.zeros(0, np.int64)
            live = ~np.isin(rowids, np.asarray(manifest.dead, dtype=np.int64))
            return SparseState(manifest.generation, manifest.max_rowid, segments, live)
        return None

    def _manifest(self) -> _Saved | None:
        """``index.json`` when it is this spec's and every file it names has the size it recorded."""
        try:
            state = json.loads((self.directory / _INDEX).read_text(encoding="utf-8"))
            if state.get("spec") != self._spec_state():
                return None
            for segment in state["segments"]:
                for name, size in segment["bytes"].items():
                    if (self.directory / segment["name"] / name).stat().st_size != size:
                        return None
            return _Saved(int(state["generation"]), int(state["max_rowid"]), state["segments"], state["dead"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _save(self, catalog: Catalog, *, rebuild: bool) -> None:
        """Save the catalog's generation (the writer): its changes as a new segment, or everything."""
        saved = None if rebuild else self._manifest()
        changes = None if saved is None else catalog.changes(saved.generation, saved.max_rowid)
        if saved is None or changes is None or not saved.segments:
            # The writer's own catalog: nothing changes it meanwhile.
            self._write(catalog.generation(), catalog.max_rowid(), [self._catalog_segment(catalog)], [])
        elif changes.generation != saved.generation:
            segments, dead = list(saved.segments), sorted({*saved.dead, *changes.removed})
            added = 0
            if changes.max_rowid > saved.max_rowid:
                segment = build_segment(catalog.chunk_rows(saved.max_rowid), self._document_terms(catalog))
                added = len(segment.rowids)
                if added:
                    segments.append(self._new_segment(segment))
            if (len(dead) + sum(saved.rows[1:]) + added) * 2 > saved.rows[0] or len(segments) > MAX_SEGMENTS:
                self._write(changes.generation, changes.max_rowid, segments, dead)
                merged = self.saved()
                if merged is None:  # unreadable: write it all from the catalog
                    self._save(catalog, rebuild=True)
                    return
                whole = merged.compacted(keep_first=False)
                segments, dead = [self._new_segment(whole.segments[0])], []
            self._write(changes.generation, changes.max_rowid, segments, dead)
        self._written = catalog.generation()
        self._loaded = SparseState.empty()

    def _new_segment(self, segment: Segment) -> dict[str, Any]:
        """Write ``segment`` under a new name; what ``index.json`` records of it."""
        return self._staged(lambda staging: save_segment(segment, staging))

    def _catalog_segment(self, catalog: Catalog) -> dict[str, Any]:
        """Write every chunk of the catalog as one segment, a page of rows at a time."""
        analysed: list[tuple[str, str]] = []

        def analyse(document_id: str) -> str:
            row = catalog.document(document_id)
            terms = self.terms(row[1]) if row is not None else ""
            if row is not None and row[0].state == "done":
                analysed.append((document_id, terms))
            return terms

        entry = self._staged(lambda staging: write_catalog_segment(staging, catalog, analyse))
        if analysed:  # an older catalog kept no document terms: keep them for next time
            catalog.set_document_terms(analysed)
        return entry

    def _staged(self, write: Callable[[Path], object]) -> dict[str, Any]:
        """Let ``write`` fill a new segment directory under a private name, then rename it in."""
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"segment-{uuid.uuid4().hex[:12]}"
        staging = self.directory / f".{name}"
        try:
            write(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        staging.rename(self.directory / name)
        files = {p.name: p.stat().st_size for p in (self.directory / name).iterdir()}
        shapes = json.loads((self.directory / name / SEGMENT_FILE).read_text(encoding="utf-8"))["arrays"]
        return {"name": name, "rows": int(shapes["rowids"][1]), "bytes": files}

    def _write(
        self, generation: int, max_rowid: int, segments: list[dict[str, Any]], dead: list[int]
    ) -> None:
        """Replace ``index.json`` in one rename, then remove what it no longer names."""
        state = {
            "generation": generation,
            "spec": self._spec_state(),
            "max_rowid": max_rowid,
            "segments": segments,
            "dead": dead,
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".{_INDEX}.{os.getpid()}"
        with temporary.open("w", encoding="utf-8") as out:
            json.dump(state, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.directory / _INDEX)
        keep = {s["name"] for s in segments} | {_INDEX}
        for leftover in self.directory.iterdir():  # older segments, an older format, a killed write
            if leftover.name not in keep:
                if leftover.is_dir():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink(missing_ok=True)
        for leftover in self.directory.parent.glob(f".{self.directory.name}-*"):  # an older format's staging
            shutil.rmtree(leftover, ignore_errors=True)

    def status(self, generation: int) -> str:
        """What is saved under ``sparse/``: ``current``, ``stale`` (an older generation or format,
        brought forward by readers and rewritten by the next write), ``missing`` or ``damaged``
        (unreadable; readers build it in memory, the next write rebuilds it)."""
        try:
            state = json.loads((self.directory / _INDEX).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return "stale" if (self.directory / _OLD_STATE).exists() else "missing"
        except (OSError, ValueError):
            return "damaged"
        if not isinstance(state, dict) or state.get("spec") != self._spec_state():
            return "stale"
        if self.saved() is None:
            return "damaged"
        return "current" if state.get("generation") == generation else "stale"

    def search(
        self,
        query: str,
        top_k: int,
        allowed: Callable[[Mapping[str, Any]], bool] | None = None,
        loaded: SparseState | None = None,
    ) -> list[tuple[str, ScoredChunk]]:
        """The ``top_k`` best documents by BM25 as ``(document id, best chunk)``, filtered by ``allowed``.

        Documents are scored whole (on their own terms), which on SciFact ranks 1.9 points of
        nDCG@10 better than scoring 250-token chunks; the chunk returned for a document is the
        one whose own BM25 score is highest. The score is the document's. ``loaded`` searches
        that index (a reader's view) instead of the one in use.
        """
        loaded = loaded if loaded is not None else self._in_use()
        terms = self.analyzer.terms(query)
        if not loaded.documents.count or not terms:
            return []
        k1, b = self.spec.k1, self.spec.b
        document_scores = loaded.documents.scores(terms, k1, b)
        positive = np.flatnonzero(document_scores > 0)
        if not len(positive):
            return []
        chunk_scores = loaded.chunks.scores(terms, k1, b)
        if allowed is None and len(positive) > top_k:
            best = positive[np.argpartition(-document_scores[positive], top_k - 1)[:top_k]]
        else:
            best = positive
        order = best[np.argsort(-document_scores[best], kind="stable")]
        out: list[tuple[str, ScoredChunk]] = []
        for d in order:
            chunks = sorted(loaded.document_rows(int(d)).tolist(), key=lambda i: -chunk_scores[i])
            chosen = next((i for i in chunks if allowed is None or allowed(loaded.metadata[i])), None)
            if chosen is not None:
                document_id = str(loaded.metadata[chosen].get("document_id", loaded.ids[chosen]))
                out.append((document_id, ScoredChunk(loaded.ids[chosen], float(document_scores[d]))))
                if len(out) == top_k:
                    break
        return out


def _small_tail(offsets: list[int], rows: int) -> bool:
    """Whether the segments after the first hold less than half as many rows as it does."""
    first = offsets[1] if len(offsets) > 1 else rows
    return (rows - first) * 2 < first
