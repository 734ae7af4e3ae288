"""Skills: directories of instructions and files a client loads when it needs them.

The ``io.modelcontextprotocol/skills`` extension (SEP-2640). A skill is a directory whose
root holds a ``SKILL.md`` that begins with YAML frontmatter naming it (``name``, which must
be the directory's name, and ``description``). A server offering skills answers
``skills/list`` and ``skills/get`` with one entry per skill (the ``SKILL.md`` URI, its
frontmatter, and every file's URI, SHA-256 digest and size, so clients can verify what
they read), serves the files through ``resources/read`` as ``skill://<name>/<path>``, and
lists a skill directory's children with ``resources/directory/read``.

A :class:`Skill` reads its directory once, when it is made: what is served is what was
there then, and the digests match it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath
from typing import Any

from toolkernel.errors import ConfigError, MissingDependencyError

__all__ = [
    "DIRECTORY_MIME",
    "MAX_BYTES",
    "MAX_FILES",
    "SKILLS_EXTENSION",
    "SKILL_MD",
    "Skill",
    "mime_type",
]

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
SKILL_MD = "SKILL.md"
DIRECTORY_MIME = "inode/directory"
MAX_FILES = 512
"""The most files one skill may hold (SEP-2640)."""
MAX_BYTES = 16 * 1024 * 1024
"""The most bytes one skill's files may add up to (SEP-2640)."""

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_FRONTMATTER = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.S)


class Skill:
    """One skill, read from ``directory`` (which holds ``SKILL.md`` at its root)."""

    def __init__(self, directory: str | Path) -> None:
        root = Path(directory)
        manifest = root / SKILL_MD
        if not manifest.is_file():
            raise ConfigError(f"skill {str(root)!r}: no {SKILL_MD} at its root")
        self.frontmatter = _frontmatter(manifest)
        name = self.frontmatter.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"skill {str(root)!r}: frontmatter name must be lowercase words joined by '-'")
        if not isinstance(self.frontmatter.get("description"), str) or not self.frontmatter["description"]:
            raise ConfigError(f"skill {str(root)!r}: frontmatter needs a non-empty description")
        if root.resolve().name != name:
            raise ConfigError(f"skill {str(root)!r}: its directory must be named after it ({name!r})")
        self.name: str = name
        self.description: str = self.frontmatter["description"]
        self.files: dict[str, bytes] = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts)
        }
        if len(self.files) > MAX_FILES:
            raise ConfigError(f"skill {name!r}: {len(self.files)} files, more than {MAX_FILES}")
        if sum(map(len, self.files.values())) > MAX_BYTES:
            raise ConfigError(f"skill {name!r}: its files add up to more than {MAX_BYTES} bytes")

    @property
    def base(self) -> str:
        """The skill's directory URI, ``skill://<name>``."""
        return f"skill://{self.name}"

    @property
    def uri(self) -> str:
        """The URI of its ``SKILL.md``."""
        return f"{self.base}/{SKILL_MD}"

    def entry(self) -> dict[str, Any]:
        """The skill as ``skills/list`` and ``skills/get`` describe it."""
        return {
            "uri": self.uri,
            "frontmatter": self.frontmatter,
            "resources": [
                {
                    "uri": f"{self.base}/{path}",
                    "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                }
                for path, data in self.files.items()
            ],
        }

    def read(self, uri: str) -> bytes | None:
        """The content of the file at ``uri``, or ``None`` when it is not one of this skill's files."""
        if not uri.startswith(self.base + "/"):
            return None
        return self.files.get(uri[len(self.base) + 1 :])

    def children(self, uri: str) -> list[dict[str, Any]] | None:
        """The direct children of the directory at ``uri``; ``None`` when it is not one of its directories."""
        relative = uri.rstrip("/")
        if relative != self.base and not relative.startswith(self.base + "/"):
            return None
        prefix = PurePosixPath(relative[len(self.base) + 1 :]) if relative != self.base else None
        files, directories = [], set()
        for path in self.files:
            parts = PurePosixPath(path).parts
            inside = parts[len(prefix.parts) :] if prefix else parts
            if prefix and parts[: len(prefix.parts)] != prefix.parts:
                continue
            if not inside:
                return None  # the URI names a file
            if len(inside) == 1:
                files.append(inside[0])
            else:
                directories.add(inside[0])
        if prefix and not files and not directories:
            return None
        listed = [
            {"uri": f"{relative}/{d}", "name": d, "mimeType": DIRECTORY_MIME} for d in sorted(directories)
        ]
        listed += [{"uri": f"{relative}/{f}", "name": f, "mimeType": mime_type(f)} for f in files]
        return listed


def mime_type(path: str) -> str:
    """The MIME type a skill file is served with: Markdown, plain text, else by extension."""
    import mimetypes

    if path.endswith(".md"):
        return "text/markdown"
    return mimetypes.guess_type(path)[0] or "text/plain"


def _frontmatter(manifest: Path) -> dict[str, Any]:
    text = manifest.read_text(encoding="utf-8").removeprefix("\ufeff")
    found = _FRONTMATTER.match(text)
    if found is None:
        raise ConfigError(f"skill {str(manifest)!r}: does not begin with --- delimited YAML frontmatter")
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        raise MissingDependencyError("skills read YAML frontmatter: pip install pyyaml") from None
    try:
        parsed = yaml.safe_load(found.group(1))
    except yaml.YAMLError as exc:
        raise ConfigError(f"skill {str(manifest)!r}: frontmatter is not valid YAML: {exc}") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"skill {str(manifest)!r}: frontmatter must be a YAML mapping")
    return parsed
