"""EPUB books, read with the standard library's zipfile and the HTML main-content reader.

An EPUB is a zip of XHTML chapters; its package file (``.opf``, found through
``META-INF/container.xml``) gives the title and the reading order (the spine). Each
chapter goes through the same extraction as an HTML page, and the book is one markdown
document in spine order. (EbookLib is AGPL, so it is not used.)
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkernel.readers import ReadDocument
from toolkernel_rag.readers.html import html_to_markdown

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"


def read_epub(path: Path) -> Iterator[ReadDocument]:
    """The chapters of an EPUB in reading order, as one markdown document."""
    from lxml import etree  # type: ignore[import-untyped]

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    with zipfile.ZipFile(path) as book:
        try:
            container = etree.fromstring(book.read("META-INF/container.xml"), parser)
        except KeyError:
            raise ValueError("not an EPUB: no META-INF/container.xml") from None
        rootfile = container.find(f".//{_CONTAINER}rootfile")
        if rootfile is None or not rootfile.get("full-path"):
            raise ValueError("not an EPUB: container.xml names no package file")
        opf_path = str(rootfile.get("full-path"))
        package = etree.fromstring(book.read(opf_path), parser)
        base = posixpath.dirname(opf_path)
        manifest = {
            item.get("id"): item.get("href")
            for item in package.iter(f"{_OPF}item")
            if item.get("id") and item.get("href")
        }
        chapters: list[str] = []
        for itemref in package.iter(f"{_OPF}itemref"):
            href = manifest.get(itemref.get("idref"))
            if not href:
                continue
            text, _ = html_to_markdown(book.read(posixpath.normpath(posixpath.join(base, href))))
            if text.strip():
                chapters.append(text)
    meta: dict[str, Any] = {"chapters": len(chapters)}
    for key, tag in (("title", "title"), ("author", "creator"), ("language", "language")):
        node = package.find(f".//{_DC}{tag}")
        if node is not None and (node.text or "").strip():
            meta[key] = (node.text or "").strip()
    yield ReadDocument("\n\n".join(chapters), "markdown", meta)
