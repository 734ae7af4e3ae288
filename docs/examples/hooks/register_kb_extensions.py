"""A knowledge-base extension: a ``title`` search mode that ranks chunks by query words in their title.

It keeps ``{chunk id: title words}`` as JSON in the knowledge base's state for it, fed by ingestion.
"""

import json

from toolkernel import hookimpl
from toolkernel.knowledge import ScoredChunk


class TitleIndex:
    modes = ("title",)

    def __init__(self, context):
        self.context = context
        self.titles = None

    async def _load(self):
        # State the knowledge base keeps for the extension: a file beside an embedded knowledge
        # base, a row of its schema on PostgreSQL, so a server on another host reads it too.
        if self.titles is None:
            state = await self.context.load_state("titles.json")
            self.titles = json.loads(state.data) if state else {}
        return self.titles

    async def on_ingest(self, batch):
        await self._load()
        for document_id in batch.deleted:
            self.titles = {k: v for k, v in self.titles.items() if v["document"] != document_id}
        for document in batch.upserted:
            # A changed document replaces what was held for it.
            self.titles = {k: v for k, v in self.titles.items() if v["document"] != document.document_id}
            for chunk in document.chunks:
                words = str(chunk.metadata.get("title", "")).lower().split()
                self.titles[chunk.id] = {"document": document.document_id, "words": words}
        await self.context.save_state("titles.json", json.dumps(self.titles).encode())

    async def retrieve(self, mode, request):
        wanted = set(request.query.lower().split())
        titles = await self._load()
        order = sorted(
            ((len(wanted & set(v["words"])), k) for k, v in titles.items()), key=lambda s: (-s[0], s[1])
        )
        order = [(score, k) for score, k in order if score]
        # Honour the effective filter: the server's mandatory filter is part of it.
        chunks = await self.context.load_chunks([k for _, k in order])
        allowed = {c.id for c in chunks if self.context.matches(request.filter, c.metadata)}
        return [ScoredChunk(k, float(score)) for score, k in order if k in allowed][: request.top_k]

    def tools(self, search):
        return []

    async def aclose(self):
        pass


@hookimpl
def register_kb_extensions(registry):
    registry.add("titles", TitleIndex)
