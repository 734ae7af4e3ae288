"""The reader contract: turn one file into documents (text plus metadata) a knowledge base can chunk.

A plugin registers readers through ``register_readers``, each for the file suffixes it
reads. ``toolkernel kb ingest`` walks a source, picks the reader registered for each file's
suffix (a file without a suffix goes to the reader registered for ``""`` when its content
is text) and chunks what it yields. Reading is CPU- and disk-bound, so ``read`` is an
ordinary synchronous call; it runs one file at a time.

A reader raises when a file cannot be read at all (corrupt, encrypted, a parser missing):
the file is skipped with the exception's one-line message and ingestion goes on. A
reader that reads records (a ``.jsonl`` corpus) yields :class:`Skipped` for one bad
record and goes on with the rest. :class:`MissingDependency` says which package to install.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "MissingDependency",
    "ReadDocument",
    "Reader",
    "ReaderFunction",
    "Skipped",
]


@dataclass(frozen=True, slots=True)
class ReadDocument:
    """One document read from a file.

    ``kind`` tells the ``auto`` chunker how to cut the text: ``markdown`` (headings make
    each chunk's header path), ``text``, ``json``, or ``code`` with the tree-sitter grammar
    in ``metadata["language"]``. ``metadata`` holds scalars or lists of scalars (a title,
    page numbers, a sheet name); the knowledge base adds ``path``, ``kind`` and ``mtime``.
    ``id`` is ``None`` for the file itself (its id is its path in the source); a file of
    records gives each record's own id. ``page_starts`` are the offsets in ``text`` where
    pages 1, 2, ... begin (a PDF): each chunk then gets ``page`` and ``last_page`` metadata.
    """

    text: str
    kind: str = "text"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    page_starts: Sequence[int] = ()


@dataclass(frozen=True, slots=True)
class Skipped:
    """A part of a file that was left out (``where``: a line, a sheet, a record), and why."""

    where: str
    reason: str


class MissingDependency(ImportError):
    """A reader needs a package that is not installed; the message says what to install."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"reading {what} needs {install}")
        self.install = install


@runtime_checkable
class Reader(Protocol):
    """Reads one file into documents."""

    def read(self, path: Path) -> Iterable[ReadDocument | Skipped]:
        """The documents of the file at ``path``; raise if none can be read."""


ReaderFunction = Callable[[Path], Iterable[ReadDocument | Skipped]]
"""``read(path)`` as a plain function: what ``register_readers`` accepts beside a :class:`Reader`."""
