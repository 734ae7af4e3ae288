"""Translate toolkernel filters into Qdrant filters, refusing what Qdrant cannot evaluate.

The output is the Qdrant REST shape as plain dicts (``{"must": [...]}``), which both
backends accept: ``qdrant-client`` validates it into ``models.Filter`` and the embedded
engine's objects are built from it by :mod:`toolkernel_qdrant.edge_store`.

Mapping (metadata lives under the payload key ``metadata``): ``$eq`` on a string or boolean
is a ``match``; on a number it is a closed ``range`` so integers and floats compare as numbers
(as the reference semantics say); ``$in`` is a ``match.any`` for strings plus one condition
per other value; ``$ne``/``$nin``/``$nor``/``$not`` are ``must_not``; ``$all`` is one ``must``
per value; ``$exists`` is (not) ``is_empty`` — exact because metadata never holds null or an
empty list. Qdrant matches a list-valued field if any element matches, as the filter
language does. ``$regex`` and range operators on strings have no Qdrant equivalent and raise.

A backend that stores some scalars differently in the payload passes ``encode``, applied to
every value in the filter the same way it was applied to the stored metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolkernel.filters import And, Condition, Filter, Node, Nor, Not, Or, require_supported
from toolkernel.vectors import UnsupportedFilterError

SUPPORTED_OPERATORS: frozenset[str] = frozenset(
    {
        "$eq",
        "$ne",
        "$gt",
        "$gte",
        "$lt",
        "$lte",
        "$in",
        "$nin",
        "$all",
        "$exists",
        "$and",
        "$or",
        "$not",
        "$nor",
    }
)
"""Every operator of the filter language except ``$regex``."""

METADATA_KEY = "metadata"
"""The payload key under which a record's metadata is stored."""

_RANGE = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_PATH_SPECIALS = frozenset('.[]"')

QdrantFilter = dict[str, list[dict[str, Any]]]
"""A Qdrant filter in its REST shape: ``{"must" | "should" | "must_not": [condition, ...]}``."""


def _identity(value: Any) -> Any:
    return value


def to_qdrant(store: str, flt: Filter, encode: Callable[[Any], Any] = _identity) -> QdrantFilter:
    """The Qdrant filter equivalent to ``flt``; :class:`UnsupportedFilterError` for what has none."""
    require_supported(store, SUPPORTED_OPERATORS, flt)
    condition = _Translator(store, encode).node(flt.root)
    return condition if set(condition) <= {"must", "should", "must_not"} else {"must": [condition]}


class _Translator:
    """Walks the filter AST for one store and one payload encoding."""

    def __init__(self, store: str, encode: Callable[[Any], Any]) -> None:
        self.store = store
        self.encode = encode

    def node(self, node: Node) -> dict[str, Any]:
        """The Qdrant condition (or nested filter) for ``node``."""
        if isinstance(node, And):
            return {"must": [self.node(item) for item in node.items]}
        if isinstance(node, Or):
            return {"should": [self.node(item) for item in node.items]}
        if isinstance(node, Nor):
            return {"must_not": [self.node(item) for item in node.items]}
        if isinstance(node, Not):
            return {"must_not": [self.node(node.item)]}
        return self.condition(node)

    def condition(self, cond: Condition) -> dict[str, Any]:
        """The Qdrant condition for one field test."""
        if _PATH_SPECIALS & set(cond.field):
            raise UnsupportedFilterError(
                self.store, cond.op, f"Qdrant reads '.', '[', ']' and '\"' in field {cond.field!r} as a path"
            )
        key = f"{METADATA_KEY}.{cond.field}"
        values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
        if cond.op == "$eq":
            return self.equals(key, values[0])
        if cond.op == "$ne":
            return {"must_not": [self.equals(key, values[0])]}
        if cond.op == "$in":
            return self.any_of(key, values)
        if cond.op == "$nin":
            return {"must_not": [self.any_of(key, values)]}
        if cond.op == "$all":
            return {"must": [self.equals(key, v) for v in values]}
        if cond.op == "$exists":
            empty = {"is_empty": {"key": key}}
            return {"must_not": [empty]} if cond.value else empty
        if cond.op in _RANGE and not isinstance(cond.value, str):
            return {"key": key, "range": {_RANGE[cond.op]: cond.value}}
        if cond.op in _RANGE:
            raise UnsupportedFilterError(
                self.store, cond.op, "Qdrant ranges compare numbers only, not strings"
            )
        raise UnsupportedFilterError(self.store, cond.op)

    def equals(self, key: str, value: Any) -> dict[str, Any]:
        """Equality: a ``match`` for strings and booleans, a closed ``range`` for numbers."""
        stored = self.encode(value)
        if isinstance(stored, bool | str):
            return {"key": key, "match": {"value": stored}}
        return {"key": key, "range": {"gte": stored, "lte": stored}}

    def any_of(self, key: str, values: tuple[Any, ...]) -> dict[str, Any]:
        """Membership: one ``match.any`` for the strings, one equality per other value."""
        strings = [self.encode(v) for v in values if isinstance(self.encode(v), str)]
        parts = [self.equals(key, v) for v in values if not isinstance(self.encode(v), str)]
        if strings:
            parts.insert(0, {"key": key, "match": {"any": strings}})
        return parts[0] if len(parts) == 1 else {"should": parts}
