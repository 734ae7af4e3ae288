"""The sparse index beside the vectors: BM25 (bm25s) over Snowball-stemmed terms.

Every chunk's terms are computed once at ingestion and kept in the catalog; the BM25
matrix is rebuilt from them whenever the catalog's generation moves (ingestion added,
replaced or deleted documents), which for 5,000 SciFact abstracts takes well under a
second. Only the writer (holding the knowledge base's writer lock) saves it under
``sparse/``, staged in a private directory and swapped in, so a server starts without
rebuilding; a reader builds a missing, stale or damaged index in memory and never writes. bm25s has no
incremental update; rebuilding from stored terms is what makes it follow add, replace and
delete. Filters are applied by walking the BM25 ranking best-first and testing each chunk's
metadata with the kernel's reference filter semantics, so every store's operators work.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkernel.knowledge import ScoredChunk
from toolkernel_rag.layout import SparseSpec

if TYPE_CHECKING:
    from toolkernel_rag.catalog import Catalog

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STATE = "state.json"
_HEADER = "generation.json"
"""``state.json``'s generation and spec alone, so a writer learns that the saved index is stale
without reading the chunk table."""
_FORMAT = 2
"""Bumped when what the saved index holds changes (2: documents scored on their own terms)."""


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
class SparseState:
    """One catalog generation's BM25 matrices and chunk table, swapped in whole.

    A search reads one of these from start to end, so a search running in a worker thread
    never mixes two generations while a refresh swaps the next one in.
    """

    generation: int
    ids: list[str]
    metadata: list[dict[str, Any]]
    documents: list[list[int]]
    """Each document's chunks, as positions in ``ids``."""
    chunk_retriever: Any = None
    document_retriever: Any = None


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
        self._loaded = SparseState(-1, [], [], [])
        self._written = -1
        """The generation the writer saved last (its index is loaded on the first search)."""
        self._catalog: Catalog | None = None

    def terms(self, text: str) -> str:
        """The terms of ``text`` as the catalog stores them (space-separated)."""
        return " ".join(self.analyzer.terms(text))

    def _spec_state(self) -> dict[str, Any]:
        """What the saved matrices were built with: a change (say, of ``k1``) rebuilds them."""
        return {"format": _FORMAT, **self.spec.model_dump()}

    def refresh(self, catalog: Catalog) -> None:
        """Bring the index up to the catalog's generation.

        A reader loads the saved index, or builds one in memory. The writer makes sure the saved
        index is the generation's — writing it from the catalog in bounded memory
        (:mod:`toolkernel_rag.sparse_files`) when it is not — and loads it only when it searches.
        """
        generation = catalog.generation()
        if generation == self._loaded.generation:
            return
        if not self.writable:
            self.install(self.prepare(catalog, generation))
        elif generation != self._written:
            loaded = self._load(generation)  # a run that changed nothing finds it saved
            if loaded is None:
                self._write(catalog, generation)
            else:
                self._written = generation
                self.install(loaded)
        self._catalog = catalog

    def rebuild(self, catalog: Catalog) -> None:
        """Build from the catalog whatever is saved (``kb repair``), and use it."""
        if self.writable:
            self._write(catalog, catalog.generation())
        else:
            self.install(self._build(catalog, catalog.generation()))
        self._catalog = catalog

    def _write(self, catalog: Catalog, generation: int) -> None:
        """Save the index of ``generation`` from the catalog (the writer); it is loaded on first search."""
        from toolkernel_rag.sparse_files import write_sparse_files

        def write(staging: Path) -> None:
            header = self._header(generation)
            write_sparse_files(staging, catalog, self.spec, header, self.terms)
            (staging / _HEADER).write_text(json.dumps(header), encoding="utf-8")

        self._swap_in(write)
        self._written = generation
        self._loaded = SparseState(-1, [], [], [])

    def _in_use(self) -> SparseState:
        """The index a search without a view uses: the writer loads what it saved, once."""
        if self._written != self._loaded.generation and self._written >= 0:
            loaded = self._load(self._written)
            if loaded is None and self._catalog is not None:  # damaged since it was written
                self._write(self._catalog, self._written)
                loaded = self._load(self._written)
            if loaded is not None:
                self._loaded = loaded
        return self._loaded

    def install(self, loaded: SparseState) -> None:
        """Swap in an index :meth:`prepare` made (searches already running keep the one they read)."""
        self._loaded = loaded

    def prepare(self, catalog: Catalog, generation: int) -> SparseState:
        """The index of ``generation``: the saved one when it is that generation's and loads, else
        built in memory from the catalog's terms."""
        return self._load(generation) or self._build(catalog, generation)

    def status(self, generation: int) -> str:
        """What is saved under ``sparse/``: ``current``, ``stale`` (an older generation, rebuilt on
        the next write), ``missing`` or ``damaged`` (unreadable; rebuilt on the next write)."""
        try:
            state = json.loads((self.directory / _STATE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return "missing"
        except (OSError, ValueError):
            return "damaged"
        if not isinstance(state, dict) or state.get("generation") != generation:
            return "stale"
        if state.get("spec") != self._spec_state():
            return "stale"
        return "current" if self._load(generation) is not None else "damaged"

    def _load(self, generation: int) -> SparseState | None:
        """The saved index when it is ``generation``'s and every file of it loads, else ``None``."""
        import bm25s  # type: ignore[import-untyped]

        try:
            header = self.directory / _HEADER
            if header.is_file() and json.loads(header.read_text("utf-8")) != self._header(generation):
                return None
            state = json.loads((self.directory / _STATE).read_text(encoding="utf-8"))
            if state.get("generation") != generation or state.get("spec") != self._spec_state():
                return None
            ids, metadata = state["ids"], state["metadata"]
            chunk_retriever = document_retriever = None
            documents = [list(chunks) for chunks in state["documents"]]
            if ids:
                chunk_retriever = bm25s.BM25.load(str(self.directory / "bm25"), mmap=False)
                document_retriever = bm25s.BM25.load(str(self.directory / "bm25-documents"), mmap=False)
                # A truncated or mismatched file loads short: the index must cover every chunk and document.
                if _corpus_size(chunk_retriever) != len(ids) or _corpus_size(document_retriever) != len(
                    documents
                ):
                    return None
        except Exception:  # any damage (missing, truncated, garbled) means "rebuild"
            return None
        return SparseState(generation, ids, metadata, documents, chunk_retriever, document_retriever)

    def _build(self, catalog: Catalog, generation: int) -> SparseState:
        import bm25s

        ids: list[str] = []
        metadata: list[dict[str, Any]] = []
        # Terms as int32 arrays over a vocabulary, not lists of strings: for 30,000 short
        # chunks the lists took 300 MB during the build, the arrays a few.
        corpus = TermIds()
        by_document: dict[str, list[int]] = {}
        for chunk_id, terms, meta in catalog.all_terms():
            by_document.setdefault(str(meta.get("document_id", chunk_id)), []).append(len(ids))
            ids.append(chunk_id)
            metadata.append(meta)
            corpus.add(terms)
        documents = list(by_document.values())
        retriever = document_retriever = None
        if ids:
            retriever = bm25s.BM25(k1=self.spec.k1, b=self.spec.b, method="lucene")
            retriever.index(corpus.as_corpus(), show_progress=False)
            del corpus
            # Documents are scored on their own terms: their chunks' terms together count the
            # overlap between chunks twice (SciFact: 0.684 against 0.686 nDCG@10).
            document_retriever = bm25s.BM25(k1=self.spec.k1, b=self.spec.b, method="lucene")
            document_terms = self._document_terms(catalog, list(by_document))
            document_retriever.index(document_terms.as_corpus(), show_progress=False)
        return SparseState(generation, ids, metadata, documents, retriever, document_retriever)

    def _header(self, generation: int) -> dict[str, Any]:
        """What ``state.json`` holds besides the chunk table."""
        return {"generation": generation, "spec": self._spec_state()}

    def _swap_in(self, write: Callable[[Path], None]) -> None:
        """Let ``write`` fill a private staging directory, then swap it in: a crash leaves a complete
        index or none, and a reader that catches the swap midway fails to load and builds in memory."""
        parent = self.directory.parent
        staging = Path(tempfile.mkdtemp(prefix=f".{self.directory.name}-new-", dir=parent))
        try:
            write(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        old = parent / f".{self.directory.name}-old-{staging.name.rsplit('-', 1)[-1]}"
        if self.directory.exists():
            self.directory.rename(old)
        staging.rename(self.directory)
        shutil.rmtree(old, ignore_errors=True)
        for leftover in parent.glob(f".{self.directory.name}-*"):  # what a killed writer left
            shutil.rmtree(leftover, ignore_errors=True)

    def _document_terms(self, catalog: Catalog, document_ids: list[str]) -> TermIds:
        """Each document's terms, analysed from its text where an older catalog kept none."""
        stored = catalog.document_terms()
        out = TermIds()
        for document_id in document_ids:
            terms = stored.pop(document_id, None)
            if terms is None:
                found = catalog.document(document_id)
                terms = self.terms(found[1]) if found is not None else ""
            out.add(terms)
        return out

    def search(
        self,
        query: str,
        top_k: int,
        allowed: Callable[[Mapping[str, Any]], bool] | None = None,
        loaded: SparseState | None = None,
    ) -> list[tuple[str, ScoredChunk]]:
        """The ``top_k`` best documents by BM25 as ``(document id, best chunk)``, filtered by ``allowed``.

        Documents are scored whole (over all their chunks' terms), which on SciFact ranks
        1.9 points of nDCG@10 better than scoring 250-token chunks; the chunk returned for a
        document is the one whose own BM25 score is highest. The score is the document's.
        ``loaded`` searches that index (a reader's view) instead of the one in use.
        """
        loaded = loaded if loaded is not None else self._in_use()
        if loaded.chunk_retriever is None or loaded.document_retriever is None:
            return []
        vocab = loaded.document_retriever.vocab_dict
        terms = [t for t in self.analyzer.terms(query) if t in vocab]
        if not terms:
            return []
        document_scores = loaded.document_retriever.get_scores(terms)
        chunk_scores = loaded.chunk_retriever.get_scores(terms)
        positive = np.flatnonzero(document_scores > 0)
        if allowed is None and len(positive) > top_k:
            best = positive[np.argpartition(-document_scores[positive], top_k - 1)[:top_k]]
        else:
            best = positive
        order = best[np.argsort(-document_scores[best], kind="stable")]
        out: list[tuple[str, ScoredChunk]] = []
        for d in order:
            chunks = sorted(loaded.documents[d], key=lambda i: -chunk_scores[i])
            chosen = next((i for i in chunks if allowed is None or allowed(loaded.metadata[i])), None)
            if chosen is not None:
                document_id = str(loaded.metadata[chosen].get("document_id", loaded.ids[chosen]))
                out.append((document_id, ScoredChunk(loaded.ids[chosen], float(document_scores[d]))))
                if len(out) == top_k:
                    break
        return out


class TermIds:
    """A corpus as bm25s indexes it from ids: each text's terms as an int32 array, and the vocabulary."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self.texts: list[np.ndarray[Any, np.dtype[np.int32]]] = []

    def add(self, terms: str) -> None:
        vocabulary = self.vocabulary
        ids = [vocabulary.setdefault(term, len(vocabulary)) for term in terms.split()]
        self.texts.append(np.array(ids, dtype=np.int32))

    def as_corpus(self) -> tuple[list[Any], dict[str, int]]:
        """``(token ids per text, vocabulary)``, what ``bm25s.BM25.index`` takes instead of tokens."""
        if not self.vocabulary:  # bm25s needs one token to build a vocabulary of
            self.vocabulary[""] = 0
        return self.texts, self.vocabulary


def _corpus_size(retriever: Any) -> int:
    """How many documents a bm25s index was built over (its score matrix's row count)."""
    return int(retriever.scores["num_docs"])
