"""A vector store kept in a dict: exact search, every filter operator, no persistence."""

import math

from toolkernel import hookimpl
from toolkernel.filters import ALL_OPERATORS, coerce_filter, matches
from toolkernel.vectors import (
    IndexExistsError,
    IndexInfo,
    IndexNotFoundError,
    QueryResult,
    VectorInputError,
    check_index_args,
    check_options,
    check_top_k,
    check_upsert,
    check_vector,
)


def _score(metric, a, b):
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if metric == "dot":
        return dot
    if metric == "euclidean":
        return -math.dist(a, b)
    norms = math.hypot(*a) * math.hypot(*b)
    return dot / norms if norms else 0.0


class DictStore:
    name = "dict"
    supported_filter_operators = ALL_OPERATORS

    def __init__(self):
        self._indexes = {}  # name -> (IndexInfo without count, {id: (vector, metadata, document)})

    def _index(self, name):
        if name not in self._indexes:
            raise IndexNotFoundError(name)
        return self._indexes[name]

    async def create_index(self, name, dimension, metric="cosine"):
        check_index_args(name, dimension, metric)
        if name in self._indexes:
            info, _ = self._indexes[name]
            if (info.dimension, info.metric) != (dimension, metric):
                raise IndexExistsError(name, await self.describe_index(name))
            return
        self._indexes[name] = (IndexInfo(name=name, dimension=dimension, metric=metric, count=0), {})

    async def describe_index(self, name):
        info, rows = self._index(name)
        return info.model_copy(update={"count": len(rows)})

    async def list_indexes(self):
        return sorted(self._indexes)

    async def delete_index(self, name):
        self._index(name)
        del self._indexes[name]

    async def upsert(self, index, ids, vectors, metadata=None, documents=None):
        info, rows = self._index(index)
        batch = check_upsert(info.dimension, ids, vectors, metadata, documents)
        for id_, vector, meta, doc in zip(*batch, strict=True):
            rows[id_] = (vector, meta, doc)

    async def query(self, index, vector, top_k=10, filter=None, include_vectors=False, options=None):
        info, rows = self._index(index)
        vector = check_vector(vector, info.dimension)
        check_top_k(top_k)
        check_options(self.name, options, known=())
        where = coerce_filter(filter)
        hits = [
            QueryResult(
                id=id_,
                score=_score(info.metric, vector, stored),
                metadata=meta,
                document=doc,
                vector=stored if include_vectors else None,
            )
            for id_, (stored, meta, doc) in rows.items()
            if where is None or matches(where, meta)
        ]
        return sorted(hits, key=lambda hit: hit.score, reverse=True)[:top_k]

    async def delete(self, index, ids=None, filter=None):
        _, rows = self._index(index)
        if ids is None and filter is None:
            raise VectorInputError("delete: pass ids, a filter or both")
        where = coerce_filter(filter)
        for id_ in list(ids if ids is not None else rows):
            if id_ in rows and (where is None or matches(where, rows[id_][1])):
                del rows[id_]

    async def count(self, index, filter=None):
        _, rows = self._index(index)
        where = coerce_filter(filter)
        return sum(1 for _, meta, _ in rows.values() if where is None or matches(where, meta))

    async def aclose(self):
        self._indexes.clear()


@hookimpl
def register_vector_stores(registry):
    registry.add("dict", DictStore)
