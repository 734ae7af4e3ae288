"""A vector store kept in a dict: exact search, every filter operator, no persistence.

``MatchingStore`` writes the contract's methods (argument checks, errors, filters
evaluated with ``matches()``); the store writes only what its backend, here a dict, does.
"""

import math

from toolkernel import hookimpl
from toolkernel.matching_store import MatchingStore, OpenIndex
from toolkernel.vectors import IndexNotFoundError


def _score(metric, a, b):
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if metric == "dot":
        return dot
    if metric == "euclidean":
        return -math.dist(a, b)
    norms = math.hypot(*a) * math.hypot(*b)
    return dot / norms if norms else 0.0


class DictStore(MatchingStore):
    name = "dict"

    async def connect(self):
        return {}  # index name -> OpenIndex({id: (vector, metadata, document)}, dimension, metric)

    async def open_index(self, name):
        indexes = await self.connection()
        if name not in indexes:
            raise IndexNotFoundError(name)
        return indexes[name]

    async def make_index(self, name, dimension, metric):
        indexes = await self.connection()
        if name in indexes:
            raise FileExistsError(name)  # create_index then compares with the existing index
        indexes[name] = OpenIndex({}, dimension, metric)

    async def index_names(self):
        return list(await self.connection())

    async def drop_index(self, name):
        del (await self.connection())[name]

    async def write(self, index, batch):
        for id_, vector, meta, doc in zip(*batch, strict=True):
            index.handle[id_] = (vector, meta, doc)

    async def nearest(self, index, vector, limit):
        hits = [
            {"id": i, "score": _score(index.metric, vector, v), "metadata": m, "document": d, "vector": v}
            for i, (v, m, d) in index.handle.items()
        ]
        return sorted(hits, key=lambda hit: hit["score"], reverse=True)[:limit]

    async def records(self, index):
        return [{"id": i, "metadata": m} for i, (_, m, _) in index.handle.items()]

    async def remove(self, index, ids):
        for id_ in ids:
            index.handle.pop(id_, None)

    async def size(self, index):
        return len(index.handle)


@hookimpl
def register_vector_stores(registry):
    registry.add("dict", DictStore)
