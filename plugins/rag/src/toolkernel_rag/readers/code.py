"""Source code: the file as written, with its language, so the code chunker cuts at syntax boundaries.

The language names a tree-sitter grammar (``tree-sitter-<language>`` on PyPI; Python's is
a dependency, the others come with ``pip install 'toolkernel-rag[code]'``). Without the
grammar the file is still read, as plain text, chunked by paragraphs and lines.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

from toolkernel.readers import ReadDocument
from toolkernel_rag.readers.text import read_text_file

LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
}
"""File suffix -> tree-sitter language."""


def grammar_module(language: str) -> str:
    """The module that holds ``language``'s grammar (TSX ships inside tree-sitter-typescript)."""
    return "tree_sitter_typescript" if language == "tsx" else f"tree_sitter_{language}"


def read_code(path: Path) -> Iterator[ReadDocument]:
    """A source file, kind ``code`` with ``language`` metadata (``text`` when no grammar is installed)."""
    language = LANGUAGES[path.suffix.lower()]
    text = read_text_file(path)
    installed = importlib.util.find_spec(grammar_module(language)) is not None
    yield ReadDocument(text, "code" if installed else "text", {"language": language})
