"""PDF text with pypdf (BSD), page by page: each chunk learns the pages it comes from.

pypdf logs a WARNING for each flaw it meets (``EOF marker not found``); a file it cannot read
is already reported by ingestion's one-line skip, and a file it recovers from goes in, so
its warnings are held back unless whoever runs the program set pypdf's log level.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkernel.readers import ReadDocument


def read_pdf(path: Path) -> Iterator[ReadDocument]:
    """The text of every page; ``page_starts`` says where each page begins in it."""
    from pypdf import PdfReader

    pypdf_log = logging.getLogger("pypdf")
    if pypdf_log.level == logging.NOTSET:
        pypdf_log.setLevel(logging.ERROR)
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
