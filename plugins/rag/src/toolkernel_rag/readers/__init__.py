"""The file readers toolkernel-rag registers through ``register_readers``, one module per family.

``text`` (plain text in any encoding, markdown, files without a suffix), ``html`` (main
content), ``structured`` (JSON, JSON Lines corpora, YAML, TOML, XML, CSV, notebooks),
``office`` (docx, pptx, xlsx: the ``[office]`` extra), ``epub``, ``pdf`` and ``code``.
Each reader is a function ``read(path)`` yielding :class:`toolkernel.readers.ReadDocument` s;
the table below says which suffixes each reads.
"""

from __future__ import annotations

from toolkernel_rag.readers.code import LANGUAGES

BUILTIN: dict[str, tuple[str, tuple[str, ...]]] = {
    "text": ("toolkernel_rag.readers.text:read_text", (".txt", ".text", ".rst", ".log", "")),
    "markdown": ("toolkernel_rag.readers.text:read_markdown", (".md", ".markdown", ".mdx")),
    "html": ("toolkernel_rag.readers.html:read_html", (".html", ".htm", ".xhtml")),
    "json": ("toolkernel_rag.readers.structured:read_json", (".json",)),
    "jsonl": ("toolkernel_rag.readers.structured:read_records", (".jsonl",)),
    "yaml": ("toolkernel_rag.readers.structured:read_yaml", (".yaml", ".yml")),
    "toml": ("toolkernel_rag.readers.structured:read_toml", (".toml",)),
    "xml": ("toolkernel_rag.readers.structured:read_xml", (".xml",)),
    "csv": ("toolkernel_rag.readers.structured:read_csv", (".csv", ".tsv")),
    "notebook": ("toolkernel_rag.readers.structured:read_notebook", (".ipynb",)),
    "docx": ("toolkernel_rag.readers.office:read_docx", (".docx",)),
    "pptx": ("toolkernel_rag.readers.office:read_pptx", (".pptx",)),
    "xlsx": ("toolkernel_rag.readers.office:read_xlsx", (".xlsx",)),
    "epub": ("toolkernel_rag.readers.epub:read_epub", (".epub",)),
    "pdf": ("toolkernel_rag.readers.pdf:read_pdf", (".pdf",)),
    "code": ("toolkernel_rag.readers.code:read_code", tuple(LANGUAGES)),
}
"""Reader name -> (``module:function``, the suffixes it reads)."""
