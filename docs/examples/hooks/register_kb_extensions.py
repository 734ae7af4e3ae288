"""A knowledge-base extension: a ``title`` search mode that ranks chunks by query words in their title.

It keeps ``{chunk id: title words}`` in a JSON file in its own directory, fed by ingestion.
"""

import json

from toolkernel import hookimpl
from toolkernel.knowledge import ScoredChunk


class TitleIndex:
    modes = ("title",)

    def __init__(self, context):
        self.context = context
        self.file = context.directory / "titles.json"
        self.titles = json.loads(self.file.read_text()) if self.file.exists() else {}

    async def on_ingest(self, batch):
        for document_id in batch.deleted:
            self.titles = {k: v for k, v in self.titles.items() if v["document"] != document_id}
        for document in batch.upserted:
            # A changed document replaces what was held for it.
            self.titles = {k: v for k, v in self.titles.items() if v["document"] != document.document_id}
            for chunk in document.chunks:
                words = str(chunk.metadata.get("title", "")).lower().split()
                self.titles[chunk.id] = {"document": document.document_id, "words": words}
        self.file.write_text(json.dumps(self.titles))

    async def retrieve(self, mode, request):
        wanted = set(request.query.lower().split())
        order = sorted(
            ((len(wanted & set(v["words"])), k) for k, v in self.titles.items()), key=lambda s: (-s[0], s[1])
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
