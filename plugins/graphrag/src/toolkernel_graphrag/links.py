"""Explicit links between documents: markdown and HTML hrefs, and the keys a document answers to.

A link and its target meet on a key: the last path segment of the link without extension,
fragment or query (``../guide.md#hooks`` → ``guide``), and the same of a document's id and
source path. Links to other sites keep their host so ``https://a.org/x`` and a local ``x.md``
do not meet.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

_MARKDOWN_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_HREF = re.compile(r"""<a\s[^>]*?href\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_SKIP = ("mailto:", "javascript:", "tel:", "data:")


def _stem(path: str) -> str:
    name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
    if "." in name:
        name = name.rsplit(".", 1)[0]
    return name.casefold()


def link_key(target: str) -> str | None:
    """The key a link target points at, or ``None`` for links that lead to no document."""
    target = target.strip()
    if not target or target.startswith("#") or target.lower().startswith(_SKIP):
        return None
    parts = urlsplit(target)
    stem = _stem(parts.path)
    if not stem:
        return None
    host = parts.netloc.casefold()
    return f"link:{host}/{stem}" if host else f"link:{stem}"


def document_keys(document_id: str, source: str | None) -> list[str]:
    """The keys under which links reach a document: its id and its source path or URL."""
    keys = {key for key in (link_key(document_id), link_key(source) if source else None) if key}
    return sorted(keys)


def extract_links(text: str) -> list[str]:
    """Keys of every markdown link and HTML ``href`` in ``text``, each once, in order."""
    found: dict[str, int] = {}
    for pattern in (_MARKDOWN_LINK, _HTML_HREF):
        for match in pattern.finditer(text):
            key = link_key(match.group(1))
            if key is not None:
                found.setdefault(key, match.start())
    return sorted(found, key=found.__getitem__)
