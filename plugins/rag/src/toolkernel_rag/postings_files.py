"""A BM25 segment on disk, and the writer's whole-catalog segment written in memory that does not grow.

On disk a segment's postings are kept row by row (CSR: each row's terms and their frequencies,
rows in rowid order), which a writer can append a page of catalog rows at a time; a reader
turns them into postings by term (CSC) when it loads them. Every array is a raw file named in
``segment.json`` with its dtype and length (a truncated file loads short and is refused), the
chunk ids, metadata, document ids and vocabularies JSON lists beside them.

:func:`write_catalog_segment` writes the whole catalog as one segment (the first write, ``kb
repair``, an index of an older format) holding the vocabularies, one page of rows, and 12
bytes per chunk (rowid, length): never the corpus, so an ingest's memory stays flat in the
corpus size (``test_ingest_memory_stays_under_the_bound_at_300_and_30000_documents``).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from toolkernel_rag.postings import Postings, Segment

if TYPE_CHECKING:
    from toolkernel_rag.catalog import Catalog

PAGE = 2000
"""Catalog rows read and written at a time."""
SEGMENT_FILE = "segment.json"
_TABLES = ("ids", "metadata", "documents", "chunk_vocabulary", "document_vocabulary")


class _Arrays:
    """Raw array files appended to, their dtypes and lengths recorded for ``segment.json``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.shapes: dict[str, list[Any]] = {}
        self._files: dict[str, IO[bytes]] = {}

    def append(self, name: str, values: npt.ArrayLike, dtype: type[np.generic]) -> None:
        data = np.ascontiguousarray(values, dtype=dtype)
        if name not in self._files:
            self._files[name] = (self.directory / f"{name}.bin").open("wb")
            self.shapes[name] = [np.dtype(dtype).str, 0]
        self._files[name].write(data.tobytes())
        self.shapes[name][1] += len(data)

    def close(self) -> None:
        for file in self._files.values():
            file.close()


class _JsonList:
    """A JSON list written item by item (``raw`` items are JSON text already)."""

    def __init__(self, path: Path) -> None:
        self._out = path.open("w", encoding="utf-8")
        self._out.write("[")
        self._first = True

    def add(self, item: Any, *, raw: bool = False) -> None:
        self._out.write(
            ("" if self._first else ",") + (item if raw else json.dumps(item, ensure_ascii=False))
        )
        self._first = False

    def close(self) -> None:
        self._out.write("]")
        self._out.close()


class _Side:
    """One side's (chunks' or documents') CSR postings, appended a page of rows at a time."""

    def __init__(self, arrays: _Arrays, prefix: str) -> None:
        self._arrays = arrays
        self._prefix = prefix
        self.vocabulary: dict[str, int] = {}
        self._page_terms: array[int] = array("i")
        self._page_lengths: array[int] = array("i")
        self._nnz = 0
        arrays.append(f"{prefix}_indptr", [0], np.int64)

    def add(self, terms: str) -> None:
        vocabulary = self.vocabulary
        tokens = terms.split()
        self._page_terms.extend([vocabulary.setdefault(t, len(vocabulary)) for t in tokens])
        self._page_lengths.append(len(tokens))
        if len(self._page_lengths) >= PAGE:
            self.flush()

    def flush(self) -> None:
        lengths = (
            np.frombuffer(self._page_lengths, dtype=np.int32) if self._page_lengths else np.zeros(0, np.int32)
        )
        if not len(lengths):
            return
        terms = np.frombuffer(self._page_terms, dtype=np.int32) if self._page_terms else np.zeros(0, np.int32)
        rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        keys, tf = np.unique(rows << 32 | terms.astype(np.int64), return_counts=True)
        per_row = np.bincount(keys >> 32, minlength=len(lengths))
        prefix, arrays = self._prefix, self._arrays
        arrays.append(f"{prefix}_terms", keys & 0xFFFFFFFF, np.int32)
        arrays.append(f"{prefix}_tf", tf, np.int32)
        arrays.append(f"{prefix}_lengths", lengths, np.int32)
        arrays.append(f"{prefix}_indptr", self._nnz + np.cumsum(per_row), np.int64)
        self._nnz += int(per_row.sum())
        self._page_terms, self._page_lengths = array("i"), array("i")

    def close(self, name: str) -> None:
        """Write the last page and the vocabulary (as ``name``), and let the vocabulary go."""
        self.flush()
        path = self._arrays.directory / f"{name}.json"
        path.write_text(json.dumps(list(self.vocabulary), ensure_ascii=False), encoding="utf-8")
        self.vocabulary = {}


def write_catalog_segment(
    directory: Path, catalog: Catalog, analyse: Callable[[str], str | None]
) -> tuple[int, int]:
    """Write every chunk of ``catalog`` as one segment into ``directory`` (new); returns
    ``(chunks, highest rowid)``. ``analyse(document id)`` gives a document's terms where the
    catalog keeps none (an older catalog, or a document being rewritten)."""
    directory.mkdir(parents=True)
    arrays = _Arrays(directory)
    tables = {name: _JsonList(directory / f"{name}.json") for name in _TABLES[:3]}
    chunks, documents = _Side(arrays, "chunk"), _Side(arrays, "doc")
    rowids: array[int] = array("q")
    try:
        for row in catalog.chunk_rows(page=PAGE):
            rowids.append(row.rowid)
            tables["ids"].add(row.id)
            tables["metadata"].add(row.metadata, raw=True)
            chunks.add(row.terms)
        chunks.close("chunk_vocabulary")
        for document_id, state, terms in catalog.documents_by_first_chunk(PAGE):
            if terms is None or state != "done":
                terms = analyse(document_id) or ""
            tables["documents"].add(document_id)
            documents.add(terms)
        documents.close("document_vocabulary")
        positions = np.frombuffer(rowids, dtype=np.int64) if rowids else np.zeros(0, np.int64)
        arrays.append("rowids", positions, np.int64)
        members: list[int] = []
        count, current = 0, None
        arrays.append("document_indptr", [0], np.int64)
        for document_id, rowid in catalog.chunk_rowids_by_document(PAGE):
            if document_id != current and current is not None:
                arrays.append("document_indptr", [count], np.int64)
            current = document_id
            members.append(int(np.searchsorted(positions, rowid)))
            count += 1
            if len(members) >= PAGE:
                arrays.append("document_chunks", members, np.int32)
                members = []
        if current is not None:
            arrays.append("document_indptr", [count], np.int64)
        arrays.append("document_chunks", members, np.int32)
    finally:
        arrays.close()
        for table in tables.values():
            table.close()
    (directory / SEGMENT_FILE).write_text(json.dumps({"arrays": arrays.shapes}), encoding="utf-8")
    return len(rowids), int(positions[-1]) if len(positions) else 0


def save_segment(segment: Segment, directory: Path) -> None:
    """Write an in-memory segment into ``directory`` (new)."""
    directory.mkdir(parents=True)
    arrays = _Arrays(directory)
    try:
        arrays.append("rowids", segment.rowids, np.int64)
        arrays.append("document_indptr", segment.document_indptr, np.int64)
        arrays.append("document_chunks", segment.document_chunks, np.int32)
        for prefix, postings in (("chunk", segment.chunks), ("doc", segment.document_terms)):
            indptr, terms, tf = _by_row(postings)
            arrays.append(f"{prefix}_indptr", indptr, np.int64)
            arrays.append(f"{prefix}_terms", terms, np.int32)
            arrays.append(f"{prefix}_tf", tf, np.int32)
            arrays.append(f"{prefix}_lengths", postings.lengths, np.int32)
    finally:
        arrays.close()
    items: dict[str, list[Any]] = {
        "ids": segment.ids,
        "documents": segment.documents,
        "chunk_vocabulary": segment.chunks.terms,
        "document_vocabulary": segment.document_terms.terms,
    }
    for name, values in items.items():
        (directory / f"{name}.json").write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8")
    metadata = _JsonList(directory / "metadata.json")
    for item in segment.metadata_raw:
        metadata.add(item, raw=isinstance(item, str))
    metadata.close()
    (directory / SEGMENT_FILE).write_text(json.dumps({"arrays": arrays.shapes}), encoding="utf-8")


def load_segment(directory: Path) -> Segment:
    """:raises Exception: any damage (missing, truncated, garbled, not fitting together)."""
    shapes = json.loads((directory / SEGMENT_FILE).read_text(encoding="utf-8"))["arrays"]
    arrays: dict[str, Any] = {}
    for name, (dtype, count) in shapes.items():
        arrays[name] = np.fromfile(directory / f"{name}.bin", dtype=np.dtype(dtype))
        if len(arrays[name]) != count:
            raise ValueError(f"{name}.bin holds {len(arrays[name])} values, not {count}")
    tables = {name: json.loads((directory / f"{name}.json").read_text(encoding="utf-8")) for name in _TABLES}
    empty = np.zeros(0, dtype=np.int32)

    def postings(prefix: str, vocabulary: list[str]) -> Postings:
        lengths = arrays.get(f"{prefix}_lengths", empty)
        return _by_term(
            vocabulary,
            arrays[f"{prefix}_indptr"],
            arrays.get(f"{prefix}_terms", empty),
            arrays.get(f"{prefix}_tf", empty),
            lengths,
        )

    segment = Segment(
        arrays.get("rowids", np.zeros(0, dtype=np.int64)),
        tables["ids"],
        tables["metadata"],
        postings("chunk", tables["chunk_vocabulary"]),
        tables["documents"],
        postings("doc", tables["document_vocabulary"]),
        arrays["document_indptr"],
        arrays.get("document_chunks", empty),
    )
    segment.check()
    return segment


def _by_row(postings: Postings) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """CSC postings as ``(row indptr, terms, tf)``, each row's terms ascending."""
    terms = np.repeat(np.arange(len(postings.terms), dtype=np.int64), np.diff(postings.indptr))
    order = np.argsort(postings.rows, kind="stable")
    indptr = np.zeros(postings.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(postings.rows, minlength=postings.size), out=indptr[1:])
    return indptr, terms[order], postings.tf[order]


def _by_term(
    vocabulary: list[str],
    row_indptr: npt.NDArray[np.int64],
    terms: npt.NDArray[np.int32],
    tf: npt.NDArray[np.int32],
    lengths: npt.NDArray[np.int32],
) -> Postings:
    """CSR postings (rows' terms) as :class:`Postings` by term, each term's rows ascending."""
    if len(row_indptr) != len(lengths) + 1 or int(row_indptr[-1]) != len(terms) or len(tf) != len(terms):
        raise ValueError("row postings do not fit together")
    if len(terms) and int(terms.max()) >= len(vocabulary):
        raise ValueError("a posting names a term outside the vocabulary")
    rows = np.repeat(np.arange(len(lengths), dtype=np.int32), np.diff(row_indptr))
    order = np.argsort(terms, kind="stable")
    indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=len(vocabulary)), out=indptr[1:])
    return Postings(vocabulary, indptr, rows[order], tf[order].astype(np.int32), lengths.astype(np.int32))
