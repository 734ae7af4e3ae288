"""Where a knowledge base lives on disk and what its manifest records.

A knowledge base is one directory::

    KB_DIR/
      manifest.json        # embedder, chunker, store, sparse index: fixed when the KB is created
      catalog.sqlite       # documents (hash, metadata, text) and chunks (text, metadata, vector, terms)
      store/               # the vector store's files when the store is embedded (Qdrant Edge)
      store.seal.json      # those files' sizes and times as the writer left them (toolkernel_rag.store_seal)
      sparse/              # the BM25 index, rebuilt from the catalog's terms when stale
      extensions/<name>/   # state each knowledge-base extension keeps for itself

``--kb`` takes a path when it contains a ``/`` (or is ``.``/``..``); a bare name lives in the
knowledge-base home: ``--home``, else ``$TOOLKERNEL_KB_HOME``, else ``[plugins.rag] home``, else
``$XDG_DATA_HOME/toolkernel/kb`` (or ``~/.local/share/toolkernel/kb``). A home that is a
``postgresql://`` URL keeps each knowledge base in a schema of that database instead
(:mod:`toolkernel_rag.postgres`).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolkernel.errors import ConfigError

MANIFEST = "manifest.json"
CATALOG = "catalog.sqlite"
STORE_DIR = "store"
SPARSE_DIR = "sparse"
EXTENSIONS_DIR = "extensions"
FORMAT = 1
"""Version of the on-disk layout; a knowledge base written by a newer layout is refused."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class KBError(ConfigError):
    """A knowledge base cannot be opened or used as asked; the message says why and how to fix it."""


def kb_home(home: str | None = None, configured: str | None = None) -> str:
    """Where knowledge bases addressed by bare name live: a directory, or a ``postgresql://`` URL.

    ``home`` (``--home``) when given, else ``$TOOLKERNEL_KB_HOME``, else ``configured``
    (``[plugins.rag] home``), else the data directory.
    """
    for candidate in (home, os.environ.get("TOOLKERNEL_KB_HOME"), configured):
        if candidate:
            return candidate
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data) / "toolkernel" / "kb")


def is_database_url(text: str) -> bool:
    """Whether a knowledge-base home names a PostgreSQL database rather than a directory."""
    return text.startswith(("postgresql://", "postgres://"))


@dataclass(frozen=True)
class KBLocation:
    """Where one knowledge base lives: a directory, or a schema of a PostgreSQL database."""

    name: str
    directory: Path | None = None
    url: str | None = None

    def __str__(self) -> str:
        if self.directory is not None:
            return str(self.directory)
        from toolkernel_rag.postgres.connection import describe

        return f"{describe(self.url or '')} (knowledge base {self.name})"


def resolve_location(
    name_or_path: str | os.PathLike[str], home: str | None = None, configured: str | None = None
) -> KBLocation:
    """The knowledge base ``--kb`` names: a path when it has a ``/``, else a name in :func:`kb_home`."""
    text = os.fspath(name_or_path)
    if "/" in text or os.sep in text or text in (".", ".."):
        directory = Path(text).expanduser().resolve()
        return KBLocation(kb_name(directory), directory=directory)
    if not _NAME.match(text):
        raise KBError(
            f"knowledge base name {text!r} is not valid: 1-63 characters from A-Z a-z 0-9 '_' '-' "
            "(or give a path containing '/')"
        )
    where = kb_home(home, configured)
    if is_database_url(where):
        return KBLocation(text, url=where)
    return KBLocation(text, directory=Path(where).expanduser() / text)


def resolve_kb(name_or_path: str | os.PathLike[str], home: str | None = None) -> Path:
    """A knowledge base directory (see :func:`resolve_location`); a database home is an error here."""
    location = resolve_location(name_or_path, home)
    if location.directory is None:
        raise KBError(f"knowledge base {location} is in a database, not a directory")
    return location.directory


def kb_name(directory: Path) -> str:
    """A knowledge base's name: its directory's name made index-safe (used for ``kb://NAME/`` URIs)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", directory.name).strip("-") or "kb"
    return name[:63]


class EmbedderSpec(BaseModel):
    """The embedder every vector of the knowledge base came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="provider/model, e.g. local/minilm-l6-int8")
    dimension: int = Field(gt=0)
    options: dict[str, Any] = Field(default_factory=dict, description="Options passed to the factory.")


class StoreSpec(BaseModel):
    """The vector store that holds the dense vectors, and the index inside it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="A registered vector store, e.g. qdrant")
    index: str = Field(description="The index (collection/table) inside the store.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Factory options; a relative 'path' is relative to the knowledge base directory.",
    )


class SparseSpec(BaseModel):
    """The BM25 index kept beside the vectors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = "bm25s"
    k1: float = Field(1.5, description="bm25s's default, as in the reference BM25 lines of the benchmarks.")
    b: float = 0.75
    language: str = Field("english", description="Snowball stemmer and stop-word list.")


class Manifest(BaseModel):
    """What a knowledge base was built with; fixed at creation, checked on every open."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    name: str
    created_at: float = Field(default_factory=time.time)
    embedder: EmbedderSpec
    chunker: dict[str, Any] = Field(description="The chunker's describe(): its name and every option.")
    store: StoreSpec
    sparse: SparseSpec = Field(default_factory=SparseSpec)


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest of the knowledge base in ``directory``, or ``None`` when there is none."""
    path = directory / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise KBError(f"knowledge base {str(directory)!r}: {MANIFEST} is unreadable: {exc}") from None
    if isinstance(raw, dict) and isinstance(raw.get("format"), int) and raw["format"] > FORMAT:
        raise KBError(
            f"knowledge base {str(directory)!r} has layout format {raw['format']}; "
            f"this toolkernel-rag reads format {FORMAT} or older: upgrade toolkernel-rag"
        )
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'manifest'}: {e['msg']}" for e in exc.errors()
        )
        raise KBError(f"knowledge base {str(directory)!r}: {MANIFEST} is invalid: {problems}") from None


def write_manifest(directory: Path, manifest: Manifest) -> None:
    """Write the manifest atomically (a crash leaves the old one or the new one, never half)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(manifest.model_dump_json(indent=2))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, directory / MANIFEST)
