"""PDF text with pypdf (BSD), page by page: each chunk learns the pages it comes from."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkernel.readers import ReadDocument


def read_pdf(path: Path) -> Iterator[ReadDocument]:
    """The text of every page; ``page_starts`` says where each page begins in it."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    if reader.is_encrypted:
        raise ValueError("the PDF is encrypted")
    parts: list[str] = []
    starts: list[int] = []
    position = 0
    for page in reader.pages:
        text = (page.extract_text() or "").strip()
        starts.append(position)
        parts.append(text)
        position += len(text) + 2
    meta: dict[str, Any] = {"pages": len(parts)}
    info = reader.metadata
    if info is not None and info.title:
        meta["title"] = str(info.title)
    yield ReadDocument("\n\n".join(parts), "text", meta, page_starts=tuple(starts))
