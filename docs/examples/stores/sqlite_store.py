"""A vector store on SQLite: settings from [plugins.sqlite], filters translated to SQL.

Each metadata value is a row of a side table (one row per element of a list), so the
filter AST translates to EXISTS tests over those rows. Vectors are scored in Python:
SQLite has no vector index, and this store shows translation, not speed.
"""

import math
import sqlite3
from array import array

from pydantic import BaseModel, Field

from toolkernel import hookimpl
from toolkernel import store_helpers as sh
from toolkernel.filters import ALL_OPERATORS, And, Condition, Nor, Not, Or, regex_search
from toolkernel.threads import WorkerThreads
from toolkernel.vectors import IndexInfo, IndexNotFoundError, check_upsert, query_results

SCHEMA = """
CREATE TABLE IF NOT EXISTS indexes (name TEXT PRIMARY KEY, dimension INT, metric TEXT);
CREATE TABLE IF NOT EXISTS records (rid INTEGER PRIMARY KEY, idx TEXT, id TEXT, vector BLOB,
    document TEXT, UNIQUE (idx, id));
CREATE TABLE IF NOT EXISTS meta (rid INT, key TEXT, pos INT, kind TEXT, value);
CREATE INDEX IF NOT EXISTS meta_by_record ON meta (rid, key);
"""
RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


class SQLiteSettings(BaseModel):
    path: str = Field(":memory:", description="The database file; ':memory:' keeps nothing.")


def kind(value):  # booleans never equal numbers, so each value carries its kind
    return "b" if isinstance(value, bool) else "s" if isinstance(value, str) else "n"


def any_value(field, test, params):
    """SQL true when some value of ``field`` (any element of a list) passes ``test``."""
    sql = f"EXISTS (SELECT 1 FROM meta m WHERE m.rid = r.rid AND m.key = ? AND ({test}))"
    return sql, [field, *params]


def equals(values):
    tests = " OR ".join("(m.kind = ? AND m.value = ?)" for _ in values)
    return tests, [x for v in values for x in (kind(v), v)]


def translate(node):
    """The filter AST as a SQL condition on ``records r`` and its parameters."""
    if isinstance(node, And | Or | Nor):
        if not node.items:
            return "1", []
        parts = [translate(item) for item in node.items]
        joined = (" AND " if isinstance(node, And) else " OR ").join(f"({sql})" for sql, _ in parts)
        params = [p for _, ps in parts for p in ps]
        return (f"NOT ({joined})" if isinstance(node, Nor) else joined), params
    if isinstance(node, Not):
        sql, params = translate(node.item)
        return f"NOT ({sql})", params
    assert isinstance(node, Condition)
    field, op, value = node.field, node.op, node.value
    if op == "$exists":
        sql, params = any_value(field, "1", [])
        return (sql if value else f"NOT {sql}"), params
    if op in ("$eq", "$ne", "$in", "$nin"):
        sql, params = any_value(field, *equals(value if isinstance(value, tuple) else (value,)))
        return (sql if op in ("$eq", "$in") else f"NOT {sql}"), params
    if op == "$all":
        parts = [any_value(field, *equals((v,))) for v in value]
        return " AND ".join(sql for sql, _ in parts), [p for _, ps in parts for p in ps]
    if op == "$regex":
        return any_value(field, "m.kind = 's' AND regexp(?, m.value)", [value])
    return any_value(field, f"m.kind = ? AND m.value {RANGE_SQL[op]} ?", [kind(value), value])


def score(metric, a, b):
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if metric == "dot":
        return dot
    if metric == "euclidean":
        return -math.dist(a, b)
    return dot / ((math.hypot(*a) * math.hypot(*b)) or 1.0)


class SQLiteStore:
    name = "sqlite"
    supported_filter_operators = ALL_OPERATORS

    def __init__(self, settings: SQLiteSettings):  # no I/O here: connect on first use
        self.settings = settings
        self._thread = WorkerThreads(1, "sqlite-store")  # one thread owns the connection
        self._db = sh.LazyResource(
            lambda: self._thread.run(self._connect), lambda db: self._thread.run(db.close)
        )

    async def _run(self, fn, *args):
        db = await self._db.get()
        return await self._thread.run(lambda: fn(db, *args), finish_on_cancel=True)

    def _connect(self):
        db = sqlite3.connect(self.settings.path, check_same_thread=False)
        db.create_function("regexp", 2, regex_search, deterministic=True)
        db.executescript(SCHEMA)
        return db

    @staticmethod
    def _where(index, parsed):
        if parsed is None:
            return "r.idx = ?", [index]
        sql, params = translate(parsed.root)
        return f"r.idx = ? AND ({sql})", [index, *params]

    @staticmethod
    def _info(db, name):
        row = db.execute("SELECT dimension, metric FROM indexes WHERE name = ?", [name]).fetchone()
        if row is None:
            raise IndexNotFoundError(name)
        count = db.execute("SELECT count(*) FROM records WHERE idx = ?", [name]).fetchone()[0]
        return IndexInfo(name=name, dimension=row[0], metric=row[1], count=count)

    async def create_index(self, name, dimension, metric="cosine"):
        def create(db):  # fails if the name is taken: create_index_once then compares
            with db:
                db.execute("INSERT INTO indexes VALUES (?, ?, ?)", [name, dimension, metric])

        await sh.create_index_once(self, name, dimension, metric, lambda: self._run(create))

    async def describe_index(self, name):
        return await self._run(self._info, name)

    async def list_indexes(self):
        names = await self._run(lambda db: db.execute("SELECT name FROM indexes ORDER BY name").fetchall())
        return [name for (name,) in names]

    async def delete_index(self, name):
        def drop(db):
            self._info(db, name)
            with db:
                db.execute("DELETE FROM meta WHERE rid IN (SELECT rid FROM records WHERE idx = ?)", [name])
                db.execute("DELETE FROM records WHERE idx = ?", [name])
                db.execute("DELETE FROM indexes WHERE name = ?", [name])

        await self._run(drop)

    async def upsert(self, index, ids, vectors, metadata=None, documents=None):
        def write(db):
            batch = check_upsert(self._info(db, index).dimension, ids, vectors, metadata, documents)
            with db:  # one transaction: a failed batch writes nothing
                for id_, vector, meta, doc in zip(*batch, strict=True):
                    rid = db.execute(
                        "INSERT INTO records (idx, id, vector, document) VALUES (?, ?, ?, ?) ON CONFLICT "
                        "DO UPDATE SET vector = excluded.vector, document = excluded.document RETURNING rid",
                        [index, id_, array("d", vector).tobytes(), doc],
                    ).fetchone()[0]
                    db.execute("DELETE FROM meta WHERE rid = ?", [rid])
                    db.executemany("INSERT INTO meta VALUES (?, ?, ?, ?, ?)", meta_rows(rid, meta))

        await self._run(write)

    async def query(self, index, vector, top_k=10, filter=None, include_vectors=False, options=None):
        def search(db):
            info = self._info(db, index)
            args = sh.check_query(self, info.dimension, vector, top_k, filter, options)
            where, params = self._where(index, args.filter)
            hits = []
            for rid, id_, blob, doc in db.execute(
                f"SELECT rid, id, vector, document FROM records r WHERE {where}", params
            ):
                stored = array("d", blob).tolist()
                hits.append((score(info.metric, args.vector, stored), rid, id_, doc, stored))
            hits = sorted(hits, key=lambda hit: hit[0], reverse=True)[:top_k]
            return query_results(
                [
                    {"id": id_, "score": s, "document": doc, "metadata": metadata_of(db, rid)}
                    | ({"vector": stored} if include_vectors else {})
                    for s, rid, id_, doc, stored in hits
                ]
            )

        return await self._run(search)

    async def delete(self, index, ids=None, filter=None):
        def remove(db):
            self._info(db, index)
            wanted, parsed = sh.check_delete(self, ids, filter)
            where, params = self._where(index, parsed)
            if wanted is not None:
                where += f" AND r.id IN ({', '.join('?' for _ in wanted)})"
                params += wanted
            rids = [(rid,) for (rid,) in db.execute(f"SELECT rid FROM records r WHERE {where}", params)]
            with db:
                db.executemany("DELETE FROM meta WHERE rid = ?", rids)
                db.executemany("DELETE FROM records WHERE rid = ?", rids)

        await self._run(remove)

    async def count(self, index, filter=None):
        def count(db):
            self._info(db, index)
            where, params = self._where(index, sh.check_filter(self, filter))
            return db.execute(f"SELECT count(*) FROM records r WHERE {where}", params).fetchone()[0]

        return await self._run(count)

    async def aclose(self):
        await self._db.aclose()
        self._thread.close()


def meta_rows(rid, meta):
    """One row per metadata value; ``pos`` is the element's place in a list, -1 for a scalar."""
    rows = []
    for key, value in meta.items():
        for pos, item in enumerate(value) if isinstance(value, list) else [(-1, value)]:
            rows.append((rid, key, pos, kind(item), item))
    return rows


def metadata_of(db, rid):
    rows = db.execute("SELECT key, pos, kind, value FROM meta WHERE rid = ? ORDER BY key, pos", [rid])
    meta = {}
    for key, pos, k, value in rows:
        value = bool(value) if k == "b" else value
        if pos < 0:
            meta[key] = value
        else:
            meta.setdefault(key, []).append(value)
    return meta


@hookimpl
def register_settings(registry):
    registry.add("sqlite", SQLiteSettings)


@hookimpl
def register_vector_stores(registry):
    registry.add("sqlite", SQLiteStore, settings="sqlite")
