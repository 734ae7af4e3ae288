"""Translate a parsed metadata filter into a SQL condition on the ``metadata`` jsonb column.

Every value travels as a bound parameter: field names are bound as text keys and operands
as a jsonb ``vars`` document for SQL/JSON path predicates, whose lax mode gives MongoDB's
any-element semantics on lists and whose comparisons never match across types (so booleans
never equal numbers and strings compare by code point), as :func:`toolkernel.filters.matches`
requires. Each fragment is strictly true or false, never NULL, so negation is exact.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from toolkernel.filters import And, Condition, Filter, Node, Not, Or

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
        "$regex",
        "$and",
        "$or",
        "$not",
        "$nor",
    }
)
"""Every operator of the filter language: Postgres evaluates all of them."""

# Constant SQL/JSON path templates; operands arrive through the bound ``vars`` document.
_PATHS: dict[str, str] = {
    "$eq": "$ ? (@ == $v)",
    "$gt": "$ ? (@ > $v)",
    "$gte": "$ ? (@ >= $v)",
    "$lt": "$ ? (@ < $v)",
    "$lte": "$ ? (@ <= $v)",
    "$in": "$ ? (@ == $v[*])",
}

# Scalars and list elements of a field, for $regex (which SQL/JSON paths only take as a literal).
_REGEX = sql.SQL(
    "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(metadata -> {field}) "
    "WHEN 'array' THEN metadata -> {field} ELSE jsonb_build_array(metadata -> {field}) END) AS e(v) "
    "WHERE jsonb_typeof(e.v) = 'string' AND (e.v #>> '{{}}') ~ {pattern})"
)


NO_CONDITION = sql.SQL("TRUE")
"""The condition of a query without a filter (the same object every time, so callers can spot it)."""


def where_clause(filter: Filter | None) -> tuple[sql.Composable, list[Any]]:
    """``(condition, params)`` for ``filter``; :data:`NO_CONDITION` and no params when there is none."""
    if filter is None:
        return NO_CONDITION, []
    params: list[Any] = []
    return _node(filter.root, params), params


def _node(node: Node, params: list[Any]) -> sql.Composable:
    """The SQL for one AST node, appending its bound values to ``params`` in placeholder order."""
    if isinstance(node, Condition):
        return _condition(node, params)
    if isinstance(node, Not):
        return sql.SQL("NOT ({})").format(_node(node.item, params))
    if isinstance(node, And) and not node.items:
        return sql.SQL("TRUE")
    parts = [sql.SQL("({})").format(_node(item, params)) for item in node.items]
    if isinstance(node, And):
        return sql.SQL(" AND ").join(parts)
    if isinstance(node, Or):
        return sql.SQL(" OR ").join(parts)
    return sql.SQL("NOT ({})").format(sql.SQL(" OR ").join(parts))


def _condition(cond: Condition, params: list[Any]) -> sql.Composable:
    """The SQL for one field test, appending its bound values to ``params``."""
    op = cond.op
    if op == "$exists":
        params.append(cond.field)
        test = sql.SQL("jsonb_exists(metadata, {})").format(sql.Placeholder())
        return test if cond.value else sql.SQL("NOT {}").format(test)
    if op == "$regex":
        params.extend([cond.field, cond.field, cond.field, cond.value])
        return _REGEX.format(field=sql.Placeholder(), pattern=sql.Placeholder())
    if op == "$ne":
        return sql.SQL("NOT {}").format(_path_exists("$eq", cond.field, cond.value, params))
    if op == "$nin":
        return sql.SQL("NOT {}").format(_path_exists("$in", cond.field, cond.value, params))
    if op == "$all":
        values = cond.value if isinstance(cond.value, tuple) else (cond.value,)
        return sql.SQL(" AND ").join(_path_exists("$eq", cond.field, v, params) for v in values)
    return _path_exists(op, cond.field, cond.value, params)


def _path_exists(op: str, field: str, value: Any, params: list[Any]) -> sql.Composable:
    """``jsonb_path_exists`` on the field's value, false (not NULL) when the field is missing."""
    operand = list(value) if isinstance(value, tuple) else value
    params.extend([field, Jsonb({"v": operand})])
    return sql.SQL("COALESCE(jsonb_path_exists(metadata -> {}, {}, {}), false)").format(
        sql.Placeholder(), sql.Literal(_PATHS[op]), sql.Placeholder()
    )
