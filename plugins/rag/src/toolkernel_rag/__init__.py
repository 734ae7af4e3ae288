"""toolkernel-rag: knowledge bases — ingest documents, serve them as MCP tools with hybrid retrieval.

::

    async with await KnowledgeBase.open("docs", create=True) as kb:
        await ingest(kb, ["docs/"])
        server = kb_server(kb)            # or mount_kb(my_server, kb, KBServerOptions(...))

The names below load on first use: the plugin module (``toolkernel_rag.plugin``) is
imported whenever toolkernel starts, and must not pull in numpy, SQLite or the backends.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkernel_rag.ingest import IngestReport as IngestReport
    from toolkernel_rag.ingest import ingest as ingest
    from toolkernel_rag.kb import KnowledgeBase as KnowledgeBase
    from toolkernel_rag.layout import KBError as KBError
    from toolkernel_rag.server import KBServerOptions as KBServerOptions
    from toolkernel_rag.server import effective_filter as effective_filter
    from toolkernel_rag.server import kb_server as kb_server
    from toolkernel_rag.server import mount_kb as mount_kb

_WHERE = {
    "IngestReport": "toolkernel_rag.ingest",
    "ingest": "toolkernel_rag.ingest",
    "KnowledgeBase": "toolkernel_rag.kb",
    "KBError": "toolkernel_rag.layout",
    "KBServerOptions": "toolkernel_rag.server",
    "effective_filter": "toolkernel_rag.server",
    "kb_server": "toolkernel_rag.server",
    "mount_kb": "toolkernel_rag.server",
}

__all__ = [
    "IngestReport",
    "KBError",
    "KBServerOptions",
    "KnowledgeBase",
    "effective_filter",
    "ingest",
    "kb_server",
    "mount_kb",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'toolkernel_rag' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
