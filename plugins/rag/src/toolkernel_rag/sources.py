"""Reading sources into documents: files (.md .txt .rst .html .pdf .json .jsonl .py) and BEIR corpora.

A ``SOURCE`` is a directory (walked; hidden entries skipped), a file, or a ``.jsonl`` file
of records. A record with a ``text`` field is one document whose id is its ``id`` (BEIR's
``corpus.jsonl``: ``_id``/``id``, ``title``, ``text``); other fields that are scalars or lists
of scalars become metadata. A file is one document whose id is its path relative to the
source directory (a single file: its name); the knowledge base qualifies these ids with the
source's key (:func:`qualified_id`), so they are unique across sources. Markdown front matter
(YAML between ``---`` lines) becomes metadata. A file that cannot be read is reported and
skipped; files of other types met in a directory walk are reported as one line per directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".rst": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".json": "json",
    ".jsonl": "jsonl",
    ".py": "code",
}
"""File suffixes read, and the kind of document each holds."""


@dataclass(slots=True)
class Document:
    """A document read from a source, ready to chunk."""

    id: str
    text: str
    kind: str
    metadata: dict[str, Any]
    source: str
    hash: str = ""

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


@dataclass(slots=True)
class SourceReader:
    """Yields the documents of one ``SOURCE`` argument; problems are collected, never raised."""

    source: str
    problems: list[SourceProblem] = field(default_factory=list)

    @property
    def location(self) -> str:
        """The source as the catalog records it: its absolute path, whatever the working directory."""
        return str(Path(self.source).expanduser().resolve())

    @property
    def single_document(self) -> bool:
        """A single file that is one document (not a ``.jsonl`` of records): its id is the source key."""
        path = Path(self.location)
        return path.suffix.lower() != ".jsonl" and path.is_file()

    def documents(self) -> Iterator[Document]:
        root = Path(self.location)
        if not root.exists():
            self.problems.append(SourceProblem(self.source, "does not exist"))
            return
        if root.is_file():
            yield from self._file(root, root.name)
            return
        unsupported: dict[str, int] = {}
        for path in sorted(_walk(root)):
            if path.suffix.lower() not in SUFFIXES:
                # One line per directory walk, not one per image or lock file.
                suffix = path.suffix.lower() or "(none)"
                unsupported[suffix] = unsupported.get(suffix, 0) + 1
                continue
            yield from self._file(path, path.relative_to(root).as_posix())
        if unsupported:
            kinds = ", ".join(f"{n} {s}" for s, n in sorted(unsupported.items()))
            self.problems.append(SourceProblem(str(root), f"unsupported file types skipped: {kinds}"))

    def _file(self, path: Path, relative: str) -> Iterator[Document]:
        kind = SUFFIXES.get(path.suffix.lower())
        if kind is None:
            self.problems.append(SourceProblem(str(path), f"unsupported file type {path.suffix or '(none)'}"))
            return
        try:
            if kind == "jsonl":
                yield from self._records(path)
                return
            text, meta = _read(path, kind)
        except Exception as exc:
            self.problems.append(SourceProblem(str(path), f"{type(exc).__name__}: {exc}"))
            return
        if not text.strip():
            self.problems.append(SourceProblem(str(path), "no text"))
            return
        meta = {"path": relative, **meta, "mtime": path.stat().st_mtime, "kind": kind}
        meta.setdefault("title", _title(text, kind) or path.stem)
        yield Document(relative, text, "markdown" if kind == "html" else kind, meta, self.location)

    def _records(self, path: Path) -> Iterator[Document]:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    self.problems.append(SourceProblem(where, f"not JSON: {exc}"))
                    continue
                if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                    self.problems.append(SourceProblem(where, "a record needs a string 'text' field"))
                    continue
                doc_id = record.get("_id", record.get("id"))
                if not isinstance(doc_id, str | int) or isinstance(doc_id, bool) or str(doc_id) == "":
                    self.problems.append(SourceProblem(where, "a record needs an 'id' (or '_id')"))
                    continue
                title = record.get("title")
                body = record["text"]
                # BEIR corpora embed "title. text"; the title is also metadata.
                text = f"{title}\n\n{body}" if isinstance(title, str) and title.strip() else body
                if not text.strip():
                    self.problems.append(SourceProblem(where, "no text"))
                    continue
                meta = {
                    k: v
                    for k, v in record.items()
                    if k not in ("_id", "id", "text") and _is_metadata_value(v)
                }
                meta["path"] = path.name
                yield Document(str(doc_id), text, "text", meta, self.location)


def qualified_id(source_key: str, relative: str, single_document: bool) -> str:
    """A document's id in a knowledge base: ``<source key>/<relative id>``; a one-file source's: the key."""
    return source_key if single_document else f"{source_key}/{relative}"


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            if not name.startswith("."):
                yield Path(dirpath) / name


def _read(path: Path, kind: str) -> tuple[str, dict[str, Any]]:
    if kind == "pdf":
        from pypdf import PdfReader

        reader = PdfReader(path)
        pages = [page.extract_text() or "" for page in reader.pages]
        meta: dict[str, Any] = {"pages": len(pages)}
        info = reader.metadata
        if info is not None and info.title:
            meta["title"] = str(info.title)
        return "\n\n".join(pages), meta
    raw = path.read_text(encoding="utf-8")
    if kind == "html":
        from toolkernel_rag.chunking import html_to_markdown

        text, title = html_to_markdown(raw)
        return text, {"title": title} if title else {}
    if kind == "json":
        json.loads(raw)  # reject malformed JSON here, with its position
        return raw, {}
    if kind == "markdown":
        return _front_matter(raw)
    return raw, {}


def _front_matter(raw: str) -> tuple[str, dict[str, Any]]:
    """Split YAML front matter off a markdown text; its scalar and list values become metadata."""
    if not raw.startswith("---\n"):
        return raw, {}
    end = raw.find("\n---", 4)
    if end < 0:
        return raw, {}
    import yaml  # type: ignore[import-untyped]

    try:
        data = yaml.safe_load(raw[4:end])
    except yaml.YAMLError as exc:
        raise ValueError(f"front matter is not valid YAML: {exc}") from None
    body = raw[end + 4 :].lstrip("-").lstrip("\n")
    if not isinstance(data, dict):
        return body, {}
    meta = {str(k): _plain(v) for k, v in data.items() if _is_metadata_value(_plain(v))}
    return body, meta


def _plain(value: Any) -> Any:
    """Dates and other YAML scalars as strings; lists element-wise."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool | dict):
        return value
    return str(value)


def _is_metadata_value(value: Any) -> bool:
    if isinstance(value, str | int | float | bool):
        return not (isinstance(value, float) and value != value)
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str | int | float | bool) for v in value)
    )


def _title(text: str, kind: str) -> str | None:
    """The first markdown heading (markdown and HTML), else ``None``."""
    if kind not in ("markdown", "html"):
        return None
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            if title:
                return title
    return None
