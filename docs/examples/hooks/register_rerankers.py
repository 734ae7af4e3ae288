"""A reranker that scores passages by the share of the query's words they contain."""

from toolkernel import hookimpl


class WordOverlapReranker:
    def __init__(self, lowercase=True):
        self.lowercase = lowercase

    def _words(self, text):
        return set((text.lower() if self.lowercase else text).split())

    async def score(self, query, passages):
        wanted = self._words(query)
        if not wanted:
            return [0.0 for _ in passages]
        return [len(wanted & self._words(p)) / len(wanted) for p in passages]


@hookimpl
def register_rerankers(registry):
    registry.add("word-overlap", WordOverlapReranker)
