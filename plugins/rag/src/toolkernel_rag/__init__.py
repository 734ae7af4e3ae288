"""toolkernel-rag: knowledge bases — ingest documents, serve them as MCP tools with hybrid retrieval.

::

    async with await KnowledgeBase.open("docs", create=True) as kb:
        await ingest(kb, ["docs/"])
        server = kb_server(kb)            # or mount_kb(my_server, kb, KBServerOptions(...))
"""

from toolkernel_rag.ingest import IngestReport as IngestReport
from toolkernel_rag.ingest import ingest as ingest
from toolkernel_rag.kb import KnowledgeBase as KnowledgeBase
from toolkernel_rag.layout import KBError as KBError
from toolkernel_rag.server import KBServerOptions as KBServerOptions
from toolkernel_rag.server import effective_filter as effective_filter
from toolkernel_rag.server import kb_server as kb_server
from toolkernel_rag.server import mount_kb as mount_kb

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
