"""Plain text, markdown and files without a suffix, in whatever common encoding they were saved.

UTF-8 (with or without a byte-order mark) is tried first, since most files are; anything
else is detected by charset-normalizer (Latin-1, Windows-1252, UTF-16, Shift-JIS, ...). A
file whose bytes look binary (a NUL byte in its first 8 KiB that is not UTF-16, or no
encoding fits) raises :class:`NotText`, so a walk counts it as an unsupported file.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolkernel.readers import ReadDocument

_SNIFF = 8192


class NotText(ValueError):
    """The bytes are not text in any common encoding."""


def decode(data: bytes, where: str = "the file") -> str:
    """``data`` as text: UTF-8 first, else the encoding charset-normalizer finds."""
    if data.startswith(codecs.BOM_UTF8):
        return data[len(codecs.BOM_UTF8) :].decode("utf-8")
    utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    if not utf16:
        if b"\x00" in data[:_SNIFF]:
            raise NotText(f"{where} holds binary data (NUL bytes), not text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        raise NotText(f"{where} is not text in any common encoding")
    # Fewest garbled characters first, then the most coherent language; a short text gives
    # many equal candidates, and among those Windows-1252 (a superset of Latin-1) is the
    # legacy encoding a file most likely has.
    least = min(m.chaos for m in matches)
    tied = [m for m in matches if m.chaos <= least + 1e-6]
    top = max(m.coherence for m in tied)
    tied = [m for m in tied if m.coherence >= top - 1e-6]
    best = next((m for m in tied if "cp1252" in m.could_be_from_charset), tied[0])
    return str(best)


def read_text_file(path: Path) -> str:
    """The text of the file at ``path``, its encoding detected."""
    return decode(path.read_bytes(), path.name)


def read_text(path: Path) -> Iterator[ReadDocument]:
    """``.txt``, ``.rst``, ``.log`` and files without a suffix: the text as it is."""
    yield ReadDocument(read_text_file(path), "text")


def read_markdown(path: Path) -> Iterator[ReadDocument]:
    """Markdown: YAML front matter becomes metadata; headings make each chunk's header path."""
    text, meta = front_matter(read_text_file(path))
    yield ReadDocument(text, "markdown", meta)


def front_matter(raw: str) -> tuple[str, dict[str, Any]]:
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
    meta = {str(k): plain(v) for k, v in data.items() if is_metadata_value(plain(v))}
    return body, meta


def plain(value: Any) -> Any:
    """Dates and other YAML scalars as strings; lists element-wise."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool | dict):
        return value
    return str(value)


def is_metadata_value(value: Any) -> bool:
    """Scalars (not NaN) and non-empty lists of scalars: what every store keeps as metadata."""
    if isinstance(value, str | int | float | bool):
        return not (isinstance(value, float) and value != value)
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str | int | float | bool) for v in value)
    )
