"""Translate a parsed metadata filter into a Chroma ``where`` document.

Chroma's ``$eq``/``$ne``/``$in``/``$nin`` compare a field's value as a whole, while the
filter language asks whether *any element* of a list matches; list membership is Chroma's
``$contains``/``$not_contains``, which is strict about int versus float. So each equality
becomes "the scalar equals, or the list contains it (as int or float)". Chroma has no
``$exists``, ``$regex`` (on metadata), ``$not`` or ``$nor``, and compares only numbers with
``$gt``/``$gte``/``$lt``/``$lte``: those raise :class:`~toolkernel.vectors.UnsupportedFilterError`.
Range conditions on lists use hidden per-record bound keys the store writes beside every list of
numbers: some element is above ``v`` exactly when the largest is, and below ``v`` when the smallest is.

Chroma compares an int value with a fractional operand truncated toward zero (``{"$eq": 0.5}``
finds ``0``, ``{"$gte": 0.5}`` finds ``0``, ``{"$gt": -0.5}`` misses ``0``), while float values
compare exactly. So a comparison with a fractional operand is spelled as alternatives each
exact or too narrow on both kinds of value, with a whole-number operand where ints need one.
"""

from __future__ import annotations

import math
from typing import Any

from toolkernel.filters import ALL_OPERATORS, And, Condition, Filter, Node, Not, Or
from toolkernel.vectors import UnsupportedFilterError

STORE = "chroma"

SUPPORTED_OPERATORS: frozenset[str] = ALL_OPERATORS - {"$exists", "$regex", "$not", "$nor"}
"""The operators Chroma can evaluate with the filter language's semantics."""

Where = dict[str, Any]

RESERVED_PREFIX = "toolkernel:"
"""Metadata keys the store writes for itself; user metadata may not start with it."""

_BOUND_FOR = {"$gt": "max", "$gte": "max", "$lt": "min", "$lte": "min"}


def bound_key(bound: str, field: str) -> str:
    """The hidden key holding the smallest (``"min"``) or largest (``"max"``) number of list ``field``."""
    return f"{RESERVED_PREFIX}{bound}:{field}"


def where_document(filter: Filter | None) -> Where | None:
    """The Chroma ``where`` for ``filter`` (``None`` when it tests nothing)."""
    if filter is None:
        return None
    return _node(filter.root)


def _node(node: Node) -> Where | None:
    """The ``where`` for ``node``; ``None`` stands for a condition every record meets (an empty ``$and``)."""
    if isinstance(node, Condition):
        return _condition(node)
    if isinstance(node, And):
        parts = [_node(item) for item in node.items]
        kept = [part for part in parts if part is not None]
        return _all_of(kept) if kept else None
    if isinstance(node, Or):
        parts = [_node(item) for item in node.items]
        if any(part is None for part in parts):
            return None
        return _any_of([part for part in parts if part is not None])
    # require_supported refuses $not and $nor before translation; this keeps the mapping total.
    raise UnsupportedFilterError(STORE, "$not" if isinstance(node, Not) else "$nor")


def _condition(cond: Condition) -> Where:
    """The ``where`` for one field test, with the any-element semantics of the filter language."""
    field, op, value = cond.field, cond.op, cond.value
    if field.startswith(RESERVED_PREFIX):
        raise UnsupportedFilterError(
            STORE, op, f"metadata keys starting with {RESERVED_PREFIX!r} are reserved"
        )
    values = value if isinstance(value, tuple) else (value,)
    if op == "$eq":
        return _equals(field, value)
    if op == "$ne":
        return _differs(field, value)
    if op == "$in":
        return _any_of([_equals(field, v) for v in values])
    if op == "$nin":
        return _all_of([_differs(field, v) for v in values])
    if op == "$all":
        return _all_of([_equals(field, v) for v in values])
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(value, str):
            raise UnsupportedFilterError(STORE, op, "Chroma compares numbers only, not strings")
        return _any_of([_compare(field, op, value), _compare(bound_key(_BOUND_FOR[op], field), op, value)])
    raise UnsupportedFilterError(STORE, op)


def _equals(field: str, value: Any) -> Where:
    """The scalar equals ``value``, or the list holds it."""
    return _any_of([_compare(field, "$eq", value), *({field: {"$contains": v}} for v in _spellings(value))])


def _differs(field: str, value: Any) -> Where:
    """The scalar differs from ``value`` (or is missing) and no list element equals it."""
    return _all_of(
        [_compare(field, "$ne", value), *({field: {"$not_contains": v}} for v in _spellings(value))]
    )


def _compare(field: str, op: str, value: Any) -> Where:
    """``field op value`` on a scalar, exact for int and float values alike.

    A fractional ``v`` reaches Chroma's int values as ``t = trunc(v)``. Each alternative below
    is exact on one kind of value and never too wide on the other: ``{"$eq": v}`` with
    ``{"$ne": t}`` finds only floats equal to ``v``; ``{"$gt": v}`` finds on ints ``> t``, which
    is ``>= ceil(v)`` for positive ``v`` and narrower for negative ones, and ``{"$gte": ceil(v)}``
    is exact on ints and narrower on floats (ranges below mirror it with ``floor``).
    """
    if not (isinstance(value, float) and math.isfinite(value) and not value.is_integer()):
        return {field: {op: value}}
    whole = int(value)  # what Chroma compares its int values with
    equal_floats = {"$and": [{field: {"$eq": value}}, {field: {"$ne": whole}}]}
    if op == "$eq":
        return equal_floats
    if op == "$ne":
        return {"$or": [{field: {"$ne": value}}, {field: {"$eq": whole}}]}
    if op in ("$gt", "$gte"):
        parts: list[Where] = [{field: {"$gt": value}}, {field: {"$gte": math.ceil(value)}}]
    else:
        parts = [{field: {"$lt": value}}, {field: {"$lte": math.floor(value)}}]
    if op in ("$gte", "$lte"):
        parts.append(equal_floats)
    return {"$or": parts}


def _spellings(value: Any) -> list[Any]:
    """``value`` as Chroma's typed list membership needs it: a whole number as int and as float."""
    if isinstance(value, bool | str):
        return [value]
    if isinstance(value, int):
        return [value, float(value)]
    if isinstance(value, float) and value.is_integer():
        return [value, int(value)]
    return [value]


def _all_of(items: list[Where]) -> Where:
    """``$and`` of one or more ``items`` (Chroma wants two or more, so one is returned as is)."""
    return items[0] if len(items) == 1 else {"$and": items}


def _any_of(items: list[Where]) -> Where:
    """``$or`` of one or more ``items`` (one is returned as is)."""
    return items[0] if len(items) == 1 else {"$or": items}
