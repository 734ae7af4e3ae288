"""The writer's BM25 index files, written from the catalog in memory that does not grow with it.

:class:`~toolkernel_rag.sparse.SparseIndex` used to build the index in memory with
``bm25s.BM25.index`` — every chunk's terms, ids and metadata held at once, about 80 MB for
30,000 short notes — and then save it. This writes the same files (``bm25/`` and
``bm25-documents/`` as ``bm25s.BM25.save`` writes them, and ``state.json``), with the same
arrays bit for bit, in two passes over the catalog a page of rows at a time:

1. count each term's documents and the lengths (what bm25s's ``lucene`` scores need: N,
   the average length, each term's document frequency, hence its idf);
2. score every posting with bm25s's own functions and write it straight into its place in
   the CSC arrays, which are memory-mapped ``.npy`` files whose pages are dropped from this
   process after every page of rows; chunk ids and metadata are streamed into ``state.json``.

What the writer holds is the vocabulary (a term's id and document frequency), one page of
rows, and a rowid per chunk (8 bytes): never the corpus. Readers load the files unchanged.
"""

from __future__ import annotations

import json
import mmap
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from toolkernel_rag.catalog import Catalog
    from toolkernel_rag.layout import SparseSpec

PAGE = 2000
"""Rows read from the catalog, scored and written at a time."""


@dataclass
class _Counts:
    """Pass 1 of one index: the vocabulary in first-seen order, document frequencies, lengths."""

    vocabulary: dict[str, int] = field(default_factory=dict)
    frequencies: list[int] = field(default_factory=list)
    texts: int = 0
    length: int = 0

    def add(self, terms: str) -> None:
        vocabulary, frequencies = self.vocabulary, self.frequencies
        seen: set[int] = set()
        tokens = terms.split()
        for term in tokens:
            index = vocabulary.setdefault(term, len(vocabulary))
            if index == len(frequencies):
                frequencies.append(0)
            seen.add(index)
        for index in seen:
            frequencies[index] += 1
        self.texts += 1
        self.length += len(tokens)


class _Column:
    """One ``.npy`` file written in place through a shared memory map, its pages released as it goes."""

    def __init__(self, path: Path, dtype: np.dtype[Any], size: int) -> None:
        self._file: IO[bytes] = path.open("wb+")
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (size,)}
        np.lib.format.write_array_header_1_0(self._file, header)
        offset = self._file.tell()
        self._file.truncate(offset + size * dtype.itemsize)
        self._map: mmap.mmap | None = None
        self.array: npt.NDArray[Any] = np.zeros(0, dtype=dtype)
        if size:
            self._map = mmap.mmap(self._file.fileno(), 0)
            self.array = np.frombuffer(self._map, dtype=dtype, count=size, offset=offset)

    def release(self) -> None:
        """Drop the written pages from this process (they stay in the page cache and the file)."""
        if self._map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        self.array = np.zeros(0, dtype=self.array.dtype)
        if self._map is not None:
            self._map.flush()
            self._map.close()
        self._file.close()


def write_bm25(directory: Path, spec: SparseSpec, texts: Callable[[], Iterable[str]]) -> int:
    """Write the bm25s index of ``texts()`` (each a space-separated term string; called twice, it must
    give the same texts in the same order) to ``directory``, as ``bm25s.BM25.save`` would after
    ``index()`` on :class:`~toolkernel_rag.sparse.TermIds` of them. Returns the number of texts."""
    import bm25s  # type: ignore[import-untyped]
    from bm25s.scoring import (  # type: ignore[import-untyped]
        _build_idf_array,
        _get_counts_from_token_ids,
        _score_idf_lucene,
        _score_tfc_lucene,
    )

    model = bm25s.BM25(k1=spec.k1, b=spec.b, method="lucene")
    counts = _Counts()
    for terms in texts():
        counts.add(terms)
    if not counts.vocabulary:  # what TermIds.as_corpus gives bm25s: one token to build a vocabulary of
        counts.vocabulary[""] = 0
        counts.frequencies.append(0)
    n_texts, n_terms = counts.texts, len(counts.vocabulary)
    frequencies = np.asarray(counts.frequencies, dtype=np.int64)
    nnz = int(frequencies.sum())
    average = np.array([counts.length], dtype=np.float64)[0] / n_texts  # bm25s: mean of the lengths
    idf = _build_idf_array(dict(enumerate(counts.frequencies)), n_texts, _score_idf_lucene, model.dtype)
    # The types bm25s's default CSC builder (``csc_backend="numpy"``) gives: the equality test
    # with an in-memory build pins them.
    index_dtype = np.dtype(model.int_dtype)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(frequencies, out=indptr[1:])
    filled = indptr[:-1].astype(np.int64)
    directory.mkdir(parents=True, exist_ok=True)
    data = _Column(directory / "data.csc.index.npy", np.dtype(model.dtype), nnz)
    indices = _Column(directory / "indices.csc.index.npy", index_dtype, nnz)
    try:
        vocabulary = counts.vocabulary
        row = 0
        for terms in texts():
            ids = [vocabulary[t] for t in terms.split()]
            terms_of_text, tf = _get_counts_from_token_ids(ids, dtype=model.dtype, int_dtype=model.int_dtype)
            scores = idf[terms_of_text] * _score_tfc_lucene(
                tf_array=tf, l_d=len(ids), l_avg=average, k1=model.k1, b=model.b
            )
            places = filled[terms_of_text]
            data.array[places] = scores
            indices.array[places] = row
            filled[terms_of_text] += 1
            row += 1
            if row % PAGE == 0:
                data.release()
                indices.release()
    finally:
        data.close()
        indices.close()
    if row != n_texts:
        raise RuntimeError(f"the catalog changed while its BM25 index was written ({n_texts}, then {row})")
    np.save(directory / "indptr.csc.index.npy", indptr)
    if "" not in vocabulary:  # bm25s's empty token, after the matrix was built
        vocabulary[""] = n_terms
    with (directory / "vocab.index.json").open("w", encoding="utf-8") as out:
        json.dump(vocabulary, out, ensure_ascii=False)
    params = {
        "k1": model.k1,
        "b": model.b,
        "delta": model.delta,
        "method": model.method,
        "idf_method": model.idf_method,
        "dtype": model.dtype,
        "int_dtype": model.int_dtype,
        "num_docs": n_texts,
        "version": bm25s.__version__,
        "backend": model.backend,
    }
    (directory / "params.index.json").write_text(json.dumps(params, indent=4), encoding="utf-8")
    return n_texts


def write_sparse_files(
    staging: Path, catalog: Catalog, spec: SparseSpec, state: dict[str, Any], analyse: Callable[[str], str]
) -> None:
    """Everything :class:`~toolkernel_rag.sparse.SparseIndex` saves under ``sparse/``, into ``staging``:
    the chunk index, the document index (each document scored on its own terms) and
    ``state.json`` (``state`` plus the chunk ids, their metadata and each document's chunks).

    ``analyse`` gives the terms of a document whose catalog row keeps none (an older catalog),
    which are then stored for next time, as the in-memory build does.
    """
    rowids: list[int] = []
    with (
        (staging / ".ids").open("w", encoding="utf-8") as ids,
        (staging / ".metadata").open("w", encoding="utf-8") as metadata,
    ):

        def chunk_texts() -> Iterator[str]:
            first_pass = not rowids
            for n, (rowid, chunk_id, terms, meta) in enumerate(catalog.chunk_terms(PAGE)):
                if first_pass:
                    rowids.append(rowid)
                    separator = "," if n else ""
                    ids.write(separator + json.dumps(chunk_id))
                    metadata.write(separator + meta)
                yield terms

        chunks = catalog.counts()[2]
        if chunks:
            write_bm25(staging / "bm25", spec, chunk_texts)
    if chunks:
        analysed: dict[str, str] = {}

        def document_texts() -> Iterator[str]:
            for document_id, document_state, terms in catalog.documents_by_first_chunk(PAGE):
                if terms is None or document_state != "done":
                    if document_id not in analysed:
                        found = catalog.document(document_id)
                        analysed[document_id] = analyse(found[1]) if found is not None else ""
                    terms = analysed[document_id]
                yield terms

        write_bm25(staging / "bm25-documents", spec, document_texts)
        stored = [(d, t) for d, t in analysed.items() if catalog.document(d) is not None]
        if stored:
            catalog.set_document_terms(stored)
    with (staging / "state.json").open("w", encoding="utf-8") as out:
        head = json.dumps(state)[:-1]
        out.write(f'{head}, "ids": [')
        _append(out, staging / ".ids")
        out.write('], "metadata": [')
        _append(out, staging / ".metadata")
        out.write('], "documents": [')
        _write_documents(out, catalog, np.asarray(rowids, dtype=np.int64))
        out.write("]}")
    (staging / ".ids").unlink()
    (staging / ".metadata").unlink()


def _append(out: IO[str], part: Path) -> None:
    with part.open(encoding="utf-8") as source:
        shutil.copyfileobj(source, out)


def _write_documents(out: IO[str], catalog: Catalog, rowids: npt.NDArray[np.int64]) -> None:
    """Each document's chunks as positions in the chunk list, documents by their first chunk."""
    current: str | None = None
    positions: list[int] = []
    first = True
    for document_id, rowid in catalog.chunk_rowids_by_document(PAGE):
        if document_id != current and current is not None:
            out.write(("" if first else ",") + json.dumps(positions))
            first, positions = False, []
        current = document_id
        positions.append(int(np.searchsorted(rowids, rowid)))
    if current is not None:
        out.write(("" if first else ",") + json.dumps(positions))
