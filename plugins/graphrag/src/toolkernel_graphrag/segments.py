"""The graph as the knowledge base keeps it: segments, each what one batch of ingestion changed.

A segment is zlib-compressed text: a header line (format, the build settings, and ``first``:
the lowest segment number it covers, lower than its own only for a merged segment), then
one line per document of the batch — its chunks as the graph needs them (entity keys,
title keys, metadata, nearest neighbours with their similarities, and the knowledge base's
generation the neighbours were found in) or, for a deleted document, none. A line replaces
whatever was held for its document, so a segment read twice does no harm and merging
segments keeps each document's last line.

Before segments the graph was one ``graph.npz`` blob (format 1); :func:`legacy_lines` reads
such a blob as lines, so an old knowledge base keeps working and its writer migrates it.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkernel.errors import ToolkernelError
from toolkernel_graphrag.settings import GraphSettings

FORMAT_VERSION = 2
LEGACY_FORMAT = 1
SIMILARITY_DECIMALS = 4
"""Similarities are rounded, so neighbour lists from any search order the same way."""


class GraphStateError(ToolkernelError, RuntimeError):
    """The persisted graph cannot be read: damaged, missing a part, or built with other settings."""


@dataclass(frozen=True)
class GraphEntry:
    """One chunk as a segment holds it."""

    id: str
    document_id: str
    metadata: dict[str, Any]
    entities: tuple[str, ...]
    titles: tuple[str, ...]
    neighbours: tuple[str, ...] = ()
    similarities: tuple[float, ...] = ()
    generation: int = 0
    """The knowledge base's generation when the neighbours were found (what they were found among)."""


@dataclass(frozen=True)
class DocumentLine:
    """What a segment says of one document: its chunks, or ``None`` when it was deleted."""

    document_id: str
    chunks: tuple[GraphEntry, ...] | None


@dataclass(frozen=True)
class Segment:
    """A decoded segment: the segment numbers it covers and its lines."""

    first: int | None
    lines: list[DocumentLine]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _line(line: DocumentLine) -> str:
    if line.chunks is None:
        return _json({"d": line.document_id})
    return _json(
        {
            "d": line.document_id,
            "c": [
                {
                    "i": c.id,
                    "m": c.metadata,
                    "e": c.entities,
                    "t": c.titles,
                    "n": c.neighbours,
                    "s": c.similarities,
                    "g": c.generation,
                }
                for c in line.chunks
            ],
        }
    )


def encode(settings: GraphSettings, lines: Iterable[DocumentLine], first: int | None = None) -> bytes:
    """A segment of ``lines``; ``first`` when it merges segments ``first`` onwards."""
    header = {"format": FORMAT_VERSION, "settings": settings.graph_identity(), "first": first}
    text = "\n".join([_json(header), *map(_line, lines)])
    return zlib.compress(text.encode(), 1)


def _entry(document_id: str, c: dict[str, Any]) -> GraphEntry:
    return GraphEntry(
        c["i"], document_id, c["m"], tuple(c["e"]), tuple(c["t"]), tuple(c["n"]), tuple(c["s"]), c["g"]
    )


def decode(data: bytes, settings: GraphSettings, where: str) -> Segment:
    """Read a segment written by :func:`encode` with these settings; ``where`` names it in errors."""
    try:
        header_text, _, body = zlib.decompress(data).decode().partition("\n")
        header = json.loads(header_text)
        if header.get("format") != FORMAT_VERSION:
            raise GraphStateError(f"{where} has format {header.get('format')}, expected {FORMAT_VERSION}")
        lines = []
        for text in body.splitlines():
            record = json.loads(text)
            chunks = record.get("c")
            document_id = record["d"]
            lines.append(
                DocumentLine(
                    document_id, None if chunks is None else tuple(_entry(document_id, c) for c in chunks)
                )
            )
    except GraphStateError:
        raise
    except (zlib.error, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError) as error:
        raise GraphStateError(f"{where} is not a readable graph segment ({error})") from None
    if header.get("settings") != settings.graph_identity():
        raise GraphStateError(
            f"{where} was built with {header.get('settings')}, not {settings.graph_identity()}"
        )
    first = header.get("first")
    return Segment(int(first) if first is not None else None, lines)


def merge(settings: GraphSettings, segments: Sequence[bytes], first: int, where: str) -> bytes:
    """Consecutive segments as one segment covering them from ``first``: each document's last
    line, in order of first mention. Lines are kept as text (only each one's document id is
    read), so a merge holds the segments' text, not their chunks as objects."""
    decoder = json.JSONDecoder()
    last: dict[str, str] = {}
    for n, data in enumerate(segments):
        try:
            header_text, _, body = zlib.decompress(data).decode().partition("\n")
            if json.loads(header_text).get("settings") != settings.graph_identity():
                raise GraphStateError(f"{where}: segment {n + 1} of the merge has other settings")
            for line in body.splitlines():
                document_id, _ = decoder.raw_decode(line, len('{"d":'))
                last[document_id] = line
        except (zlib.error, UnicodeDecodeError, ValueError) as error:
            raise GraphStateError(f"{where} is not a readable graph segment ({error})") from None
    header = {"format": FORMAT_VERSION, "settings": settings.graph_identity(), "first": first}
    return zlib.compress("\n".join([_json(header), *last.values()]).encode(), 1)


def legacy_lines(data: bytes, settings: GraphSettings, where: str) -> list[DocumentLine]:
    """A format-1 ``graph.npz`` (the whole graph as one blob) read as one line per document."""
    try:
        with np.load(io.BytesIO(data)) as stored:
            arrays = {name: stored[name] for name in stored.files if name != "vectors"}
        header = json.loads(arrays["header"].tobytes())
    except Exception as error:  # numpy raises many kinds on a damaged file
        raise GraphStateError(f"{where} is not a readable graph ({error})") from None
    if header.get("format") != LEGACY_FORMAT:
        raise GraphStateError(f"{where} has format {header.get('format')}, expected {LEGACY_FORMAT}")
    if header["settings"] != settings.graph_identity():
        raise GraphStateError(f"{where} was built with {header['settings']}, not {settings.graph_identity()}")
    ids: list[str | None] = header["ids"]
    keys: list[str] = header["entities"]
    live = [slot for slot, chunk_id in enumerate(ids) if chunk_id is not None]
    order = np.argsort(arrays["pair_slots"], kind="stable")
    pair_slots, pair_entities = arrays["pair_slots"][order], arrays["pair_entities"][order]
    counts = np.bincount(pair_slots, minlength=len(ids))[live]
    entities = np.split(pair_entities, np.cumsum(counts)[:-1]) if live else []
    title_counts = arrays["title_counts"]
    titles = np.split(arrays["titles"], np.cumsum(title_counts)[:-1]) if live else []
    knn, knn_sim = arrays.get("knn"), arrays.get("knn_sim")
    documents: dict[str, list[GraphEntry]] = {}
    for n, slot in enumerate(live):
        neighbours: tuple[str, ...] = ()
        similarities: tuple[float, ...] = ()
        if knn is not None and knn_sim is not None and slot < len(knn):
            row = [(ids[int(z)], float(s)) for z, s in zip(knn[slot], knn_sim[slot], strict=True) if z >= 0]
            neighbours = tuple(str(z) for z, _ in row if z is not None)
            similarities = tuple(round(s, SIMILARITY_DECIMALS) for z, s in row if z is not None)
        document_id = header["documents"][n]
        documents.setdefault(document_id, []).append(
            GraphEntry(
                str(ids[slot]),
                document_id,
                header["metadata"][n],
                tuple(keys[int(e)] for e in entities[n]),
                tuple(keys[int(e)] for e in titles[n]),
                neighbours,
                similarities,
            )
        )
    return [DocumentLine(d, tuple(chunks)) for d, chunks in documents.items()]
