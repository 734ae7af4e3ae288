"""Structured files: JSON, JSON Lines corpora, YAML, TOML, XML, CSV/TSV and Jupyter notebooks.

Each is parsed first, so a corrupt file is refused with the parser's position rather than
indexed as noise. CSV rows keep their header: every row becomes ``column: value`` pairs on
one line, so a chunk cut anywhere still says what each value is. XML is parsed without
resolving entities or reaching the network. A notebook gives its markdown cells as they
are and its code cells fenced in the kernel's language; outputs are left out (they are
results, often large, rarely what is searched for).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkernel.readers import ReadDocument, Skipped
from toolkernel_rag.readers.text import is_metadata_value, read_text_file


def read_json(path: Path) -> Iterator[ReadDocument]:
    """A JSON file, checked, chunked by the json chunker (whole members)."""
    raw = read_text_file(path)
    json.loads(raw)  # reject malformed JSON here, with its position
    yield ReadDocument(raw, "json")


def read_records(path: Path) -> Iterator[ReadDocument | Skipped]:
    """A ``.jsonl`` corpus: each record with a ``text`` is a document with the record's ``id``.

    BEIR's ``corpus.jsonl`` (``_id``/``id``, ``title``, ``text``) reads as is: the title is
    put before the text and kept as metadata; other scalar fields become metadata.
    """
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                yield Skipped(where, f"not JSON: {exc}")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                yield Skipped(where, "a record needs a string 'text' field")
                continue
            doc_id = record.get("_id", record.get("id"))
            if not isinstance(doc_id, str | int) or isinstance(doc_id, bool) or str(doc_id) == "":
                yield Skipped(where, "a record needs an 'id' (or '_id')")
                continue
            title = record.get("title")
            body = record["text"]
            text = f"{title}\n\n{body}" if isinstance(title, str) and title.strip() else body
            if not text.strip():
                yield Skipped(where, "no text")
                continue
            meta = {
                k: v for k, v in record.items() if k not in ("_id", "id", "text") and is_metadata_value(v)
            }
            yield ReadDocument(text, "text", meta, id=str(doc_id))


def read_yaml(path: Path) -> Iterator[ReadDocument]:
    """YAML (every document of the stream checked); the text is indexed as written."""
    import yaml  # type: ignore[import-untyped]

    raw = read_text_file(path)
    try:
        for _ in yaml.safe_load_all(raw):
            pass
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {' '.join(str(exc).split())}") from None
    yield ReadDocument(raw, "text")


def read_toml(path: Path) -> Iterator[ReadDocument]:
    """TOML, checked; the text is indexed as written."""
    import tomllib

    raw = read_text_file(path)
    try:
        tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None
    yield ReadDocument(raw, "text")


def read_xml(path: Path) -> Iterator[ReadDocument]:
    """XML: one line per element with text, ``tag: text`` (attributes after the tag)."""
    from lxml import etree  # type: ignore[import-untyped]

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=False)
    try:
        root = etree.parse(str(path), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"not well-formed XML: {exc}") from None
    lines: list[str] = []
    for element in root.iter():
        if not isinstance(element.tag, str):
            continue  # comments and processing instructions
        tag = etree.QName(element).localname
        words = " ".join((element.text or "").split())
        attributes = " ".join(f'{etree.QName(k).localname}="{v}"' for k, v in element.attrib.items())
        if words or attributes:
            lines.append(f"{tag}{' ' + attributes if attributes else ''}: {words}".rstrip(": "))
    meta: dict[str, Any] = {"root": etree.QName(root).localname}
    yield ReadDocument("\n".join(lines), "text", meta)


def read_csv(path: Path) -> Iterator[ReadDocument]:
    """CSV or TSV with a header row: each row one line of ``column: value`` pairs."""
    raw = read_text_file(path)
    try:
        dialect: Any = csv.Sniffer().sniff(raw[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel_tab if path.suffix.lower() == ".tsv" else csv.excel
    rows = list(csv.reader(io.StringIO(raw), dialect))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise ValueError("no rows")
    header = [h.strip() or f"column {i + 1}" for i, h in enumerate(rows[0])]
    lines = []
    for row in rows[1:]:
        cells = [
            f"{header[i] if i < len(header) else f'column {i + 1}'}: {c.strip()}" for i, c in enumerate(row)
        ]
        lines.append("; ".join(c for c in cells if not c.endswith(": ")))
    meta = {"columns": header, "rows": len(rows) - 1}
    yield ReadDocument("\n".join(lines), "text", meta)


def read_notebook(path: Path) -> Iterator[ReadDocument]:
    """A Jupyter notebook: markdown cells as markdown, code cells fenced in the notebook's language."""
    try:
        notebook = json.loads(read_text_file(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a notebook (not JSON: {exc})") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError("not a notebook: no 'cells' list")
    info = (
        notebook.get("metadata", {}).get("language_info", {})
        if isinstance(notebook.get("metadata"), dict)
        else {}
    )
    language = str(info.get("name", "python")) if isinstance(info, dict) else "python"
    blocks: list[str] = []
    for cell in notebook["cells"]:
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if not text.strip():
            continue
        if cell.get("cell_type") == "markdown":
            blocks.append(text.strip())
        elif cell.get("cell_type") == "code":
            blocks.append(f"```{language}\n{text.strip()}\n```")
    meta = {"language": language, "cells": len(notebook["cells"])}
    yield ReadDocument("\n\n".join(blocks), "markdown", meta)
