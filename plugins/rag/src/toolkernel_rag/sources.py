"""Reading sources into documents, each file through the reader registered for its suffix.

A ``SOURCE`` is a directory (walked; hidden entries skipped) or a file. Every file goes to
the reader that ``register_readers`` put on its suffix (toolkernel-rag's own readers
register the same way: text, markdown, HTML, JSON, JSON Lines corpora, YAML, TOML, XML,
CSV, notebooks, Office files, EPUB, PDF, source code); a file without a suffix goes to the
reader of ``""`` when its content is text. A file is one document whose id is its path
relative to the source directory (a single file: its name); a file of records (``.jsonl``)
gives one document per record with the record's id. The knowledge base qualifies these ids
with the source's key (:func:`qualified_id`), so they are unique across sources. A file
that cannot be read is reported with a one-line reason and skipped; files of types no
reader knows are reported as one line per directory walk.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkernel.readers import MissingDependency, ReadDocument, Skipped

if TYPE_CHECKING:
    from toolkernel.registries import ReaderRegistry


@dataclass(slots=True)
class Document:
    """A document read from a source, ready to chunk."""

    id: str
    text: str
    kind: str
    metadata: dict[str, Any]
    source: str
    hash: str = ""
    page_starts: Sequence[int] = ()
    """Where pages 1, 2, ... begin in ``text`` (PDF), for each chunk's ``page`` metadata."""
    record: bool = False
    """A record of a file of records: ``id`` is the record's own, not a path."""

    def __post_init__(self) -> None:
        if not self.hash:
            stable = {k: v for k, v in self.metadata.items() if k != "mtime"}
            digest = hashlib.sha256(self.text.encode("utf-8"))
            digest.update(json.dumps(stable, sort_keys=True, ensure_ascii=False).encode("utf-8"))
            self.hash = digest.hexdigest()


@dataclass(slots=True)
class SourceProblem:
    """A file or record that was skipped, and why."""

    where: str
    reason: str


def builtin_readers() -> ReaderRegistry:
    """A registry holding only toolkernel-rag's own readers (for use without a kernel)."""
    from toolkernel.registries import ReaderRegistry
    from toolkernel_rag.readers.builtin import register_builtin_readers

    registry = ReaderRegistry()
    register_builtin_readers(registry)
    return registry


@dataclass(slots=True)
class SourceReader:
    """Yields the documents of one ``SOURCE`` argument; problems are collected, never raised."""

    source: str
    readers: ReaderRegistry = field(default_factory=builtin_readers)
    problems: list[SourceProblem] = field(default_factory=list)
    _walk_reported: bool = field(default=False, init=False, repr=False)
    _location: str = field(default="", init=False, repr=False)
    _is_file: bool | None = field(default=None, init=False, repr=False)

    @property
    def location(self) -> str:
        """The source as the catalog records it: its absolute path, whatever the working directory.

        Resolved once: every document of the source is stamped with it.
        """
        if not self._location:
            self._location = str(Path(self.source).expanduser().resolve())
        return self._location

    def qualified_id(self, source_key: str, document: Document) -> str:
        """``document``'s id in a knowledge base, given this source's key (see :func:`qualified_id`)."""
        if self._is_file is None:
            self._is_file = Path(self.location).is_file()
        return qualified_id(source_key, document.id, not document.record and self._is_file)

    def files(self) -> Iterator[tuple[Path, str]]:
        """The files this source holds that some reader reads, with their relative paths, in
        path order.

        A generator that lists one directory at a time, so a walk holds one directory's names,
        never every path of the source (a source walked twice, to count then to read, holds
        neither list). Files of types no reader knows are reported once per reader, one line
        per source, on the first walk that finishes.
        """
        root = Path(self.location)
        if not root.exists():
            self._report(SourceProblem(self.source, "does not exist"))
            return
        if root.is_file():
            yield root, root.name
            return
        unsupported: dict[str, int] = {}
        for path in _walk(root):
            if self.readers.for_filename(path.name) is None:
                # One line per directory walk, not one per image or lock file.
                suffix = path.suffix.lower() or "(none)"
                unsupported[suffix] = unsupported.get(suffix, 0) + 1
                continue
            yield path, path.relative_to(root).as_posix()
        if unsupported:
            kinds = ", ".join(f"{n} {s}" for s, n in sorted(unsupported.items()))
            self._report(SourceProblem(str(root), f"unsupported file types skipped: {kinds}"))
        self._walk_reported = True

    def _report(self, problem: SourceProblem) -> None:
        """A problem of the walk itself, recorded by the first walk only."""
        if not self._walk_reported:
            self.problems.append(problem)
        self._walk_reported = True

    def count(self) -> int:
        """How many documents this source holds, without reading them: one per file, one per
        non-empty line of a ``.jsonl`` file. Walks the source without keeping the walk."""
        total = 0
        for path, _ in self.files():
            if path.suffix.lower() == ".jsonl":
                with path.open("rb") as lines:
                    total += sum(1 for line in lines if line.strip())
            else:
                total += 1
        return total

    def walked(self) -> list[tuple[Path, str]]:
        """Every file of the source at once, for an engine that reads them elsewhere (one
        :meth:`read` each): that engine plans with the whole list."""
        return list(self.files())

    def documents(self) -> Iterator[Document]:
        """The documents of every file, read as the walk reaches it."""
        for path, relative in self.files():
            yield from self.read(path, relative)

    def read(self, path: Path, relative: str) -> Iterator[Document]:
        """The documents of one file; a file that cannot be read is a problem, not an exception."""
        from toolkernel_rag.readers.text import NotText

        name = self.readers.for_filename(path.name)
        if name is None:
            self.problems.append(SourceProblem(str(path), f"unsupported file type {path.suffix or '(none)'}"))
            return
        try:
            items = list(self.readers.get(name).read(path))
        except NotText as exc:
            self.problems.append(SourceProblem(str(path), str(exc)))
            return
        except MissingDependency as exc:
            self.problems.append(SourceProblem(str(path), str(exc)))
            return
        except Exception as exc:
            self.problems.append(SourceProblem(str(path), _one_line(f"{type(exc).__name__}: {exc}")))
            return
        mtime = path.stat().st_mtime
        for item in items:
            if isinstance(item, Skipped):
                self.problems.append(SourceProblem(item.where, _one_line(item.reason)))
                continue
            if not isinstance(item, ReadDocument):
                self.problems.append(
                    SourceProblem(
                        str(path), f"reader {name!r} yielded a {type(item).__name__}, not a ReadDocument"
                    )
                )
                continue
            if not item.text.strip():
                self.problems.append(
                    SourceProblem(str(path) if item.id is None else f"{path}: {item.id}", "no text")
                )
                continue
            yield self._document(path, relative, item, mtime, name)

    def _document(self, path: Path, relative: str, item: ReadDocument, mtime: float, reader: str) -> Document:
        if item.id is not None:  # a record: its own id, the file's name as its path
            meta = {**item.metadata, "path": path.name}
            return Document(item.id, item.text, item.kind, meta, self.location, record=True)
        meta = {"path": relative, **item.metadata, "mtime": mtime, "kind": reader}
        meta.setdefault("title", _title(item.text, item.kind) or path.stem)
        return Document(
            relative, item.text, item.kind, meta, self.location, page_starts=tuple(item.page_starts)
        )


def qualified_id(source_key: str, relative: str, whole_source: bool) -> str:
    """A document's id in a knowledge base: ``<source key>/<relative id>``.

    A document that is its whole source (a single file given as the source) is the key alone.
    """
    return source_key if whole_source else f"{source_key}/{relative}"


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _walk(root: Path) -> Iterator[Path]:
    """The files under ``root`` in the order of their sorted paths, listing one directory at a
    time; hidden entries and ``__pycache__`` skipped, symbolic links to directories not followed
    (as ``os.walk`` does)."""
    try:
        with os.scandir(root) as listing:
            entries = sorted(
                (entry.name, entry.is_dir(), entry.is_symlink())
                for entry in listing
                if not entry.name.startswith(".")
            )
    except OSError:
        return
    for name, is_dir, is_link in entries:
        if not is_dir:
            yield root / name
        elif not is_link and name != "__pycache__":
            yield from _walk(root / name)


def _title(text: str, kind: str) -> str | None:
    """The first markdown heading of a markdown document, else ``None``."""
    if kind != "markdown":
        return None
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            if title:
                return title
    return None
