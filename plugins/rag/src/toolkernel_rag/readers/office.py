"""Word, PowerPoint and Excel files (``pip install 'toolkernel-rag[office]'``).

A ``.docx`` becomes markdown: paragraphs in "Heading N" styles become headings (so chunks
carry their header path), list paragraphs list items, tables rows of ``column: value``
pairs. A ``.pptx`` gives one section per slide (``## Slide N: title``) with its text
frames, tables and speaker notes. An ``.xlsx`` gives one section per sheet whose rows are
kept with the header row, as CSV files are. Core properties (title, author) become metadata.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from toolkernel.readers import MissingDependency, ReadDocument

_INSTALL = "pip install 'toolkernel-rag[office]'"


def _need(module: str, package: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(what, f"{package}: {_INSTALL}") from None


def _properties(core: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for key in ("title", "author", "subject"):
        value = getattr(core, key, None)
        if isinstance(value, str) and value.strip():
            meta[key] = value.strip()
    return meta


def _rows(header: list[str], rows: list[list[str]]) -> list[str]:
    """Rows as ``column: value`` pairs joined by ``; `` (empty cells left out)."""
    names = [h or f"column {i + 1}" for i, h in enumerate(header)]
    out = []
    for row in rows:
        cells = [
            f"{names[i] if i < len(names) else f'column {i + 1}'}: {value}"
            for i, value in enumerate(row)
            if value
        ]
        if cells:
            out.append("; ".join(cells))
    return out


def read_docx(path: Path) -> Iterator[ReadDocument]:
    """A Word document as markdown, headings from the "Heading N" and "Title" styles."""
    docx = _need("docx", "python-docx", ".docx files")
    with path.open("rb") as file:  # a missing file is an OSError, not the library's own
        document = docx.Document(file)
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = item.text.strip()
            if not text:
                continue
            style = (item.style.name if item.style is not None else "") or ""
            if style == "Title":
                blocks.append(f"# {text}")
            elif style.startswith("Heading ") and style[8:].isdigit():
                blocks.append("#" * min(6, int(style[8:]) + 1) + " " + text)
            elif style.startswith("List"):
                blocks.append(f"- {text}")
            else:
                blocks.append(text)
        elif isinstance(item, Table):
            cells = [[c.text.strip() for c in row.cells] for row in item.rows]
            if cells:
                blocks.append("\n".join(_rows(cells[0], cells[1:])))
    meta = _properties(document.core_properties)
    if "title" not in meta:
        first = next((b for b in blocks if b.startswith("#")), None)
        if first:
            meta["title"] = first.lstrip("#").strip()
    yield ReadDocument("\n\n".join(blocks), "markdown", meta)


def read_pptx(path: Path) -> Iterator[ReadDocument]:
    """A presentation: a ``## Slide N: title`` section per slide, its text, tables and notes."""
    pptx = _need("pptx", "python-pptx", ".pptx files")
    with path.open("rb") as file:
        presentation = pptx.Presentation(file)
    sections: list[str] = []
    for number, slide in enumerate(presentation.slides, start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        title_id = title_shape.shape_id if title_shape is not None else None
        lines: list[str] = []
        for shape in slide.shapes:
            if shape.shape_id == title_id:
                continue
            if shape.has_text_frame:
                lines.extend(p.text.strip() for p in shape.text_frame.paragraphs if p.text.strip())
            elif getattr(shape, "has_table", False):
                cells = [[c.text.strip() for c in row.cells] for row in shape.table.rows]
                if cells:
                    lines.extend(_rows(cells[0], cells[1:]))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                lines.append(f"Notes: {notes}")
        heading = f"## Slide {number}: {title}" if title else f"## Slide {number}"
        sections.append("\n\n".join([heading, *lines]))
    meta = _properties(presentation.core_properties)
    meta["slides"] = len(sections)
    yield ReadDocument("\n\n".join(sections), "markdown", meta)


def read_xlsx(path: Path) -> Iterator[ReadDocument]:
    """A workbook: a ``## sheet`` section per sheet, each row kept with the header row."""
    openpyxl = _need("openpyxl", "openpyxl", ".xlsx files")
    with path.open("rb") as file:
        sections, meta = _workbook(openpyxl.load_workbook(file, read_only=True, data_only=True))
    yield ReadDocument("\n\n".join(sections), "markdown", meta)


def _workbook(workbook: Any) -> tuple[list[str], dict[str, Any]]:
    try:
        sections: list[str] = []
        for sheet in workbook.worksheets:
            rows = [
                ["" if v is None else str(v).strip() for v in row]
                for row in sheet.iter_rows(values_only=True)
            ]
            rows = [r for r in rows if any(r)]
            if not rows:
                continue
            sections.append("\n\n".join([f"## {sheet.title}", "\n".join(_rows(rows[0], rows[1:]))]))
        meta = _properties(workbook.properties)
        meta["sheets"] = [s.title for s in workbook.worksheets]
    finally:
        workbook.close()
    return sections, meta
